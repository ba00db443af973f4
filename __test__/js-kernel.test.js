'use strict'
// The JavaScript and TypeScript kernels: notebook cell semantics (state, redeclaration, top-level
// await, import lines, the trailing value, display), output and errors, interrupts, teardowns,
// TypeScript, one-shot JavaScript with results, and bad input.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { kern, openSandbox, openKernel, tmpDir, rand, procsMatching, waitFor, within, runNode } = require('./helpers')

const { Sandbox, Kernel, Result, SandboxError } = kern

let sbx
let k
test.before(async () => {
  sbx = await new Sandbox({ env: { KST_JS: 'from env' } }).open()
  k = await sbx.kernel({ language: 'javascript' })
})
test.after(async () => {
  await sbx.close()
})

const texts = (r) => r.results.map((x) => x.text)

test('kernel({ language }) starts a node kernel whose state persists; aliases resolve', async () => {
  assert.ok(k instanceof Kernel)
  assert.equal(k.language, 'javascript')
  assert.equal(k.alive, true)
  let r = await k.runCode(
    'const a = 40\nlet b = 2\nvar c = "c"\nfunction add(x, y) { return x + y }\nclass Box { constructor(v) { this.v = v } }',
  )
  assert.equal(r.exitCode, 0, r.stderr)
  assert.deepEqual(r.results, [])
  r = await k.runCode('add(a, b) + c + new Box(1).v')
  assert.deepEqual(texts(r), ['42c1'])
  assert.ok(r.results[0] instanceof Result)
  assert.equal(r.results[0].isMainResult, true)
  assert.equal(r.results[0].executionCount, 2)
  assert.equal(r.executionCount, 2)
  for (const alias of ['js', 'node']) {
    const kk = await sbx.kernel({ language: alias })
    assert.equal(kk.language, 'javascript')
    assert.deepEqual(texts(await kk.runCode('typeof a')), ['undefined'], 'a fresh kernel is clean')
    await kk.close()
  }
})

test('declaring the same name again in a later cell replaces it', async () => {
  await k.runCode('const again = 1\nclass K { id() { return 1 } }\nfunction f() { return 1 }')
  const r = await k.runCode(
    'const again = 2\nlet K2 = 0\nclass K { id() { return 2 } }\nfunction f() { return 2 }\n[again, new K().id(), f()]',
  )
  assert.equal(r.exitCode, 0, r.stderr)
  assert.deepEqual(texts(r), ['[ 2, 2, 2 ]'])
  const d = await k.runCode('const { p, q: [z] } = { p: 1, q: [3] }\nlet u\n[p, z, u]')
  assert.deepEqual(texts(d), ['[ 1, 3, undefined ]'])
  assert.deepEqual(texts(await k.runCode('p + z')), ['4'])
})

test('the trailing value: a string as itself, others inspected, a Promise awaited, undefined none', async () => {
  assert.deepEqual(texts(await k.runCode('"plain text"')), ['plain text'])
  assert.deepEqual(texts(await k.runCode('({ x: 1, y: [1, 2] })')), ['{ x: 1, y: [ 1, 2 ] }'])
  assert.deepEqual(texts(await k.runCode('[1, 2, 3].map((x) => x * 2)')), ['[ 2, 4, 6 ]'])
  assert.deepEqual(texts(await k.runCode('new Promise((r) => setTimeout(() => r("later"), 20))')), ['later'])
  assert.deepEqual((await k.runCode('undefined')).results, [])
  assert.deepEqual((await k.runCode('console.log("only output")')).results, [])
  assert.deepEqual(texts(await k.runCode('x2 = 1 + 1')), ['2'])
})

test("a cell with no await runs as a script: its value is the trailing expression's, and only that", async () => {
  // Declarations rewritten into assignments end their statement: the next line is its own.
  assert.deepEqual(texts(await k.runCode('class Opener {}\n(1)')), ['1'])
  assert.deepEqual(texts(await k.runCode('let w\n[w, 2]')), ['[ undefined, 2 ]'])
  // Neither a declaration nor a directive becomes the cell's value; a trailing `var` keeps it.
  assert.deepEqual((await k.runCode('const declaredLast = 5')).results, [])
  assert.deepEqual((await k.runCode('var hoisted = 5')).results, [])
  assert.deepEqual((await k.runCode("'use strict'")).results, [])
  assert.deepEqual((await k.runCode('if (true) { 5 }')).results, [])
  assert.deepEqual(texts(await k.runCode('6\nvar after')), ['6'])
  assert.deepEqual(texts(await k.runCode("'use strict'\nconst sv = 7\nfunction sf() { return this }\n[sv, sf()]")), [
    '[ 7, undefined ]',
  ])
  // A thenable value is awaited; one whose `then` throws is the cell's error.
  assert.deepEqual(texts(await k.runCode('({ then(resolve) { resolve(8) } })')), ['8'])
  const r = await k.runCode('({ get then() { throw new TypeError("no then") } })')
  assert.equal(r.exitCode, 1)
  assert.equal(r.error.name, 'TypeError')
  assert.equal(k.alive, true)
})

test('a cell run again runs again (its compiled script reused): effects repeat, errors report', async () => {
  const bump = 'ranAgain = (globalThis.ranAgain ?? 0) + 1'
  assert.deepEqual(texts(await k.runCode(bump)), ['1'])
  assert.deepEqual(texts(await k.runCode(bump)), ['2'])
  assert.deepEqual(texts(await k.runCode(bump)), ['3'])
  const failing = 'if (ranAgain > 2) throw new RangeError("again " + ranAgain)'
  for (const n of [3, 3]) {
    const e = await k.runCode(failing)
    assert.equal(e.exitCode, 1)
    assert.equal(e.error.value, `again ${n}`)
    assert.match(e.stderr, /at <cell-\d+>:1:/)
  }
  assert.deepEqual(texts(await k.runCode('await Promise.resolve(ranAgain)')), ['3'])
  assert.deepEqual(texts(await k.runCode('await Promise.resolve(ranAgain)')), ['3'])
})

test('cells back to back: what a cell queued has run before the next starts, other handles open or not', async () => {
  const queues = 'seen = []; process.nextTick(() => seen.push("tick")); queueMicrotask(() => seen.push("micro"))'
  const rounds = async (n) => {
    for (let i = 0; i < n; i++) {
      assert.deepEqual(texts(await k.runCode(`${queues}; seen.push("sync"); undefined`)), [])
      assert.deepEqual(texts(await k.runCode('seen.join()')), ['sync,tick,micro'])
      await k.runCode(`${queues}; setImmediate(() => seen.push("immediate")); seen.push("sync"); undefined`)
      assert.deepEqual(texts(await k.runCode('seen.join()')), ['sync,tick,micro,immediate'])
    }
  }
  await rounds(150)
  // A server of the cell's own keeps a handle open: the driver then reads frames through the loop.
  await k.runCode(
    'srv = require("net").createServer().listen(0, "127.0.0.1")\nawait new Promise((r) => srv.on("listening", r))',
  )
  await rounds(50)
  assert.deepEqual(texts(await k.runCode('await new Promise((r) => srv.close(r)); "closed"')), ['closed'])
  await rounds(50)
})

test("a cell calling the user's own code inside console.log() is still interruptible", async () => {
  await k.runCode('function spinForever() { while (true) {} }\nconst keptAcross = "kept"')
  const ac = new AbortController()
  const p = k.runCode('console.log("spinning")\nconsole.log(spinForever())', {
    signal: ac.signal,
    onStdout: () => ac.abort(new Error('stop spinning')),
  })
  await assert.rejects(within(p, 15_000, 'the interrupted cell'), /stop spinning/)
  assert.equal(k.alive, true)
  assert.deepEqual(texts(await k.runCode('keptAcross')), ['kept'])
})

test('display() adds results in order; a raw MIME bundle is taken as it is', async () => {
  const seen = []
  const r = await k.runCode(
    'display("first", { n: 1 })\ndisplay({ "text/html": "<b>x</b>", "text/plain": "x" }, { raw: true })\n"main"',
    { onResult: (x) => seen.push(x.text) },
  )
  assert.deepEqual(texts(r), ['first', '{ n: 1 }', 'x', 'main'])
  assert.equal(r.results[2].html, '<b>x</b>')
  assert.deepEqual(
    r.results.map((x) => x.isMainResult),
    [false, false, false, true],
  )
  assert.deepEqual(seen, ['first', '{ n: 1 }', 'x', 'main'])
})

test('top-level await, import lines and require, from node: builtins and /workspace/node_modules', async () => {
  const mod = path.join(sbx.workspacePath, 'node_modules')
  fs.mkdirSync(path.join(mod, 'kst-cjs'), { recursive: true })
  fs.writeFileSync(path.join(mod, 'kst-cjs', 'package.json'), '{"name":"kst-cjs","main":"index.js"}')
  fs.writeFileSync(path.join(mod, 'kst-cjs', 'index.js'), 'module.exports = { hello: (n) => "hello " + n }')
  fs.mkdirSync(path.join(mod, 'kst-esm'), { recursive: true })
  fs.writeFileSync(
    path.join(mod, 'kst-esm', 'package.json'),
    '{"name":"kst-esm","type":"module","exports":{"import":"./index.js"}}',
  )
  fs.writeFileSync(
    path.join(mod, 'kst-esm', 'index.js'),
    'export const twice = (x) => x * 2\nexport default "esm default"',
  )
  const r = await k.runCode(
    [
      'import fs from "fs"',
      'import { join } from "node:path"',
      'import * as os from "os"',
      'import esm, { twice } from "kst-esm"',
      'const { hello } = require("kst-cjs")',
      'const waited = await new Promise((r) => setTimeout(() => r(21), 10));',
      '[typeof fs.readFileSync, join("a", "b"), typeof os.cpus, esm, twice(waited), hello("js")]',
    ].join('\n'),
  )
  assert.equal(r.exitCode, 0, r.stderr)
  assert.deepEqual(texts(r), ["[ 'function', 'a/b', 'function', 'esm default', 42, 'hello js' ]"])
  assert.deepEqual(
    texts(await k.runCode('twice(5) + (await import("kst-esm")).twice(1)')),
    ['12'],
    'imported names persist',
  )
  // export lines pasted from a module run as plain code, a nameless default declaration too.
  const ex = await k.runCode(
    'export function named() { return 1 }\nexport default function () { return 2 }\nnamed() + 1',
  )
  assert.equal(ex.exitCode, 0, ex.stderr)
  assert.deepEqual(texts(ex), ['2'])
  const cls = await k.runCode('export default class {}\n"after"')
  assert.equal(cls.exitCode, 0, cls.stderr)
  assert.deepEqual(texts(cls), ['after'])
})

test('console, process.stdout/stderr.write and child processes land in the cell, streamed live', async () => {
  const r = await k.runCode(
    'console.log("log", 1)\nconsole.error("err")\nprocess.stdout.write("raw out\\n")\nprocess.stderr.write(Buffer.from("raw err\\n"))\n' +
      'require("child_process").execSync("echo child out; echo child err >&2", { stdio: "inherit" })\n' +
      'await new Promise((r) => require("child_process").spawn("sh", ["-c", "echo async child"], { stdio: "inherit" }).on("exit", r))\n' +
      'require("fs").writeSync(1, "fd write\\n")',
  )
  assert.equal(r.stdout, 'log 1\nraw out\nchild out\nasync child\nfd write\n')
  assert.equal(r.stderr, 'err\nraw err\nchild err\n')
  assert.equal(process.env.KST_JS, undefined)
  assert.deepEqual(texts(await k.runCode('process.env.KST_JS')), ['from env'])
  // Live: the first chunk arrives while the cell is still waiting.
  const chunks = []
  // null until the first chunk: one that arrives within the same millisecond is 0 ms, not "none".
  let firstAt = null
  const t0 = Date.now()
  const live = await k.runCode(
    'console.log("early")\nawait new Promise((r) => setTimeout(r, 1500))\nconsole.log("late")',
    {
      onStdout: (c) => {
        chunks.push(c)
        firstAt ??= Date.now() - t0
      },
    },
  )
  assert.equal(live.stdout, 'early\nlate\n')
  assert.equal(chunks.join(''), 'early\nlate\n')
  assert.ok(firstAt !== null && firstAt < 1200, `first chunk after ${firstAt} ms`)
})

test('raw output of children (past a pipe buffer) never desyncs the frames', async () => {
  const r = await k.runCode(
    'await new Promise((r) => require("child_process").spawn("sh", ["-c", "head -c 300000 /dev/zero | tr \\"\\\\0\\" x; echo; echo done >&2"], { stdio: "inherit" }).on("exit", r))\n"after"',
  )
  assert.equal(r.exitCode, 0, r.stderr)
  assert.equal(r.stdout, 'x'.repeat(300000) + '\n')
  assert.equal(r.stderr, 'done\n')
  assert.deepEqual(texts(r), ['after'])
  const big = await k.runCode('console.log("z".repeat(100000))')
  assert.equal(big.stdout.length, 100001)
  assert.deepEqual(texts(await k.runCode('1 + 1')), ['2'])
})

test('an uncaught error: exit 1, the stack without driver frames, error fields, and the kernel serves on', async () => {
  await k.runCode('const keptJs = "still here"')
  const r = await k.runCode('function boom() {\n  throw new RangeError("bad value")\n}\nboom()')
  assert.equal(r.exitCode, 1)
  assert.equal(r.fault, null)
  assert.match(r.stderr, /^RangeError: bad value\n {4}at boom \(<cell-\d+>:2:9\)\n {4}at <cell-\d+>:4:1\n$/)
  assert.deepEqual([r.error.name, r.error.value], ['RangeError', 'bad value'])
  assert.match(r.error.traceback, /at boom \(<cell-\d+>:2:9\)/)
  assert.doesNotMatch(r.stderr + r.error.traceback, /\[eval|node:vm|node:internal/)
  const rej = await k.runCode('await Promise.reject(new TypeError("rejected"))')
  assert.equal(rej.exitCode, 1)
  assert.equal(rej.error.name, 'TypeError')
  const odd = await k.runCode('throw 42')
  assert.equal(odd.exitCode, 1)
  assert.equal(odd.error.value, '42')
  const syn = await k.runCode('let = ;')
  assert.equal(syn.exitCode, 1)
  assert.equal(syn.error.name, 'SyntaxError')
  assert.equal(k.alive, true)
  assert.deepEqual(texts(await k.runCode('keptJs')), ['still here'])
})

test('process.exit(n) ends the cell with n, not the kernel', async () => {
  await k.runCode('const beforeExit = 5')
  const r = await k.runCode('console.log("bye")\nprocess.exit(3)\nconsole.log("never")')
  assert.equal(r.exitCode, 3)
  assert.equal(r.stdout, 'bye\n')
  assert.equal((await k.runCode('await new Promise((r) => setTimeout(r, 5))\nprocess.exit()')).exitCode, 0)
  assert.equal(k.alive, true)
  assert.deepEqual(texts(await k.runCode('beforeExit')), ['5'])
})

test('an unhandled rejection or a throw in a timer is reported on stderr and never kills the kernel', async () => {
  const r = await k.runCode(
    'Promise.reject(new Error("nobody awaits me"))\nsetTimeout(() => { throw new Error("from a timer") }, 10)\nawait new Promise((r) => setTimeout(r, 200))\n"still running"',
  )
  assert.equal(r.exitCode, 0)
  assert.deepEqual(texts(r), ['still running'])
  assert.match(r.stderr, /Uncaught \(in promise\) Error: nobody awaits me/)
  assert.match(r.stderr, /Uncaught Error: from a timer/)
  // One that fires between cells is reported with the next cell.
  await k.runCode('setTimeout(() => { throw new Error("between cells") }, 50)')
  await new Promise((r) => setTimeout(r, 300))
  const next = await k.runCode('"next"')
  assert.match(next.stderr, /Uncaught Error: between cells/)
  assert.equal(k.alive, true)
})

test('aborting a synchronous loop interrupts it and the kernel keeps its state', async () => {
  await k.runCode('const survivorJs = 123')
  const ac = new AbortController()
  const p = k.runCode('console.log("spinning")\nwhile (true) {}', {
    signal: ac.signal,
    onStdout: () => ac.abort(new Error('user stop')),
  })
  await assert.rejects(within(p, 15_000, 'the interrupted cell'), /user stop/)
  assert.equal(k.alive, true)
  assert.deepEqual(texts(await k.runCode('survivorJs')), ['123'])
})

test('aborting a cell stuck on a never-settling await ends it; the kernel serves on', async () => {
  const ac = new AbortController()
  const p = k.runCode('console.log("waiting")\nawait new Promise(() => {})', {
    signal: ac.signal,
    onStdout: () => ac.abort(),
  })
  await assert.rejects(within(p, 15_000, 'the stuck cell'), { name: 'AbortError' })
  assert.equal(k.alive, true)
  assert.deepEqual(texts(await k.runCode('survivorJs + 1')), ['124'])
})

test("an abort landing as a cell's synchronous part ends still stops it, every time", async () => {
  // The abort fires on the cell's first output, as the cell's guarded synchronous part ends: a
  // SIGINT there races with node's watchdog (node died of it, lost it, or kept it counted for the
  // next cell), so an awaiting cell is interrupted by a frame the driver reads instead.
  // A cell that fakes the clock (as test doubles do) must not stall what the driver does after
  // an interrupt.
  await k.runCode('const keptThroughAborts = 125\nconst realNow = Date.now\nDate.now = () => 0')
  for (let i = 0; i < 40; i++) {
    const ac = new AbortController()
    const p = k.runCode('console.log("tick")\nawait new Promise(() => {})', {
      signal: ac.signal,
      onStdout: () => ac.abort(),
    })
    const t0 = Date.now()
    await assert.rejects(within(p, 15_000, 'the aborted cell'), { name: 'AbortError' })
    assert.equal(k.alive, true, `abort ${i} cost the kernel (after ${Date.now() - t0} ms)`)
  }
  assert.deepEqual(texts(await k.runCode('Date.now = realNow\nkeptThroughAborts')), ['125'])
})

test('a cell aborted as it is sent rejects, whether or not it started; the kernel serves on', async () => {
  // The interrupt can reach the driver with the cell itself, before the cell started.
  await k.runCode('let startedCells = 0')
  for (let i = 0; i < 30; i++) {
    const ac = new AbortController()
    const p = k.runCode('startedCells++\nawait new Promise(() => {})', { signal: ac.signal })
    if (i % 2) await new Promise((resolve) => setImmediate(resolve))
    ac.abort()
    await assert.rejects(within(p, 15_000, 'the aborted cell'), { name: 'AbortError' })
    assert.equal(k.alive, true, `abort ${i} cost the kernel`)
  }
  const [started] = texts(await k.runCode('startedCells'))
  assert.ok(Number(started) <= 30, `${started} cells started`)
})

test('a cell timeout and the output cap tear the kernel down, with no process left', async (t) => {
  const kk = await sbx.kernel({ language: 'js' })
  const marker = `kst-jstimeout-${rand()}`
  await kk.runCode(
    `require("child_process").spawn("sh", ["-c", "sleep 600; : ${marker}"], { detached: true, stdio: "ignore" }).unref()`,
  )
  assert.ok(await waitFor(() => procsMatching(marker).length > 0, 10_000))
  const r = await kk.runCode('while (true) {}', { timeoutS: 1 })
  assert.equal(r.fault.type, 'timeout')
  assert.equal(kk.alive, false)
  assert.deepEqual(procsMatching(marker), [], 'the box is gone when the result arrives')
  await assert.rejects(kk.runCode('1'), SandboxError)
  const s = await openSandbox(t, { maxOutputBytes: 100_000 })
  const kc = await s.kernel({ language: 'javascript' })
  const cap = await kc.runCode('for (let i = 0; i < 100; i++) console.log("y".repeat(10000))')
  assert.equal(cap.fault.type, 'killed')
  assert.match(cap.fault.message, /cap/)
  assert.equal(kc.alive, false)
})

test('TypeScript: types stripped keeping lines, enum and namespace work, a syntax error is a SyntaxError', async (t) => {
  const ts = await openKernel(t, sbx, { language: 'ts' })
  assert.equal(ts.language, 'typescript')
  let r = await ts.runCode(
    'interface P { x: number }\nconst pt: P = { x: 2 }\nfunction sq(n: number): number { return n * n }\nsq(pt.x) as number',
  )
  assert.equal(r.exitCode, 0, r.stderr)
  assert.deepEqual(texts(r), ['4'])
  r = await ts.runCode(
    'type T = string\nconst msg: T = "x"\nfunction fail(m: T): never {\n  throw new Error(m)\n}\nfail(msg)',
  )
  assert.match(r.stderr, /at fail \(<cell-\d+>:4:9\)/, "the stack points at the user's line and column")
  r = await ts.runCode(
    'enum Color { Red, Green = 5, Blue }\nnamespace NS { export const n: number = 7 }\n[Color.Blue, Color[5], NS.n]',
  )
  assert.equal(r.exitCode, 0, r.stderr)
  assert.deepEqual(texts(r), ["[ 6, 'Green', 7 ]"])
  assert.deepEqual(texts(await ts.runCode('Color.Red')), ['0'], 'an enum persists')
  r = await ts.runCode('const broken: = 1')
  assert.equal(r.exitCode, 1)
  assert.equal(r.error.name, 'SyntaxError')
  assert.match(r.stderr, /SyntaxError/)
  assert.equal(ts.alive, true)
  assert.deepEqual(texts(await ts.runCode('const y: number = await Promise.resolve(1)\ny + 1')), ['2'])
})

test('image: a per-kernel image shares the workspace; an image without node is refused, saying so', async (t) => {
  const kk = await sbx.kernel({ language: 'js', image: 'node:20-slim' })
  await kk.runCode('require("fs").writeFileSync("/workspace/from-js.txt", "js")')
  const py = await sbx.kernel()
  assert.deepEqual(texts(await py.runCode('open("/workspace/from-js.txt").read()')), ["'js'"])
  await kk.close()
  await py.close()
  const s = await openSandbox(t, { env: { PATH: '/kst-no-such-dir' } })
  await assert.rejects(s.kernel({ language: 'js' }), (e) => e instanceof SandboxError && /no node/.test(e.message))
})

test('bad input gets a SandboxError: an unknown language, a bad or non-string image', async () => {
  for (const language of ['ruby', 'Python', '', 42, {}]) {
    await assert.rejects(sbx.kernel({ language }), SandboxError, `language ${String(language)}`)
  }
  for (const image of [42, {}, true]) await assert.rejects(sbx.kernel({ language: 'js', image }), SandboxError)
  await assert.rejects(sbx.kernel({ language: 'js', image: '--net' }), SandboxError)
  await assert.rejects(k.runCode('"a\0b"'), SandboxError)
  await assert.rejects(sbx.runCode('1', { language: 'ruby' }), SandboxError)
})

test('one-shot runCode in node/javascript/typescript gets results and error like a kernel cell', async (t) => {
  const one = await openSandbox(t)
  let r = await one.runCode('console.log("out")\nconst v = await Promise.resolve(21)\ndisplay("shown")\nv * 2', {
    language: 'node',
  })
  assert.equal(r.exitCode, 0, r.stderr)
  assert.equal(r.stdout, 'out\n')
  assert.deepEqual(texts(r), ['shown', '42'])
  assert.deepEqual(r.files, [], 'no helper file shows')
  assert.deepEqual(await one.listFiles(), [])
  r = await one.runCode('throw new Error("one-shot")', { language: 'javascript' })
  assert.equal(r.exitCode, 1)
  assert.deepEqual([r.error.name, r.error.value], ['Error', 'one-shot'])
  assert.match(r.stderr, /Error: one-shot\n {4}at <cell>:1:7/)
  r = await one.runCode('const n: number = 3\nprocess.exit(n)', { language: 'ts' })
  assert.equal(r.exitCode, 3)
  r = await one.runCode('enum E { A = 1 }\nE.A + 1', { language: 'typescript' })
  assert.deepEqual(texts(r), ['2'])
  r = await one.runCode('setTimeout(() => console.log("timer ran"), 50)', { language: 'js' })
  assert.equal(r.stdout, 'timer ran\n', 'the box waits for pending work, as node does')
})

test('sandbox.close() closes JavaScript kernels and their boxes', async () => {
  const s = await new Sandbox().open()
  const marker = `kst-jsclose-${rand()}`
  const kk = await s.kernel({ language: 'js' })
  await kk.runCode(
    `require("child_process").spawn("sh", ["-c", "sleep 600; : ${marker}"], { detached: true, stdio: "ignore" }).unref()`,
  )
  assert.ok(await waitFor(() => procsMatching(marker).length > 0, 10_000))
  await s.close()
  assert.equal(kk.alive, false)
  assert.ok(await waitFor(() => procsMatching(marker).length === 0, 5_000))
  assert.ok(tmpDir)
})

test('an install missing acorn and amaro refuses a JavaScript kernel or cell, saying what to install; Python still runs', async () => {
  const repo = path.join(__dirname, '..')
  const pkg = path.join(tmpDir('kst-nopeers-'), 'kern-sandbox')
  fs.mkdirSync(pkg)
  for (const f of fs.readdirSync(repo)) {
    if (f === 'package.json' || /^(index|binding)\.js$/.test(f) || f.endsWith('.node'))
      fs.copyFileSync(path.join(repo, f), path.join(pkg, f))
  }
  fs.cpSync(path.join(repo, 'lib'), path.join(pkg, 'lib'), { recursive: true })
  const r = await runNode(
    `const { Sandbox, SandboxError } = require(${JSON.stringify(pkg)})
    ;(async () => {
      const s = await new Sandbox().open()
      const out = {}
      for (const [name, f] of [['js', () => s.kernel({ language: 'js' })], ['oneShot', () => s.runCode('1', { language: 'node' })]]) {
        try { await f(); out[name] = 'resolved' } catch (e) { out[name] = (e instanceof SandboxError) + ' ' + e.message }
      }
      out.python = (await s.runCode('print(6 * 7)')).stdout
      await s.close()
      console.log(JSON.stringify(out))
    })()`,
    { cwd: path.dirname(pkg) },
  )
  const out = JSON.parse(r.stdout.trim().split('\n').pop())
  assert.match(out.js, /^true .*npm install acorn amaro/)
  assert.match(out.oneShot, /^true .*npm install acorn amaro/)
  assert.equal(out.python, '42\n', 'Python needs neither')
})
