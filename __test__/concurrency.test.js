'use strict'
// Defect 1: concurrent calls on one Sandbox (64 in parallel) all succeed.
// Defect 6: no blocking work on the main thread: the event loop stays responsive during calls on a
// workspace of 10,000 files, during listFiles, and during a timeout teardown.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { openSandbox, sleep } = require('./helpers')

test('64 parallel run() calls on one Sandbox all succeed, each with its own output', async (t) => {
  const sbx = await openSandbox(t, { env: { SHARED: 'yes' }, timeoutS: 120 })
  const calls = Array.from({ length: 64 }, (_, i) =>
    sbx.run(['sh', '-c', `echo "call ${i} $SHARED"; echo ${i} > out-${i}.txt`]),
  )
  const results = await Promise.all(calls)
  const failed = results
    .map((r, i) => ({
      i,
      exitCode: r.exitCode,
      fault: r.fault,
      stderr: r.stderr
        .split('\n')
        .filter((l) => !l.startsWith('kern:'))
        .join('\n'),
    }))
    .filter((x) => x.exitCode !== 0 || x.fault)
  assert.deepEqual(failed, [], `${failed.length} of 64 calls failed`)
  results.forEach((r, i) => assert.equal(r.stdout, `call ${i} yes\n`))
  const files = await sbx.listFiles()
  assert.equal(files.filter((f) => f.path.startsWith('out-')).length, 64)
})

test("calls leave the main thread's signal mask as they found it, one at a time and in a burst", async (t) => {
  // A call with nothing else in flight forks its box from the main thread with every signal
  // blocked for the clone; the mask must come back whole, or signals meant for this thread
  // (a profiler's, a debugger's) would never reach it.
  const blocked = () => /^SigBlk:\s*(\S+)/m.exec(fs.readFileSync(`/proc/self/task/${process.pid}/status`, 'latin1'))[1]
  const before = blocked()
  const sbx = await openSandbox(t, { timeoutS: 60 })
  for (let i = 0; i < 3; i++) {
    const r = await sbx.run(['sh', '-c', `echo one ${i}`])
    assert.equal(r.stdout, `one ${i}\n`)
    assert.equal(blocked(), before)
  }
  const burst = await Promise.all(Array.from({ length: 8 }, (_, i) => sbx.run(['sh', '-c', `echo burst ${i}`])))
  burst.forEach((r, i) => assert.equal(r.stdout, `burst ${i}\n`))
  assert.equal(blocked(), before)
})

test('calls close every fd they opened, one at a time and in a burst', async (t) => {
  // A finished box's pipes and pidfd close just after its result is sent: give them a moment.
  const fds = () => fs.readdirSync('/proc/self/fd').length
  const settled = async (want) => {
    for (let i = 0; i < 100 && fds() > want; i++) await sleep(20)
    return fds()
  }
  const sbx = await openSandbox(t, { timeoutS: 60 })
  // A first call and a first burst open what lives as long as the process (a spawner thread's
  // /dev/null, say).
  await sbx.run(['true'])
  await Promise.all(Array.from({ length: 16 }, () => sbx.run(['true'])))
  await sleep(100)
  const base = fds()
  for (let i = 0; i < 20; i++) await sbx.run(['sh', '-c', 'echo out; echo err >&2'])
  assert.equal(await settled(base), base)
  await Promise.all(Array.from({ length: 16 }, () => sbx.run(['sh', '-c', 'echo out'])))
  assert.equal(await settled(base), base)
})

test('32 parallel one-shot runCode calls (Python and JavaScript) each get their own output and results', async (t) => {
  const sbx = await openSandbox(t, { timeoutS: 120 })
  const calls = Array.from({ length: 32 }, (_, i) =>
    i % 2
      ? sbx.runCode(`console.log("js ${i}")\n${i} * 2`, { language: 'javascript' })
      : sbx.runCode(`print("py ${i}")\n${i} * 2`),
  )
  // Two more, aborted as soon as they are made: their box may or may not have started.
  const ac = new AbortController()
  const aborted = [
    sbx.runCode('print(1)', { signal: ac.signal }),
    sbx.runCode('1', { language: 'javascript', signal: ac.signal }),
  ]
  const rejected = aborted.map((p) => assert.rejects(p, { name: 'AbortError' }))
  ac.abort()
  const results = await Promise.all(calls)
  await Promise.all(rejected)
  results.forEach((r, i) => {
    assert.equal(r.exitCode, 0, r.stderr)
    assert.equal(r.stdout, `${i % 2 ? 'js' : 'py'} ${i}\n`)
    assert.equal(r.results.length, 1)
    assert.equal(r.results[0].text, String(i * 2))
    assert.deepEqual(r.files, [])
  })
  assert.deepEqual(
    fs.readdirSync(sbx.workspacePath).filter((n) => /^\.(cell|cap|run|res)-/.test(n)),
    [],
    'no helper file is left',
  )
})

test('parallel runCode calls with different per-call timeouts keep their own results', async (t) => {
  const sbx = await openSandbox(t, { timeoutS: 30 })
  const [slow, fast, timed] = await Promise.all([
    sbx.runCode('import time\ntime.sleep(1)\nprint("slow")'),
    sbx.runCode('print("fast")'),
    sbx.runCode('while True: pass', { timeoutS: 1 }),
  ])
  assert.equal(slow.stdout, 'slow\n')
  assert.equal(slow.fault, null)
  assert.equal(fast.stdout, 'fast\n')
  assert.equal(timed.fault && timed.fault.type, 'timeout')
})

test("parallel calls never report another call's internal large-code file", async (t) => {
  // Call A (small code) runs 1.5 s; call B (large code, so its code travels as a workspace file)
  // starts while A runs and outlives it. A's files must not include B's internal code file.
  const sbx = await openSandbox(t, { timeoutS: 60 })
  const a = sbx.runCode('import time\ntime.sleep(1.5)\nopen("mine-a.txt", "w").write("a")')
  await sleep(300)
  const b = sbx.runCode(
    '#' + 'x'.repeat(130 * 1024) + '\nimport time\ntime.sleep(3)\nopen("mine-b.txt", "w").write("b")',
  )
  const [ra, rb] = await Promise.all([a, b])
  assert.equal(ra.exitCode, 0, ra.stderr)
  assert.equal(rb.exitCode, 0, rb.stderr)
  assert.deepEqual(
    ra.files.map((f) => f.path),
    ['mine-a.txt'],
    'call A reports only its own file',
  )
  assert.deepEqual(
    rb.files.map((f) => f.path).filter((p) => p !== 'mine-a.txt'),
    ['mine-b.txt'],
  )
  const left = (await sbx.listFiles()).map((f) => f.path).sort()
  assert.deepEqual(left, ['mine-a.txt', 'mine-b.txt'], 'internal code files removed')
})

/** Runs `fn` while sampling event-loop lag; resolves with [fn's value, max lag in ms]. */
async function withLag(fn, every = 5) {
  let last = performance.now()
  let max = 0
  const timer = setInterval(() => {
    const now = performance.now()
    max = Math.max(max, now - last - every)
    last = now
  }, every)
  try {
    const v = await fn()
    return [v, max]
  } finally {
    clearInterval(timer)
  }
}

test('the event loop stays responsive during calls on a 10,000-file workspace', async (t) => {
  const sbx = await openSandbox(t, { timeoutS: 60 })
  // 10,000 files, made host-side (fast) before measuring
  for (let d = 0; d < 100; d++) {
    const dir = path.join(sbx.workspacePath, `d${String(d).padStart(3, '0')}`)
    fs.mkdirSync(dir)
    for (let f = 0; f < 100; f++) fs.writeFileSync(path.join(dir, `f${String(f).padStart(3, '0')}.txt`), 'x')
  }
  let worst = 0
  for (let i = 0; i < 3; i++) {
    const [r, lag] = await withLag(() => sbx.runCode('open("d000/f000.txt", "w").write("changed")'))
    assert.equal(r.exitCode, 0)
    assert.deepEqual(
      r.files.map((f) => [f.path, f.change]),
      [['d000/f000.txt', 'modified']],
    )
    worst = Math.max(worst, lag)
  }
  const [listed, listLag] = await withLag(() => sbx.listFiles())
  assert.equal(listed.length, 10_000)
  worst = Math.max(worst, listLag)
  assert.ok(worst < 100, `event loop blocked for ${worst.toFixed(1)} ms`)
})

test('the event loop stays responsive through a timeout teardown', async (t) => {
  const sbx = await openSandbox(t, { timeoutS: 1 })
  const [r, lag] = await withLag(() =>
    sbx.runCode('import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: time.sleep(0.1)'),
  )
  assert.equal(r.fault && r.fault.type, 'timeout')
  assert.ok(lag < 100, `event loop blocked for ${lag.toFixed(1)} ms during the teardown`)
})
