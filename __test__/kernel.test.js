'use strict'
// The warm kernel: state across cells, its faults and teardowns, the private control channel,
// live output, interrupts, ordering, and that its box never outlives the session or Node.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { kern, openSandbox, openKernel, tmpDir, rand, runNode, lastJson, procsMatching, waitFor } = require('./helpers')

const { Sandbox, Kernel, Result, SandboxError } = kern

let sbx
let k
test.before(async () => {
  sbx = await new Sandbox({ env: { KST_GREETING: 'hi from env' } }).open()
  k = await sbx.kernel()
})
test.after(async () => {
  await sbx.close()
})

/** A cell that leaves a process with `marker` in its command line running in the box. */
const leaveProcess = (marker) => `import subprocess\nsubprocess.Popen(["sh", "-c", "sleep 600; : ${marker}"])\nNone`

test('kernel() resolves to an open Kernel whose state persists across cells', async () => {
  assert.ok(k instanceof Kernel)
  assert.equal(k.alive, true)
  let r = await k.runCode('counter = 40\nimport math')
  assert.equal(r.exitCode, 0)
  assert.deepEqual(r.results, [])
  r = await k.runCode('counter += 2\ncounter')
  assert.equal(r.results[0].text, '42')
  assert.ok(r.results[0] instanceof Result)
  assert.equal(r.results[0].isMainResult, true)
  r = await k.runCode('math.sqrt(counter * 0 + 16)')
  assert.equal(r.results[0].text, '4.0')
  assert.equal(r.success, true)
  assert.equal(r.fault, null)
  assert.deepEqual(r.files, [])
})

test('results carry executionCount 1, 2, 3 per kernel', async (t) => {
  const k2 = await openKernel(t, sbx)
  const counts = []
  for (const code of ['1', 'x = 2', '3']) {
    const r = await k2.runCode(code)
    counts.push(r.executionCount)
    for (const res of r.results) assert.equal(res.executionCount, r.executionCount)
  }
  assert.deepEqual(counts, [1, 2, 3])
})

test('stdout, stderr, display() and the trailing value of a cell', async () => {
  const r = await k.runCode('import sys\nprint("out")\nsys.stderr.write("err\\n")\ndisplay("shown")\n7 * 6')
  assert.equal(r.stdout, 'out\n')
  assert.equal(r.stderr, 'err\n')
  assert.deepEqual(
    r.results.map((x) => [x.text, x.isMainResult]),
    [
      ["'shown'", false],
      ['42', true],
    ],
  )
})

test('an uncaught error: exit 1, traceback on stderr, no fault, and the kernel keeps its state', async () => {
  await k.runCode('kept = "still here"')
  const r = await k.runCode('def boom():\n    raise ValueError("bad value")\nboom()')
  assert.equal(r.exitCode, 1)
  assert.equal(r.fault, null)
  assert.match(r.stderr, /Traceback \(most recent call last\)/)
  assert.match(r.stderr, /ValueError: bad value/)
  assert.doesNotMatch(r.stderr, /_serve|exec\(code/, 'no frame of the driver')
  assert.deepEqual(r.error && [r.error.name, r.error.value], ['ValueError', 'bad value'])
  assert.equal(k.alive, true)
  assert.equal((await k.runCode('kept')).results[0].text, "'still here'")
  const exit = await k.runCode('import sys\nsys.exit(5)')
  assert.equal(exit.exitCode, 5)
  assert.equal((await k.runCode('kept')).results[0].text, "'still here'", 'sys.exit ends the cell, not the kernel')
})

test('a cell run again (its compiled code reused) runs again, and names itself in tracebacks and warnings', async () => {
  const bump = 'ran_again = globals().get("ran_again", 0) + 1\nran_again'
  for (const n of ['1', '2', '3']) assert.equal((await k.runCode(bump)).results[0].text, n)
  const failing = 'def fails():\n    return [1 / 0 for _ in range(1)]\nfails()'
  for (let i = 0; i < 2; i++) {
    const r = await k.runCode(failing)
    assert.equal(r.error.name, 'ZeroDivisionError')
    const own = `File "<cell-${r.executionCount}>"`
    // The cell and the function (and the comprehension, a frame of its own before Python 3.12).
    assert.ok(r.stderr.split(own).length - 1 >= 2, r.stderr)
    assert.doesNotMatch(r.stderr.replaceAll(own, ''), /<cell-/, 'no frame names an earlier cell')
  }
  const source = 'def shown():\n    return 1\nimport inspect\nprint(inspect.getsource(shown), end="")'
  for (let i = 0; i < 2; i++) assert.equal((await k.runCode(source)).stdout, 'def shown():\n    return 1\n')
  for (let i = 0; i < 2; i++) {
    const r = await k.runCode('warned = "a" is "a"')
    assert.match(r.stderr, new RegExp(`<cell-${r.executionCount}>:1: SyntaxWarning`), 'compiled again: it warns again')
  }
})

test("a cell's stdin is at EOF, never the control channel", async () => {
  const r = await k.runCode(
    'import sys\nprint(repr(sys.stdin.read()))\ntry:\n    input()\nexcept EOFError:\n    print("eof")\nimport os\nprint(os.read(0, 10))',
  )
  assert.equal(r.stdout, "''\neof\nb''\n")
  assert.equal((await k.runCode('"aligned"')).results[0].text, "'aligned'")
})

test('raw fd writes and subprocess output land in the cell without desyncing the protocol', async () => {
  const r = await k.runCode(
    'import os, subprocess\nos.write(1, b"raw out\\n")\nos.write(2, b"raw err\\n")\n' +
      'subprocess.run(["sh", "-c", "echo sub out; echo sub err >&2"])\n' +
      'os.write(1, bytes(200000))\nNone',
  )
  assert.equal(r.exitCode, 0, r.stderr)
  assert.ok(r.stdout.startsWith('raw out\nsub out\n'), JSON.stringify(r.stdout.slice(0, 40)))
  assert.equal(r.stdout.length, 'raw out\nsub out\n'.length + 200000)
  assert.equal(r.stderr, 'raw err\nsub err\n')
  // Bytes that look like our frames are just output.
  const f = await k.runCode('import os\nos.write(1, b"d\\x01\\x00\\x00\\x000")\nprint("after")')
  assert.equal(f.stdout, 'd\x01\x00\x00\x000after\n')
  assert.equal((await k.runCode('1 + 1')).results[0].text, '2')
})

test('fork and multiprocessing work and the kernel stays aligned', async () => {
  const r = await k.runCode(
    'import os\npid = os.fork()\nif pid == 0:\n    print("child")\n    os._exit(0)\nos.waitpid(pid, 0)\nprint("parent")',
  )
  assert.equal(r.stdout, 'child\nparent\n')
  const m = await k.runCode(
    'import multiprocessing as mp\nwith mp.get_context("fork").Pool(2) as pool:\n    squares = pool.map(abs, [-1, -2, -3])\nsquares',
  )
  assert.equal(m.exitCode, 0, m.stderr)
  assert.equal(m.results[0].text, '[1, 2, 3]')
  // A forked child that falls out of the cell must not answer for the kernel.
  const stray = await k.runCode('import os\nif os.fork() == 0:\n    pass\nelse:\n    os.wait()\n"one reply"')
  assert.deepEqual(
    stray.results.map((x) => x.text),
    ["'one reply'"],
  )
  assert.equal((await k.runCode('2 + 2')).results[0].text, '4')
})

test('cells sent without awaiting run one after another, in call order', async () => {
  await k.runCode('order = []')
  const pending = []
  for (let i = 0; i < 20; i++) {
    pending.push(
      k.runCode(`import time\ntime.sleep(${i % 3 === 0 ? 0.02 : 0})\norder.append(${i})\nprint(${i})\nlen(order)`),
    )
  }
  const rs = await Promise.all(pending)
  assert.deepEqual(
    rs.map((r) => r.stdout),
    rs.map((_, i) => `${i}\n`),
  )
  assert.deepEqual(
    rs.map((r) => r.results[0].text),
    rs.map((_, i) => String(i + 1)),
  )
  assert.equal((await k.runCode('order == list(range(20))')).results[0].text, 'True')
})

test('a cell larger than a pipe buffer, and an abort of a cell still queued', async () => {
  const big = `blob = "${'x'.repeat(300_000)}"\nlen(blob)`
  assert.equal((await k.runCode(big)).results[0].text, '300000')
  const ac = new AbortController()
  const first = k.runCode('import time\ntime.sleep(0.3)\n"first"')
  const queued = k.runCode('ran_queued = True', { signal: ac.signal })
  ac.abort()
  await assert.rejects(queued, { name: 'AbortError' })
  assert.equal((await first).results[0].text, "'first'")
  assert.equal((await k.runCode('"ran_queued" in globals()')).results[0].text, 'False')
  assert.equal(k.alive, true)
})

test('onStdout and onStderr stream live while a cell runs', async () => {
  const ws = sbx.workspacePath
  const go = `go-${rand()}`
  const chunks = []
  let released = false
  const r = await k.runCode(
    `import os, sys, time\nprint("first", flush=True)\nsys.stderr.write("warn\\n")\n` +
      `for _ in range(400):\n    if os.path.exists(${JSON.stringify(go)}):\n        break\n    time.sleep(0.05)\nelse:\n    print("never released")\nprint("second")`,
    {
      onStdout: (c) => {
        chunks.push(['out', c.toString()])
        if (!released && c.toString().includes('first')) {
          released = true
          fs.writeFileSync(path.join(ws, go), '')
        }
      },
      onStderr: (c) => chunks.push(['err', c.toString()]),
    },
  )
  assert.equal(r.stdout, 'first\nsecond\n', 'the cell saw the file the callback wrote mid-cell')
  assert.equal(
    chunks
      .filter(([s]) => s === 'out')
      .map(([, c]) => c)
      .join(''),
    'first\nsecond\n',
  )
  assert.deepEqual(
    chunks.filter(([s]) => s === 'err').map(([, c]) => c),
    ['warn\n'],
  )
  fs.unlinkSync(path.join(ws, go))
})

test('onResult fires as each result is produced; the same objects end in results', async () => {
  const seen = []
  const r = await k.runCode('display(1)\ndisplay(2)\n3', { onResult: (x) => seen.push(x) })
  assert.deepEqual(
    seen.map((x) => x.text),
    ['1', '2', '3'],
  )
  assert.deepEqual(
    r.results.map((x) => x.text),
    ['1', '2', '3'],
  )
  assert.ok(seen.every((x, i) => x === r.results[i]))
  assert.ok(seen.every((x) => x.executionCount === r.executionCount))
})

test('matplotlib figures and DataFrames in the kernel; a figure is shown once, then closed', async () => {
  let r = await k.runCode(
    'import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\nfig = plt.figure()\nplt.plot([3, 1, 2])\nNone',
  )
  assert.equal(r.exitCode, 0, r.stderr)
  assert.deepEqual(
    r.results.map((x) => x.formats()),
    [['image/png']],
  )
  assert.doesNotMatch(r.stderr, /matplotlib|writable/i)
  r = await k.runCode('plt.get_fignums()')
  assert.equal(r.results[0].text, '[]')
  r = await k.runCode('f2 = plt.figure()\nplt.plot([1])\ndisplay(f2)\nNone')
  assert.deepEqual(
    r.results.map((x) => x.formats().includes('image/png')),
    [true],
    'display(fig) is not repeated at the end',
  )
  r = await k.runCode('import pandas as pd\npd.DataFrame({"q": [1]})')
  assert.match(r.results[0].html, /<table/)
})

test('the kernel imports what the image has installed (site-packages on)', async () => {
  const r = await k.runCode('import sys\nimport matplotlib, pandas\nsys.flags.no_site')
  assert.equal(r.exitCode, 0, r.stderr)
  assert.equal(r.results[0].text, '0')
})

test('network off, env and mounts as for the session', async (t) => {
  const dir = tmpDir('kst-kmount-')
  fs.writeFileSync(path.join(dir, 'data.txt'), 'mounted data')
  const s = await openSandbox(t, { env: { KST_K: 'v1' }, mounts: { [dir]: ['/mnt/kst', 'ro'] } })
  const kk = await s.kernel()
  const r = await kk.runCode(
    'import os, socket\nprint(os.environ.get("KST_K"))\nprint(open("/mnt/kst/data.txt").read())\n' +
      'try:\n    socket.create_connection(("192.0.2.1", 80), timeout=1)\n    print("net on")\nexcept OSError:\n    print("net off")\n' +
      'try:\n    open("/mnt/kst/new", "w")\n    print("mount writable")\nexcept OSError:\n    print("mount ro")',
  )
  assert.equal(r.stdout, 'v1\nmounted data\nnet off\nmount ro\n')
  const ws = await kk.runCode('open("/workspace/from-kernel.txt", "w").write("k")\nimport os\nos.getcwd()')
  assert.equal(ws.results[0].text, "'/workspace'")
  assert.equal(fs.readFileSync(path.join(s.workspacePath, 'from-kernel.txt'), 'utf8'), 'k')
})

test('a per-cell timeout gives fault timeout, tears the kernel down, and later cells reject', async () => {
  const kk = await sbx.kernel({ timeoutS: 30 })
  const marker = `kst-ktimeout-${rand()}`
  await kk.runCode(leaveProcess(marker))
  assert.ok(await waitFor(() => procsMatching(marker).length > 0, 10_000))
  const r = await kk.runCode('print("started", flush=True)\nwhile True:\n    pass', { timeoutS: 1 })
  assert.equal(r.fault.type, 'timeout')
  assert.equal(r.success, false)
  assert.equal(kk.alive, false)
  assert.deepEqual(procsMatching(marker), [], 'the box is gone when the result arrives')
  await assert.rejects(kk.runCode('1'), (e) => e instanceof SandboxError && /timed out|time limit/.test(e.message))
  // A kernel-wide timeoutS applies to every cell.
  const short = await sbx.kernel({ timeoutS: 1 })
  assert.equal((await short.runCode('import time\ntime.sleep(5)')).fault.type, 'timeout')
})

test('a reply past maxOutputBytes gives fault killed ("cap") and tears the kernel down', async (t) => {
  const s = await openSandbox(t, { maxOutputBytes: 100_000 })
  const kk = await s.kernel()
  assert.equal((await kk.runCode('print("x" * 1000)')).stdout.length, 1001)
  const r = await kk.runCode('import sys\nfor _ in range(1000):\n    sys.stdout.write("y" * 10000)')
  assert.equal(r.fault.type, 'killed')
  assert.match(r.fault.message, /cap/)
  assert.equal(kk.alive, false)
  await assert.rejects(kk.runCode('1'), SandboxError)
  const kr = await s.kernel()
  const raw = await kr.runCode('import os\nfor _ in range(100):\n    os.write(1, bytes(10000))')
  assert.equal(raw.fault.type, 'killed')
  assert.match(raw.fault.message, /cap/)
})

test('aborting a cell interrupts it (KeyboardInterrupt) and the kernel keeps its state', async () => {
  await k.runCode('survivor = 123')
  const ac = new AbortController()
  const p = k.runCode('import time\nprint("sleeping", flush=True)\ntime.sleep(60)', {
    signal: ac.signal,
    onStdout: () => ac.abort(new Error('user stop')),
  })
  await assert.rejects(p, /user stop/)
  assert.equal(k.alive, true)
  assert.equal((await k.runCode('survivor')).results[0].text, '123')
  const pre = new AbortController()
  pre.abort()
  await assert.rejects(k.runCode('1', { signal: pre.signal }), { name: 'AbortError' })
  assert.equal((await k.runCode('survivor + 1')).results[0].text, '124')
})

test('an interrupt in the middle of large output leaves the protocol aligned', async (t) => {
  const s = await openSandbox(t, { maxOutputBytes: 512 * 1024 * 1024 })
  const kk = await s.kernel()
  for (let round = 0; round < 3; round++) {
    const ac = new AbortController()
    let seen = 0
    const p = kk.runCode('chunk = "z" * 300_000\nwhile True:\n    print(chunk)', {
      signal: ac.signal,
      onStdout: (c) => {
        seen += c.length
        if (seen > 2_000_000) ac.abort()
      },
    })
    await assert.rejects(p, { name: 'AbortError' })
    assert.equal(kk.alive, true, `round ${round}`)
    assert.equal((await kk.runCode(`${round} + 1`)).results[0].text, String(round + 1))
  }
})

test('a cell that ignores the interrupt gets the kernel torn down', async () => {
  const kk = await sbx.kernel()
  const marker = `kst-kignore-${rand()}`
  await kk.runCode(leaveProcess(marker))
  const ac = new AbortController()
  const p = kk.runCode(
    'import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint("deaf", flush=True)\nwhile True:\n    time.sleep(0.05)',
    {
      signal: ac.signal,
      onStdout: () => ac.abort(),
    },
  )
  await assert.rejects(p, { name: 'AbortError' })
  assert.equal(kk.alive, false)
  assert.deepEqual(procsMatching(marker), [])
  await assert.rejects(kk.runCode('1'), SandboxError)
})

test('close() returns once the box is gone; a closed kernel rejects with SandboxError', async () => {
  const kk = await sbx.kernel()
  const marker = `kst-kclose-${rand()}`
  await kk.runCode(leaveProcess(marker))
  assert.ok(await waitFor(() => procsMatching(marker).length > 0, 10_000))
  await kk.close()
  assert.deepEqual(procsMatching(marker), [], 'nothing of the box is left when close() resolves')
  assert.equal(kk.alive, false)
  await assert.rejects(kk.runCode('1'), (e) => e instanceof SandboxError && /closed/.test(e.message))
  await kk.close() // idempotent
})

test('close() during a running cell stops it; queued cells reject', async () => {
  const kk = await sbx.kernel()
  let started
  const going = new Promise((resolve) => (started = resolve))
  const running = assert.rejects(
    kk.runCode('import time\nprint("go", flush=True)\ntime.sleep(60)', { onStdout: started }),
    SandboxError,
  )
  const queued = assert.rejects(kk.runCode('1'), SandboxError)
  await going
  await kk.close()
  await running
  await queued
})

test('a kernel collected unclosed ends its box while the session stays open', async () => {
  require('node:v8').setFlagsFromString('--expose-gc')
  const gc = require('node:vm').runInNewContext('gc')
  const marker = `kst-kgc-${rand()}`
  await (async () => {
    const kk = await sbx.kernel()
    await kk.runCode(leaveProcess(marker))
  })()
  assert.ok(await waitFor(() => procsMatching(marker).length > 0, 10_000))
  const gone = await waitFor(
    () => {
      gc()
      return procsMatching(marker).length === 0
    },
    10_000,
    200,
  )
  assert.ok(gone, JSON.stringify(procsMatching(marker)))
  assert.equal((await k.runCode('1 + 1')).results[0].text, '2', 'other kernels of the session are untouched')
})

test('Symbol.asyncDispose closes the kernel', async () => {
  const kk = await sbx.kernel()
  await kk[Symbol.asyncDispose]()
  assert.equal(kk.alive, false)
})

test('sandbox.close() closes its kernels; a closed sandbox refuses kernel()', async () => {
  const s = await new Sandbox().open()
  const kk = await s.kernel()
  const marker = `kst-ksbx-${rand()}`
  await kk.runCode(leaveProcess(marker))
  assert.ok(await waitFor(() => procsMatching(marker).length > 0, 10_000))
  await s.close()
  assert.deepEqual(procsMatching(marker), [])
  assert.equal(kk.alive, false)
  await assert.rejects(kk.runCode('1'), SandboxError)
  await assert.rejects(s.kernel(), SandboxError)
  await assert.rejects(new Sandbox().kernel(), (e) => e instanceof SandboxError && /open/.test(e.message))
})

test("a kernel whose box cannot start rejects with kern's error, and leaves nothing behind", async (t) => {
  const s = await openSandbox(t, { image: 'kern-sandbox-test/no-such-image:0' })
  await assert.rejects(
    s.kernel(),
    (e) => e instanceof SandboxError && /failed to start: error/.test(e.message) && !/warning/.test(e.message),
  )
  assert.equal((await s.run(['true'])).fault?.type, 'startup_failed', 'the session itself is still usable')
})

test('bad input gets a clear SandboxError', async () => {
  for (const code of [undefined, 42, null, Buffer.from('1')]) {
    await assert.rejects(k.runCode(code), (e) => e instanceof SandboxError && /code must be a string/.test(e.message))
  }
  await assert.rejects(k.runCode('x = "\0"'), SandboxError)
  for (const timeoutS of [0, -1, 'soon', NaN, Infinity]) {
    await assert.rejects(k.runCode('1', { timeoutS }), SandboxError, `cell timeoutS ${timeoutS}`)
    await assert.rejects(sbx.kernel({ timeoutS }), SandboxError, `kernel timeoutS ${timeoutS}`)
  }
  await assert.rejects(k.runCode('1', { onStdout: 5 }), TypeError)
  await assert.rejects(k.runCode('1', 'opts'), TypeError)
  assert.equal((await k.runCode('"still fine"')).results[0].text, "'still fine'")
})

/** Runs a child Node that opens a kernel and leaves `marker` running in its box. */
function kernelChild(marker, tail) {
  return `
const kern = require(REPO)
;(async () => {
  const s = await new kern.Sandbox().open()
  const k = await s.kernel()
  await k.runCode(${JSON.stringify(leaveProcess(marker))})
  console.log(JSON.stringify({ ready: true }))
  ${tail}
})()
`
}

test('a Node process with an open kernel exits on its own, taking the box along', async () => {
  const marker = `kst-kexit-${rand()}`
  const r = await runNode(kernelChild(marker, ''), { timeoutMs: 60_000 })
  assert.equal(r.timedOut, false, 'an open kernel does not keep Node alive')
  assert.equal(r.code, 0, r.stderr)
  assert.equal(lastJson(r.stdout).ready, true)
  assert.deepEqual(procsMatching(marker), [])
})

test('process.exit() and a SIGKILLed Node take the kernel box along', async () => {
  const m1 = `kst-kpexit-${rand()}`
  const r = await runNode(kernelChild(m1, 'process.exit(3)'), { timeoutMs: 60_000 })
  assert.equal(r.code, 3, r.stderr)
  assert.deepEqual(procsMatching(m1), [])

  const m2 = `kst-kkill-${rand()}`
  let child
  const done = runNode(kernelChild(m2, 'setInterval(() => {}, 1000)'), {
    timeoutMs: 60_000,
    onSpawn: (c) => (child = c),
  })
  assert.ok(await waitFor(() => procsMatching(m2).length > 0, 20_000), 'the kernel box started')
  child.kill('SIGKILL')
  await done
  assert.ok(await waitFor(() => procsMatching(m2).length === 0, 5000), JSON.stringify(procsMatching(m2)))
})

test('a terminated worker thread takes its kernel box along', async () => {
  const marker = `kst-kworker-${rand()}`
  const r = await runNode(
    `
const { Worker } = require('node:worker_threads')
const w = new Worker(${JSON.stringify(kernelChild(marker, "require('node:worker_threads').parentPort.postMessage('ready'); setInterval(() => {}, 1000)"))}.replace('require(REPO)', 'require(' + JSON.stringify(REPO) + ')'), { eval: true })
w.on('message', async () => {
  await w.terminate()
  console.log(JSON.stringify({ terminated: true }))
})
w.on('error', (e) => { console.error(e); process.exit(1) })
`,
    { timeoutMs: 60_000 },
  )
  assert.equal(r.code, 0, r.stderr)
  assert.equal(lastJson(r.stdout).terminated, true)
  assert.ok(await waitFor(() => procsMatching(marker).length === 0, 5000), JSON.stringify(procsMatching(marker)))
})
