'use strict'
// Beyond 0.1.1 (issue 6): per-call options, AbortSignal cancellation, hardening options
// (capDrop, securityProfile, requireLimits, apparmor).

const test = require('node:test')
const assert = require('node:assert/strict')
const { kern, realKern, rand, wrapKern, fakeKern, sandboxWith, procsMatching, waitFor, sessionDirs } = require('./helpers')

const { Sandbox, SandboxError } = kern

async function abortOnceRunning(marker, ac, reason) {
  assert.ok(await waitFor(() => procsMatching(marker).length > 0, 15_000), 'the box started')
  if (reason === undefined) ac.abort()
  else ac.abort(reason)
  return Date.now()
}

// --- per-call options ------------------------------------------------------------------------

test('per-call timeoutS overrides the session deadline for that call only', async () => {
  const sbx = await new Sandbox({ timeoutS: 30 }).open()
  try {
    const t0 = Date.now()
    const r = await sbx.runCode('while True: pass', { timeoutS: 1 })
    assert.equal(r.fault && r.fault.type, 'timeout')
    assert.match(r.fault.message, /\b1\s?s/)
    assert.ok(Date.now() - t0 < 5000)
    const ok = await sbx.run(['sh', '-c', 'sleep 1.5; echo done'])
    assert.equal(ok.fault, null, 'the session deadline (30 s) applies again')
    assert.equal(ok.stdout, 'done\n')
    const longer = await new Sandbox({ timeoutS: 1 }).open()
    try {
      const l = await longer.run(['sh', '-c', 'sleep 2; echo later'], { timeoutS: 10 })
      assert.equal(l.fault, null)
      assert.equal(l.stdout, 'later\n')
    } finally {
      await longer.close()
    }
  } finally {
    await sbx.close()
  }
})

test('per-call timeoutS is validated', async () => {
  const sbx = await new Sandbox().open()
  try {
    for (const t of [0, -1, NaN, 'x']) {
      await assert.rejects(sbx.runCode('print(1)', { timeoutS: t }), SandboxError, `timeoutS ${String(t)}`)
      await assert.rejects(sbx.run(['true'], { timeoutS: t }), SandboxError, `run timeoutS ${String(t)}`)
    }
  } finally {
    await sbx.close()
  }
})

test('per-call onStdout/onStderr override the session callbacks; null disables them', async () => {
  const session = { out: [], err: [] }
  const call = { out: [], err: [] }
  const sbx = await new Sandbox({
    onStdout: (c) => session.out.push(c),
    onStderr: (c) => session.err.push(c),
  }).open()
  const code = 'import sys\nprint("o", flush=True)\nprint("e", file=sys.stderr, flush=True)'
  try {
    const r1 = await sbx.runCode(code, { onStdout: (c) => call.out.push(c), onStderr: (c) => call.err.push(c) })
    assert.equal(Buffer.concat(call.out).toString(), r1.stdout)
    assert.equal(Buffer.concat(call.err).toString(), r1.stderr)
    assert.equal(session.out.length + session.err.length, 0, 'session callbacks not called')
    await sbx.runCode(code, { onStdout: null, onStderr: null })
    assert.equal(session.out.length + session.err.length, 0, 'null disables the session callbacks')
    const r3 = await sbx.run(['sh', '-c', 'echo plain'], { onStdout: null })
    assert.equal(r3.stdout, 'plain\n')
    assert.equal(session.out.length, 0)
    assert.ok(session.err.length > 0 || r3.stderr === '', 'onStderr (not overridden) still streams')
    const r4 = await sbx.runCode(code)
    assert.equal(Buffer.concat(session.out).toString(), r4.stdout, 'session callback back for the next call')
  } finally {
    await sbx.close()
  }
})

test('a non-function callback is refused', async () => {
  assert.throws(() => new Sandbox({ onStdout: 'nope' }), TypeError)
  const sbx = await new Sandbox().open()
  try {
    await assert.rejects(sbx.runCode('print(1)', { onStdout: 42 }), TypeError)
  } finally {
    await sbx.close()
  }
})

// --- AbortSignal -----------------------------------------------------------------------------

test('an already-aborted signal rejects at once with signal.reason (default AbortError DOMException)', async () => {
  const sbx = await new Sandbox().open()
  try {
    const ac = new AbortController()
    ac.abort()
    await assert.rejects(sbx.runCode('print(1)', { signal: ac.signal }), (e) => e === ac.signal.reason && e instanceof DOMException && e.name === 'AbortError')
    const custom = new AbortController()
    const why = { custom: 'reason' }
    custom.abort(why)
    await assert.rejects(sbx.run(['true'], { signal: custom.signal }), (e) => e === why)
    await assert.rejects(sbx.runCode('print(1)', { signal: AbortSignal.abort('str-reason') }), (e) => e === 'str-reason')
  } finally {
    await sbx.close()
  }
})

test('abort mid-call tears the box down and rejects with an AbortError DOMException', async () => {
  const marker = `kst-abort-${rand()}`
  const sbx = await new Sandbox({ timeoutS: 60 }).open()
  try {
    const ac = new AbortController()
    const call = sbx.runCode(`# ${marker}\nimport signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)`, { signal: ac.signal })
    call.catch(() => {})
    const t0 = await abortOnceRunning(marker, ac)
    await assert.rejects(call, (e) => e instanceof DOMException && e.name === 'AbortError')
    assert.ok(Date.now() - t0 < 4000, `rejected ${Date.now() - t0} ms after the abort`)
    assert.deepEqual(procsMatching(marker), [], 'nothing left running when the promise settles')
    const after = await sbx.runCode('print("usable")')
    assert.equal(after.stdout, 'usable\n', 'the session is still usable')
  } finally {
    await sbx.close()
  }
})

test('abort mid-call rejects with a custom reason', async () => {
  const marker = `kst-abort2-${rand()}`
  const sbx = await new Sandbox({ timeoutS: 60 }).open()
  try {
    const ac = new AbortController()
    const reason = new Error('user pressed stop')
    const call = sbx.run(['sh', '-c', `sleep 60 # ${marker}`], { signal: ac.signal })
    call.catch(() => {})
    await abortOnceRunning(marker, ac, reason)
    await assert.rejects(call, (e) => e === reason)
    assert.ok(await waitFor(() => procsMatching(marker).length === 0, 1000))
  } finally {
    await sbx.close()
  }
})

test('aborting at any moment of a call\'s start rejects and leaves nothing running', async () => {
  const sbx = await new Sandbox({ timeoutS: 60 }).open()
  try {
    for (const delay of [0, 1, 3, 8, 15, 30, 60, 120]) {
      const marker = `kst-race-${rand()}`
      const ac = new AbortController()
      const call = sbx.run(['sh', '-c', `sleep 60 # ${marker}`], { signal: ac.signal })
      call.catch(() => {})
      if (delay === 0) ac.abort()
      else setTimeout(() => ac.abort(), delay)
      await assert.rejects(call, (e) => e instanceof DOMException && e.name === 'AbortError', `abort after ${delay} ms`)
      assert.ok(await waitFor(() => procsMatching(marker).length === 0, 1000), `box left running after an abort at ${delay} ms: ${JSON.stringify(procsMatching(marker))}`)
    }
  } finally {
    await sbx.close()
  }
})

test('AbortSignal.timeout() works: rejects with its TimeoutError reason, nothing left running', async () => {
  const marker = `kst-abort5-${rand()}`
  const sbx = await new Sandbox({ timeoutS: 60 }).open()
  try {
    const t0 = Date.now()
    await assert.rejects(
      sbx.run(['sh', '-c', `sleep 60 # ${marker}`], { signal: AbortSignal.timeout(700) }),
      (e) => e instanceof DOMException && e.name === 'TimeoutError',
    )
    assert.ok(Date.now() - t0 < 5000)
    assert.ok(await waitFor(() => procsMatching(marker).length === 0, 1000))
  } finally {
    await sbx.close()
  }
})

test('aborting after the call finished changes nothing', async () => {
  const sbx = await new Sandbox().open()
  try {
    const ac = new AbortController()
    const r = await sbx.runCode('print("done")', { signal: ac.signal })
    ac.abort()
    assert.equal(r.stdout, 'done\n')
    const again = await sbx.runCode('print("next")')
    assert.equal(again.stdout, 'next\n')
  } finally {
    await sbx.close()
  }
})

test('aborting one call leaves the other parallel calls alone', async () => {
  const marker = `kst-abort3-${rand()}`
  const sbx = await new Sandbox({ timeoutS: 60 }).open()
  try {
    const ac = new AbortController()
    const victim = sbx.run(['sh', '-c', `sleep 60 # ${marker}`], { signal: ac.signal })
    victim.catch(() => {})
    const bystander = sbx.run(['sh', '-c', 'sleep 2; echo bystander'])
    await abortOnceRunning(marker, ac)
    await assert.rejects(victim, (e) => e.name === 'AbortError')
    const b = await bystander
    assert.equal(b.stdout, 'bystander\n')
    assert.equal(b.fault, null)
  } finally {
    await sbx.close()
  }
})

test('a non-AbortSignal signal is refused', async () => {
  const sbx = await new Sandbox().open()
  try {
    await assert.rejects(sbx.runCode('print(1)', { signal: { aborted: 'no' } }), TypeError)
  } finally {
    await sbx.close()
  }
})

test('top-level runCode honours a signal mid-call and still cleans up', async () => {
  const marker = `kst-abort4-${rand()}`
  const before = sessionDirs().length
  const ac = new AbortController()
  const call = kern.runCode(`# ${marker}\nimport time\ntime.sleep(60)`, { signal: ac.signal, timeoutS: 60 })
  call.catch(() => {})
  await abortOnceRunning(marker, ac)
  await assert.rejects(call, (e) => e.name === 'AbortError')
  assert.ok(await waitFor(() => procsMatching(marker).length === 0, 1000))
  assert.equal(sessionDirs().length, before, 'the throwaway session was closed')
})

test('no survivors, as data: a box kern still lists after the teardown is reported in the fault', async () => {
  const fake = fakeKern({ sleepMs: 60_000, psLists: true })
  const sbx = await sandboxWith(fake.bin, { timeoutS: 1 }).open()
  try {
    const r = await sbx.run(['true'])
    assert.equal(r.fault && r.fault.type, 'timeout')
    assert.match(r.fault.message, /surviv|still/i, r.fault.message)
  } finally {
    await sbx.close()
  }
  const clean = fakeKern({ sleepMs: 60_000 })
  const ok = await sandboxWith(clean.bin, { timeoutS: 1 }).open()
  try {
    const r = await ok.run(['true'])
    assert.equal(r.fault && r.fault.type, 'timeout')
    assert.doesNotMatch(r.fault.message, /surviv|still/i, 'nothing survived: the message does not claim so')
  } finally {
    await ok.close()
  }
})

test('no survivors, as data: a kern ps that does not answer is not taken as "nothing survived"', async () => {
  // The box is still listed, but `kern ps` answers slowly (a loaded machine): the binding must not
  // report a clean teardown it could not confirm.
  const fake = fakeKern({ sleepMs: 60_000, psLists: true, psDelayMs: 1000 })
  const sbx = await sandboxWith(fake.bin, { timeoutS: 1 }).open()
  try {
    const r = await sbx.run(['true'])
    assert.equal(r.fault && r.fault.type, 'timeout')
    assert.match(r.fault.message, /surviv|still|confirm|unknown|could not/i, r.fault.message)
  } finally {
    await sbx.close()
  }
})

// --- hardening options -----------------------------------------------------------------------

function capEff(stdout) {
  const m = /CapEff:\s*([0-9a-f]+)/.exec(stdout)
  assert.ok(m, stdout)
  return BigInt('0x' + m[1])
}

test('capDrop: default drops ALL capabilities, [] opts out, a named cap drops just that', async () => {
  const probe = (opts) => kern.runCode('grep CapEff /proc/self/status', { language: 'bash', ...opts })
  const dflt = await probe({})
  assert.equal(capEff(dflt.stdout), 0n, 'default: no capabilities')
  const none = await probe({ capDrop: [] })
  assert.notEqual(capEff(none.stdout), 0n, 'capDrop [] keeps the runtime defaults')
  const one = await probe({ capDrop: ['NET_RAW'] })
  const NET_RAW = 1n << 13n
  assert.equal(capEff(one.stdout), capEff(none.stdout) & ~NET_RAW)
})

test('capDrop: entries that could smuggle a flag are refused', () => {
  for (const bad of ['--net', 'NET RAW', '', 'NET-RAW', 'ALL,NET_RAW', '-v', '1CAP']) {
    assert.throws(() => new Sandbox({ capDrop: [bad] }), SandboxError, JSON.stringify(bad))
  }
  new Sandbox({ capDrop: ['ALL'] })
  new Sandbox({ capDrop: ['NET_RAW', 'cap_sys_admin'] })
})

test('securityProfile: "untrusted" is accepted and hardens the box; anything else is refused', async () => {
  for (const bad of ['strict', 'UNTRUSTED', '', '--net', 'untrusted ']) {
    assert.throws(() => new Sandbox({ securityProfile: bad }), SandboxError, JSON.stringify(bad))
  }
  const r = await kern.runCode('grep CapEff /proc/self/status; touch /root-write-test 2>/dev/null && echo wrote || echo read-only; echo ok > /workspace/w.txt && echo ws-ok', {
    language: 'bash',
    securityProfile: 'untrusted',
    capDrop: [],
  })
  assert.equal(r.exitCode, 0, r.stderr)
  assert.equal(capEff(r.stdout), 0n)
  assert.match(r.stdout, /read-only/)
  assert.match(r.stdout, /ws-ok/)
})

test('requireLimits: where caps cannot be enforced, a startup_failed fault that says so', async () => {
  const bin = realKern ? process.env.KERN_BIN : wrapKern({ KERN_STANDIN_WARN_CAPS: '1' })
  const sbx = await sandboxWith(bin, { requireLimits: true }).open()
  try {
    const r = await sbx.runCode('open("ran.txt", "w").write("x")')
    assert.equal(r.fault && r.fault.type, 'startup_failed', JSON.stringify(r))
    assert.match(r.fault.message, /require-limits|REQUIRE_LIMITS/)
    assert.equal(r.success, false)
    await assert.rejects(sbx.readFile('ran.txt'), SandboxError, 'the workload never ran')
  } finally {
    await sbx.close()
  }
})

test('apparmor: names are validated; an unloaded profile does not run the workload', async () => {
  for (const bad of ['-bad', 'a b', '', 'x/y', '--net']) {
    assert.throws(() => new Sandbox({ apparmor: bad }), SandboxError, JSON.stringify(bad))
  }
  const sbx = await new Sandbox({ apparmor: 'kern-sandbox-test-not-loaded' }).open()
  try {
    const r = await sbx.runCode('open("ran.txt", "w").write("x")')
    assert.equal(r.success, false)
    assert.match(r.stderr, /apparmor/i)
    await assert.rejects(sbx.readFile('ran.txt'), SandboxError, 'the workload never ran')
  } finally {
    await sbx.close()
  }
})
