'use strict'
// Output: the capture cap, live streaming callbacks, and callbacks never keeping Node alive.

const test = require('node:test')
const assert = require('node:assert/strict')
const { kern, openSandbox, runNode, lastJson } = require('./helpers')

test('maxOutputBytes: a 10 MiB flood is capped at 1000 bytes, truncated, and the box runs to completion', async (t) => {
  const sbx = await openSandbox(t, { maxOutputBytes: 1000, timeoutS: 60 })
  const r = await sbx.runCode(
    'import sys\nchunk = "x" * 65536\nfor _ in range(160):\n    sys.stdout.write(chunk)\nsys.stdout.flush()\nopen("done.txt", "w").write("finished")',
  )
  assert.equal(r.exitCode, 0, r.stderr.slice(-500))
  assert.equal(r.fault, null)
  assert.equal(r.truncated, true)
  assert.equal(r.stdout.length, 1000)
  assert.equal(r.stdout, 'x'.repeat(1000))
  assert.equal((await sbx.readFile('done.txt')).toString(), 'finished', 'the box was not blocked by the cap')
})

test('maxOutputBytes applies to stderr too', async (t) => {
  const sbx = await openSandbox(t, { maxOutputBytes: 2000 })
  const r = await sbx.runCode('import sys\nsys.stderr.write("e" * 500000)\nprint("out")')
  assert.equal(r.exitCode, 0)
  assert.equal(r.truncated, true)
  assert.equal(Buffer.byteLength(r.stderr), 2000)
  assert.equal(r.stdout, 'out\n')
})

test('output under or exactly at the cap is not truncated; one byte over is', async (t) => {
  const sbx = await openSandbox(t, { maxOutputBytes: 1000 })
  const under = await sbx.runCode('print("a" * 999, end="")')
  assert.equal(under.truncated, false)
  assert.equal(under.stdout.length, 999)
  const exact = await sbx.runCode('print("b" * 1000, end="")')
  assert.equal(exact.truncated, false)
  assert.equal(exact.stdout.length, 1000)
  const over = await sbx.runCode('print("c" * 1001, end="")')
  assert.equal(over.truncated, true)
  assert.equal(over.stdout.length, 1000)
})

test('large and non-ASCII output come back exact (external string and decoded copy), and survive GC', async (t) => {
  const sbx = await openSandbox(t, { timeoutS: 60 })
  const lines = (tag, n) => Array.from({ length: n }, (_, i) => `${tag} ${String(i).padStart(7, '0')}\n`).join('')
  const big = await sbx.runCode(
    'import sys\nsys.stdout.write("".join("out %07d\\n" % i for i in range(300000)))\nsys.stderr.write("".join("err %07d\\n" % i for i in range(100000)))',
  )
  assert.equal(big.exitCode, 0)
  assert.ok(big.stdout === lines('out', 300000), 'large ASCII stdout (3.4 MiB) is exact')
  assert.ok(big.stderr.endsWith(lines('err', 100000)), 'large ASCII stderr is exact (after any kern warnings)')
  const mixed = await sbx.runCode(
    'import sys\nsys.stdout.buffer.write(b"a" * 200000 + "é€😀".encode() + b"\\xff\\xc3(" + b"z" * 100000)',
  )
  assert.equal(mixed.exitCode, 0)
  assert.ok(mixed.stdout === 'a'.repeat(200000) + 'é€😀\uFFFD\uFFFD(' + 'z'.repeat(100000), 'non-ASCII stdout is exact')
  // External strings are freed by V8's GC: collect some while others are still in use.
  const r = await runNode(
    `
require('v8').setFlagsFromString('--expose-gc')
const gc = require('vm').runInNewContext('gc')
const kern = require(REPO)
async function main() {
  const kept = []
  for (let i = 0; i < 6; i++) {
    const r = await kern.runCode('import sys\\nsys.stdout.write("y" * 2000000)')
    if (i % 2) kept.push(r.stdout)
    gc()
  }
  console.log(JSON.stringify({ ok: kept.every((s) => s === 'y'.repeat(2000000)) }))
}
main()
`,
    { timeoutMs: 60_000 },
  )
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.deepEqual(lastJson(r.stdout), { ok: true })
})

test('onStdout/onStderr get Buffers, in order, whose concatenation equals the captured output', async (t) => {
  const out = []
  const err = []
  const sbx = await openSandbox(t, { onStdout: (c) => out.push(c), onStderr: (c) => err.push(c) })
  const r = await sbx.runCode(
    'import sys, time\nfor i in range(300):\n    print(f"line {i:04d}", flush=True)\n    if i % 50 == 0:\n        print(f"err {i}", file=sys.stderr, flush=True)\n        time.sleep(0.01)\nsys.stdout.write("z" * 200000)',
  )
  assert.equal(r.exitCode, 0)
  assert.ok(out.length > 0 && err.length > 0)
  for (const c of [...out, ...err]) assert.ok(Buffer.isBuffer(c), 'chunks are Buffers')
  assert.equal(Buffer.concat(out).toString(), r.stdout, 'stdout chunks in order')
  assert.equal(Buffer.concat(err).toString(), r.stderr, 'stderr chunks in order')
})

test('session callbacks also stream the setup box', async (t) => {
  const out = []
  await openSandbox(t, { setup: 'echo setting-up', onStdout: (c) => out.push(c) })
  assert.match(Buffer.concat(out).toString(), /setting-up/)
})

test('parallel calls with per-call callbacks each get only their own output', async (t) => {
  const sbx = await openSandbox(t, { timeoutS: 60 })
  const seen = Array.from({ length: 16 }, () => [])
  const results = await Promise.all(
    seen.map((chunks, i) =>
      sbx.runCode(`for j in range(200):\n    print("call-${i}-line", j, flush=True)`, {
        onStdout: (c) => chunks.push(c),
      }),
    ),
  )
  results.forEach((r, i) => {
    assert.equal(r.exitCode, 0)
    assert.equal(Buffer.concat(seen[i]).toString(), r.stdout)
    assert.ok(
      r.stdout
        .split('\n')
        .filter(Boolean)
        .every((l) => l.startsWith(`call-${i}-line `)),
    )
  })
})

test('callbacks stream live, before the box ends', async (t) => {
  let first = 0
  const sbx = await openSandbox(t, { onStdout: () => (first = first || Date.now()) })
  const r = await sbx.runCode('import time\nprint("early", flush=True)\ntime.sleep(1.5)\nprint("late")')
  const done = Date.now()
  assert.equal(r.stdout, 'early\nlate\n')
  assert.ok(first > 0)
  assert.ok(done - first >= 700, `first chunk arrived only ${done - first} ms before the result`)
})

test('a consumer that keeps up gets every chunk, also past the cap', async (t) => {
  let n = 0
  const sbx = await openSandbox(t, { maxOutputBytes: 1000, onStdout: (c) => (n += c.length) })
  const r = await sbx.runCode('import sys\nsys.stdout.write("q" * 300000)')
  assert.equal(r.stdout.length, 1000)
  assert.equal(r.truncated, true)
  assert.equal(n, 300000)
})

test('a callback that falls far behind loses chunks but never stalls the box', async () => {
  let delivered = 0
  const slow = (c) => {
    delivered += c.length
    const until = Date.now() + 5
    while (Date.now() < until) {
      /* a consumer far slower than the box */
    }
  }
  const t0 = Date.now()
  const r = await kern.runCode(
    'import sys, time\nt = time.time()\nfor _ in range(1024):\n    sys.stdout.write("x" * 65536)\nsys.stdout.flush()\nsys.stderr.write("WROTE %.3f\\n" % (time.time() - t))',
    { maxOutputBytes: 1000, timeoutS: 120, onStdout: slow },
  )
  assert.equal(r.exitCode, 0)
  assert.equal(r.fault, null)
  assert.equal(r.stdout.length, 1000)
  assert.equal(r.truncated, true)
  const wrote = Number(/WROTE ([\d.]+)/.exec(r.stderr)[1])
  assert.ok(wrote < 2.5, `the box needed ${wrote} s to write 64 MiB: the slow callback applied backpressure`)
  assert.ok(delivered <= 64 << 20)
  assert.ok(Date.now() - t0 < 60_000)
})

test('a throwing (or rejecting) callback changes nothing', async (t) => {
  let calls = 0
  const sbx = await openSandbox(t, {
    onStdout: () => {
      calls++
      throw new Error('callback boom')
    },
    onStderr: async () => {
      throw new Error('async boom')
    },
  })
  const r = await sbx.runCode('import sys\nprint("hello")\nprint("err", file=sys.stderr)\nprint("world")')
  assert.equal(r.stdout, 'hello\nworld\n')
  assert.equal(r.exitCode, 0)
  assert.equal(r.fault, null)
  assert.ok(calls >= 1)
  const again = await sbx.runCode('print("still fine")')
  assert.equal(again.stdout, 'still fine\n')
})

test('a throwing callback does not crash the process (child process check)', async () => {
  const r = await runNode(
    `
const kern = require(REPO)
process.on('uncaughtException', (e) => { console.log(JSON.stringify({ uncaught: e.message })); process.exit(3) })
kern.runCode('print("x" * 10)', { onStdout: () => { throw new Error('boom') } })
  .then((r) => console.log(JSON.stringify({ stdout: r.stdout })))
`,
    { timeoutMs: 30_000 },
  )
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.deepEqual(lastJson(r.stdout), { stdout: 'x'.repeat(10) + '\n' })
})

test('the process exits on its own after a call with callbacks', async () => {
  let doneAt = 0
  const r = await runNode(
    `
const kern = require(REPO)
async function main() {
  const sbx = await new kern.Sandbox({ onStdout: () => {}, onStderr: () => {} }).open()
  const r = await sbx.runCode('print("hi")', { onStdout: () => {} })
  await sbx.close()
  const r2 = await kern.runCode('print("one-shot")', { onStdout: () => {} })
  console.log(JSON.stringify({ stdout: r.stdout + r2.stdout }))
}
main()
`,
    {
      timeoutMs: 30_000,
      onSpawn: (child) =>
        child.stdout.on('data', (d) => {
          if (String(d).includes('one-shot')) doneAt = Date.now()
        }),
    },
  )
  const exitedAt = Date.now()
  assert.equal(r.timedOut, false, 'the child never exited')
  assert.equal(r.code, 0, r.stderr)
  assert.deepEqual(lastJson(r.stdout), { stdout: 'hi\none-shot\n' })
  assert.ok(doneAt > 0)
  assert.ok(exitedAt - doneAt < 3000, `exited ${exitedAt - doneAt} ms after its last call`)
})

test('an open session with a callback does not keep the process alive either', async () => {
  const r = await runNode(
    `
const kern = require(REPO)
new kern.Sandbox({ onStdout: () => {} }).open().then(async (s) => {
  const r = await s.runCode('print("left open")')
  console.log(JSON.stringify({ stdout: r.stdout }))
})
`,
    { timeoutMs: 15_000 },
  )
  assert.equal(r.timedOut, false, 'the child never exited')
  assert.equal(r.code, 0, r.stderr)
})
