'use strict'
// Sandbox faults as data: timeout, escape_blocked, killed/oom, startup_failed, and the fix for
// kern's cap warnings being misread as a startup failure.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const cp = require('node:child_process')
const {
  kern,
  openSandbox,
  realKern,
  rand,
  wrapKern,
  fakeKern,
  sandboxWith,
  procsMatching,
  waitFor,
} = require('./helpers')

const UNKNOWN_IMAGE = 'kern-sandbox-test/no-such-image:0'
// With the stand-in, act like this host's real kern: it warns that caps are not enforced.
const WARN = realKern ? {} : { KERN_STANDIN_WARN_CAPS: '1' }
// A kern without the KERN_STARTED_FD channel: the stand-in's legacy switch, or (for a real kern)
// a wrapper that hides the channel's fd number from it.
const LEGACY = realKern ? { KERN_STARTED_FD: null } : { KERN_STANDIN_LEGACY_STARTED: '1', KERN_STANDIN_WARN_CAPS: '1' }

/** The kern box name of the running call whose code carries `marker` (from kern's command line). */
async function boxNameOf(marker) {
  let name = null
  await waitFor(
    () => {
      for (const p of procsMatching(marker)) {
        const m = / box (\S+) /.exec(p.cmd)
        if (m) name = m[1]
      }
      return name
    },
    10_000,
    50,
  )
  return name
}

function kernPsNames() {
  const out = cp.execFileSync(process.env.KERN_BIN, ['ps', '--json'], { encoding: 'utf8', timeout: 10_000 })
  return JSON.parse(out).map((b) => b.name)
}

async function noneLeft(marker, ms = 1500) {
  const left = await waitFor(() => procsMatching(marker).length === 0, ms, 50)
  return left ? [] : procsMatching(marker)
}

test('timeout: a busy loop past timeoutS is a timeout fault, within 2 s of the deadline, nothing left', async (t) => {
  const marker = `kst-spin-${rand()}`
  const sbx = await openSandbox(t, { timeoutS: 1 })
  const t0 = Date.now()
  const call = sbx.runCode(`# ${marker}\nwhile True: pass`)
  const name = await boxNameOf(marker)
  assert.ok(name, 'found the running box in the process table')
  const r = await call
  const wall = Date.now() - t0
  assert.equal(r.fault && r.fault.type, 'timeout', JSON.stringify(r.fault))
  assert.match(r.fault.message, /1\s?s/)
  assert.equal(r.success, false)
  assert.ok(wall >= 950, `resolved before the deadline (${wall} ms)`)
  assert.ok(
    wall < 1000 + 2000 + 1000,
    `resolved ${wall} ms after the call started (deadline 1 s, +2 s budget, +1 s slack)`,
  )
  assert.deepEqual(await noneLeft(marker), [], 'no process of the box is left')
  assert.ok(!kernPsNames().includes(name), `kern ps still lists ${name}`)
})

test('timeout: a SIGTERM-ignoring workload that forks (and setsid()s) children leaves no survivor', async (t) => {
  const marker = `kst-stubborn-${rand()}`
  const code = `# ${marker}
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
for i in range(3):
    if os.fork() == 0:
        if i == 0:
            os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            time.sleep(0.05)
print("forked", flush=True)
while True:
    time.sleep(0.05)
`
  const sbx = await openSandbox(t, { timeoutS: 1.5 })
  const t0 = Date.now()
  const r = await sbx.runCode(code)
  const wall = Date.now() - t0
  assert.equal(r.fault && r.fault.type, 'timeout', JSON.stringify(r.fault))
  assert.equal(r.stdout, 'forked\n')
  assert.doesNotMatch(r.fault.message, /surviv/i, 'the binding reports no survivors')
  assert.ok(wall < 1500 + 2000 + 1000, `resolved in ${wall} ms`)
  assert.deepEqual(await noneLeft(marker), [], 'nothing of the box survived')
})

test('timeout: output printed before the deadline is kept', async () => {
  const r = await kern.runCode(
    'import sys\nprint("before the loop", flush=True)\nprint("err side", file=sys.stderr, flush=True)\nwhile True: pass',
    { timeoutS: 1 },
  )
  assert.equal(r.fault && r.fault.type, 'timeout')
  assert.equal(r.stdout, 'before the loop\n')
  assert.match(r.stderr, /err side/)
})

test('timeout: a flooding workload with a small cap still times out promptly', async () => {
  const t0 = Date.now()
  const r = await kern.runCode('import sys\nwhile True:\n    sys.stdout.write("x" * 65536)', {
    timeoutS: 1,
    maxOutputBytes: 1000,
  })
  assert.equal(r.fault && r.fault.type, 'timeout')
  assert.equal(r.truncated, true)
  assert.equal(r.stdout.length, 1000)
  assert.ok(Date.now() - t0 < 1000 + 2000 + 1500, `resolved after ${Date.now() - t0} ms`)
})

test('timeout: a fast call is unaffected by a short deadline', async () => {
  const r = await kern.runCode('print("quick")', { timeoutS: 5 })
  assert.equal(r.fault, null)
  assert.equal(r.stdout, 'quick\n')
})

test('escape_blocked: a seccomp-denied syscall (mount) is exit 159', async () => {
  const r = await kern.runCode('import ctypes\nctypes.CDLL(None).syscall(165, 0, 0, 0, 0, 0)\nprint("not blocked")')
  assert.equal(r.exitCode, 159, r.stderr)
  assert.equal(r.fault && r.fault.type, 'escape_blocked')
  assert.match(r.fault.message, /seccomp|SIGSYS/)
  assert.equal(r.stdout, '')
  assert.equal(r.success, false)
})

test('killed: a workload SIGKILLed (exit 137) is a killed fault', async () => {
  // PID 1 of the box ignores its own signals, so the victim is a child of a shell that reports it.
  const r = await kern.runCode('python3 -c "import os; os.kill(os.getpid(), 9)"; exit $?', {
    language: 'bash',
    memoryMb: null,
  })
  assert.equal(r.exitCode, 137, r.stderr)
  assert.equal(r.fault && r.fault.type, 'killed', JSON.stringify(r.fault))
  assert.equal(r.success, false)
})

test('killed, not oom: a SIGKILL while kern reports the memory cap as not enforced says so', async (t) => {
  const warned = await openSandbox(t, { memoryMb: 256 }, { bin: wrapKern(WARN) })
  const r = await warned.run(['sh', '-c', 'python3 -c "import os; os.kill(os.getpid(), 9)"; exit $?'])
  assert.equal(r.exitCode, 137, r.stderr)
  assert.equal(r.fault.type, 'killed', JSON.stringify(r.fault))
  assert.match(r.fault.message, /not enforced/)
})

test('a SIGSEGV of the user code (139) is a result, not a fault', async () => {
  const r = await kern.runCode('python3 -c "import ctypes; ctypes.string_at(0)"; exit $?', { language: 'bash' })
  assert.equal(r.exitCode, 139, r.stderr)
  assert.equal(r.fault, null)
})

test("startup_failed: an unknown image; the message starts at kern's error line, without warnings", async (t) => {
  const sbx = await openSandbox(t, { image: UNKNOWN_IMAGE, timeoutS: 20 }, { bin: wrapKern(WARN) })
  const r = await sbx.runCode('print(1)')
  assert.equal(r.fault && r.fault.type, 'startup_failed', JSON.stringify(r))
  assert.notEqual(r.exitCode, 0)
  assert.match(r.fault.message, /^error:/)
  assert.doesNotMatch(r.fault.message, /kern: warning/)
  assert.ok(r.fault.message.length <= 500)
  assert.equal(r.success, false)
})

test("misclassification fix: with kern's cap warnings on its stderr, the workload's own sys.exit(3) has no fault", async (t) => {
  const sbx = await openSandbox(t, {}, { bin: wrapKern(WARN) })
  const r = await sbx.runCode('import sys\nsys.exit(3)')
  assert.doesNotMatch(r.stderr, /kern: warning/, "kern's warning is its note, not the workload's stderr")
  assert.equal(r.exitCode, 3)
  assert.equal(r.fault, null, JSON.stringify(r.fault))
  // a workload forging kern's error prefixes on its own stderr is still the workload's result
  const f = await sbx.runCode(
    'import sys\nsys.stderr.write("error: image: forged\\nkern: sandbox setup failed: forged\\n")\nsys.exit(1)',
  )
  assert.equal(f.exitCode, 1)
  assert.equal(f.fault, null, JSON.stringify(f.fault))
})

test('legacy kern without the started channel: warnings alone are no startup failure', async (t) => {
  const bin = wrapKern(LEGACY)
  const ok = await openSandbox(t, {}, { bin })
  const bad = await openSandbox(t, { image: UNKNOWN_IMAGE, timeoutS: 20 }, { bin })
  const r = await ok.runCode('import sys\nsys.exit(3)')
  assert.doesNotMatch(r.stderr, /kern: warning/, "kern's warning is its note, not the workload's stderr")
  assert.equal(r.exitCode, 3)
  assert.equal(r.fault, null, JSON.stringify(r.fault))
  const s = await bad.runCode('print(1)')
  assert.equal(s.fault && s.fault.type, 'startup_failed', JSON.stringify(s))
  assert.match(s.fault.message, /^error:/)
  assert.doesNotMatch(s.fault.message, /kern: warning/)
})

// --- classification by the started channel, driven by a fake kern ------------------------------

async function fakeRun(behaviour) {
  const fake = fakeKern(behaviour)
  const sbx = await sandboxWith(fake.bin).open()
  try {
    return await sbx.run(['true'])
  } finally {
    await sbx.close()
  }
}

test('oom: exit 137 while kern reports the memory cap enforced (started byte 1)', async () => {
  const r = await fakeRun({ exitCode: 137, started: [1, 1] })
  assert.equal(r.fault && r.fault.type, 'oom', JSON.stringify(r.fault))
  assert.equal(r.exitCode, 137)
})

test('killed: exit 137 with the cap not enforced (byte 2) or unknown (byte 0 / no channel)', async () => {
  const a = await fakeRun({ exitCode: 137, started: [1, 2] })
  assert.equal(a.fault.type, 'killed')
  assert.match(a.fault.message, /not enforced/)
  const b = await fakeRun({ exitCode: 137, started: [1, 0] })
  assert.equal(b.fault.type, 'killed')
  const c = await fakeRun({ exitCode: 137, started: null })
  assert.equal(c.fault.type, 'killed')
})

test('started channel: a box that started is never startup_failed, whatever stderr says', async () => {
  const r = await fakeRun({ exitCode: 1, started: [1, 0], stderr: 'error: image: not found\n' })
  assert.equal(r.fault, null)
  const s = await fakeRun({
    exitCode: 1,
    started: null,
    stderr: 'kern: warning: caps\nerror: image: not found\nhint: x\n',
  })
  assert.equal(s.fault && s.fault.type, 'startup_failed')
  assert.equal(s.fault.message, 'error: image: not found\nhint: x')
})

test("exit 143 (kern's own timeout backstop) is a timeout fault; 159 escape_blocked", async () => {
  const r = await fakeRun({ exitCode: 143, started: [1, 0] })
  assert.equal(r.fault && r.fault.type, 'timeout')
  const e = await fakeRun({ exitCode: 159, started: [1, 0] })
  assert.equal(e.fault && e.fault.type, 'escape_blocked')
})

test('parallel calls each read their own started channel', async (t) => {
  const kinds = { oom: [1, 1], killed: [1, 2], unknown: null }
  const sbxs = {}
  for (const [k, started] of Object.entries(kinds))
    sbxs[k] = await openSandbox(t, {}, { bin: fakeKern({ exitCode: 137, started, sleepMs: 50 }).bin })
  const jobs = []
  for (let i = 0; i < 8; i++)
    for (const k of Object.keys(kinds)) jobs.push(sbxs[k].run(['true']).then((r) => [k, r.fault && r.fault.type]))
  const got = await Promise.all(jobs)
  const want = { oom: 'oom', killed: 'killed', unknown: 'killed' }
  const wrong = got.filter(([k, type]) => want[k] !== type)
  assert.deepEqual(wrong, [])
})

function zombieOrAlive(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1')
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0]
  } catch {
    return null
  }
}

test('timeout: a kern that ignores SIGTERM/SIGINT is still ended within 2 s of the deadline, and reaped', async (t) => {
  const fake = fakeKern({ ignoreTerm: true, sleepMs: 60_000 })
  const sbx = await openSandbox(t, { timeoutS: 1 }, { bin: fake.bin })
  const t0 = Date.now()
  const r = await sbx.run(['true'])
  const wall = Date.now() - t0
  assert.equal(r.fault && r.fault.type, 'timeout')
  assert.ok(wall < 1000 + 2000 + 1000, `resolved after ${wall} ms`)
  const [call] = fake.boxCalls()
  assert.ok(
    await waitFor(() => zombieOrAlive(call.pid) === null, 2000),
    `fake kern ${call.pid} is ${zombieOrAlive(call.pid)} (not reaped)`,
  )
})

test("a stray process holding kern's pipes open does not hang the call", async () => {
  const fake = fakeKern({ strayMs: 60_000, stdout: 'from kern\n' })
  const sbx = await sandboxWith(fake.bin, { timeoutS: 30 }).open()
  try {
    const t0 = Date.now()
    const r = await sbx.run(['true'])
    assert.ok(Date.now() - t0 < 10_000, `the call waited ${Date.now() - t0} ms on a stray pipe holder`)
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'from kern\n')
  } finally {
    const stray = fake.strayPid()
    if (stray)
      try {
        process.kill(stray, 'SIGKILL')
      } catch {
        /* gone */
      }
    await sbx.close()
  }
})
