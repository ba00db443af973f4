'use strict'
// AbortSignal on runCode()/run(): what a call rejects with, and that an aborted box is gone.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { kern, openSandbox, rand, procsMatching, waitFor, sessionDirs, tmpDir } = require('./helpers')

async function abortOnceRunning(marker, ac, reason) {
  assert.ok(await waitFor(() => procsMatching(marker).length > 0, 15_000), 'the box started')
  if (reason === undefined) ac.abort()
  else ac.abort(reason)
  return Date.now()
}

test('an already-aborted signal rejects at once with signal.reason (default AbortError DOMException)', async (t) => {
  const sbx = await openSandbox(t)
  const ac = new AbortController()
  ac.abort()
  await assert.rejects(
    sbx.runCode('print(1)', { signal: ac.signal }),
    (e) => e === ac.signal.reason && e instanceof DOMException && e.name === 'AbortError',
  )
  const custom = new AbortController()
  const why = { custom: 'reason' }
  custom.abort(why)
  await assert.rejects(sbx.run(['true'], { signal: custom.signal }), (e) => e === why)
  await assert.rejects(sbx.runCode('print(1)', { signal: AbortSignal.abort('str-reason') }), (e) => e === 'str-reason')
})

test('abort mid-call tears the box down and rejects with an AbortError DOMException', async (t) => {
  const marker = `kst-abort-${rand()}`
  const sbx = await openSandbox(t, { timeoutS: 60 })
  const ac = new AbortController()
  const call = sbx.runCode(
    `# ${marker}\nimport signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)`,
    { signal: ac.signal },
  )
  call.catch(() => {})
  const t0 = await abortOnceRunning(marker, ac)
  await assert.rejects(call, (e) => e instanceof DOMException && e.name === 'AbortError')
  assert.ok(Date.now() - t0 < 4000, `rejected ${Date.now() - t0} ms after the abort`)
  assert.deepEqual(procsMatching(marker), [], 'nothing left running when the promise settles')
  const after = await sbx.runCode('print("usable")')
  assert.equal(after.stdout, 'usable\n', 'the session is still usable')
})

test('abort mid-call rejects with a custom reason', async (t) => {
  const marker = `kst-abort2-${rand()}`
  const sbx = await openSandbox(t, { timeoutS: 60 })
  const ac = new AbortController()
  const reason = new Error('user pressed stop')
  const call = sbx.run(['sh', '-c', `sleep 60 # ${marker}`], { signal: ac.signal })
  call.catch(() => {})
  await abortOnceRunning(marker, ac, reason)
  await assert.rejects(call, (e) => e === reason)
  assert.ok(await waitFor(() => procsMatching(marker).length === 0, 1000))
})

test("aborting at any moment of a call's start rejects and leaves nothing running", async (t) => {
  const sbx = await openSandbox(t, { timeoutS: 60 })
  for (const delay of [0, 1, 3, 8, 15, 30, 60, 120]) {
    const marker = `kst-race-${rand()}`
    const ac = new AbortController()
    const call = sbx.run(['sh', '-c', `sleep 60 # ${marker}`], { signal: ac.signal })
    call.catch(() => {})
    if (delay === 0) ac.abort()
    else setTimeout(() => ac.abort(), delay)
    await assert.rejects(call, (e) => e instanceof DOMException && e.name === 'AbortError', `abort after ${delay} ms`)
    assert.ok(
      await waitFor(() => procsMatching(marker).length === 0, 1000),
      `box left running after an abort at ${delay} ms: ${JSON.stringify(procsMatching(marker))}`,
    )
  }
})

test('AbortSignal.timeout() works: rejects with its TimeoutError reason, nothing left running', async (t) => {
  const marker = `kst-abort5-${rand()}`
  const sbx = await openSandbox(t, { timeoutS: 60 })
  const t0 = Date.now()
  await assert.rejects(
    sbx.run(['sh', '-c', `sleep 60 # ${marker}`], { signal: AbortSignal.timeout(700) }),
    (e) => e instanceof DOMException && e.name === 'TimeoutError',
  )
  assert.ok(Date.now() - t0 < 5000)
  assert.ok(await waitFor(() => procsMatching(marker).length === 0, 1000))
})

test('aborting after the call finished changes nothing', async (t) => {
  const sbx = await openSandbox(t)
  const ac = new AbortController()
  const r = await sbx.runCode('print("done")', { signal: ac.signal })
  ac.abort()
  assert.equal(r.stdout, 'done\n')
  const again = await sbx.runCode('print("next")')
  assert.equal(again.stdout, 'next\n')
})

test('aborting one call leaves the other parallel calls alone', async (t) => {
  const marker = `kst-abort3-${rand()}`
  const sbx = await openSandbox(t, { timeoutS: 60 })
  const ac = new AbortController()
  const victim = sbx.run(['sh', '-c', `sleep 60 # ${marker}`], { signal: ac.signal })
  victim.catch(() => {})
  const bystander = sbx.run(['sh', '-c', 'sleep 2; echo bystander'])
  await abortOnceRunning(marker, ac)
  await assert.rejects(victim, (e) => e.name === 'AbortError')
  const b = await bystander
  assert.equal(b.stdout, 'bystander\n')
  assert.equal(b.fault, null)
})

test('a non-AbortSignal signal is refused', async (t) => {
  const sbx = await openSandbox(t)
  await assert.rejects(sbx.runCode('print(1)', { signal: { aborted: 'no' } }), TypeError)
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

// kern keeps each box's overlay scratch under $XDG_RUNTIME_DIR/kern/scratch and removes it when
// the box ends; a kern killed before it (or before its `kern stop`) has cleaned up leaves it
// there for good, one per aborted call.
test("an aborted, timed-out or closed-on call leaves none of kern's scratch behind", async (t) => {
  const runtime = tmpDir('kst-xdg-')
  const saved = process.env.XDG_RUNTIME_DIR
  process.env.XDG_RUNTIME_DIR = runtime
  t.after(() => {
    if (saved === undefined) delete process.env.XDG_RUNTIME_DIR
    else process.env.XDG_RUNTIME_DIR = saved
  })
  const scratch = path.join(runtime, 'kern', 'scratch')
  const left = () => (fs.existsSync(scratch) ? fs.readdirSync(scratch) : [])
  const clean = async (what) =>
    assert.ok(await waitFor(() => left().length === 0, 2000), `${what} left ${JSON.stringify(left())}`)

  const sbx = await openSandbox(t, { timeoutS: 60 })
  const started = (marker) => waitFor(() => procsMatching(marker).length > 0, 15_000)
  for (const [what, code] of [
    ['an aborted call', 'import time\ntime.sleep(60)'],
    [
      'an aborted call ignoring SIGTERM',
      'import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)',
    ],
  ]) {
    const marker = `kst-scratch-${rand()}`
    const ac = new AbortController()
    const call = sbx.runCode(`# ${marker}\n${code}`, { signal: ac.signal })
    call.catch(() => {})
    assert.ok(await started(marker), `${what}: the box started`)
    // The marker is in kern's own argv, which shows before kern has made the box's scratch.
    assert.ok(await waitFor(() => left().length > 0, 15_000, 5), `${what}: kern made its scratch where this test looks`)
    ac.abort()
    await assert.rejects(call, (e) => e.name === 'AbortError')
    await clean(what)
  }
  const timed = await sbx.run(['sleep', '30'], { timeoutS: 1 })
  assert.equal(timed.fault && timed.fault.type, 'timeout')
  await clean('a timed-out call')
  for (const delay of [0, 5, 20, 60]) {
    const ac = new AbortController()
    const call = sbx.run(['sleep', '30'], { signal: ac.signal })
    call.catch(() => {})
    setTimeout(() => ac.abort(), delay)
    await assert.rejects(call, (e) => e.name === 'AbortError')
    await clean(`a call aborted ${delay} ms into its start`)
  }
  const marker = `kst-scratch-close-${rand()}`
  const inFlight = sbx.run(['sh', '-c', `sleep 30 # ${marker}`])
  inFlight.catch(() => {})
  assert.ok(await started(marker))
  await sbx.close()
  await inFlight.catch(() => {})
  await clean('close() with a call in flight')
})
