'use strict'
// Rich results of one-shot Python runCode: the trailing expression, display(), matplotlib
// figures, the MIME methods, the uncaught-error shape, and what the box writes back being untrusted.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const { kern, openSandbox, recordingKern, realKern, tmpDir } = require('./helpers')

const { Sandbox, Result, ExecutionResult } = kern
const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47])

let sbx
test.before(async () => {
  sbx = await new Sandbox().open()
})
test.after(async () => {
  await sbx.close()
})

/** Names at the workspace root, straight from the host filesystem. */
function rootNames() {
  return fs.readdirSync(sbx.workspacePath)
}

test('the trailing expression is the main result; None and statements give none', async () => {
  let r = await sbx.runCode('x = 6\nx * 7')
  assert.ok(r instanceof ExecutionResult)
  assert.equal(r.results.length, 1)
  assert.ok(r.results[0] instanceof Result)
  assert.equal(r.results[0].text, '42')
  assert.equal(r.results[0].isMainResult, true)
  assert.deepEqual(r.results[0].formats(), ['text/plain'])
  assert.equal(r.stdout, '', 'capture never prints')

  r = await sbx.runCode('None')
  assert.deepEqual(r.results, [])
  r = await sbx.runCode('y = 1')
  assert.deepEqual(r.results, [])
  r = await sbx.runCode('print("only output")')
  assert.deepEqual(r.results, [], 'print() returns None')
  assert.equal(r.stdout, 'only output\n')
})

test('a multi-line trailing expression and non-ASCII text', async () => {
  const r = await sbx.runCode('d = {"ü": "ß"}\n(\n  d,\n  "日本",\n)')
  assert.equal(r.results[0].text, "({'ü': 'ß'}, '日本')")
})

test('the trailing expression is found however the cell is laid out', async () => {
  const cases = [
    ['a = 1; a + 1', '2'],
    ['x = 5\n# a comment\n\nx  # trailing comment\n', '5'],
    ['s = """\nx\n"""\nlen(s)', '3'],
    ['s = """\n1\n"""', null],
    ['def f():\n    return 7\n\n@staticmethod\ndef g():\n    pass\nf()', '7'],
    ['v = [\n1,\n2\n]\nsum(v)', '3'],
    ['v = (1 +\n2)', null],
    ['if True:\n    q = 1\nelse:\n    q = 2\nq', '1'],
    ['t = 1 + \\\n2\nt', '3'],
    ['(\n  "a",\n  "b",\n)', "('a', 'b')"],
    // assignments are statements; comparisons that contain `=` are expressions
    ['x = 1 + 1', null],
    ['class C: pass\nc = C()\nc.n = 1\nc.n += 1', null],
    ['a = [0]\na[0] = 2\na[0] **= 3', null],
    ['x = 5\nx <= 4', 'False'],
    ['x = 5\nx != 5', 'False'],
    ['x = 5\nx >= 5', 'True'],
    ['a = [0]\na[0] == 0', 'True'],
    ['d = {}\nd["k=v"] = 1\nd', "{'k=v': 1}"],
    // a trailing `;` hides the value, as in IPython; one inside the line does not
    ['x = 5\nx * 2;', null],
    ['x = 5\nx * 2;  ', null],
    ['print("side effect");', null],
    ['x = 5; x * 3', '15'],
  ]
  for (const [code, want] of cases) {
    const r = await sbx.runCode(code)
    assert.equal(r.exitCode, 0, `${JSON.stringify(code)}: ${r.stderr}`)
    assert.deepEqual(
      r.results.map((x) => x.text),
      want === null ? [] : [want],
      JSON.stringify(code),
    )
  }
  // Line numbers in a traceback from the trailing expression are the cell's own.
  const e = await sbx.runCode('x = 1\n\n\n1 / 0')
  assert.match(e.stderr, /\.cell-[0-9a-f]{8}\.py", line 4, in <module>/)
})

test('results is [] for bash, node and run(), and with trackFiles: false', async (t) => {
  assert.deepEqual((await sbx.runCode('echo 1', { language: 'bash' })).results, [])
  assert.deepEqual((await sbx.run(['python3', '-c', '1 + 1'])).results, [])
  assert.equal((await sbx.run(['true'])).error, null)
  const quiet = await openSandbox(t, { trackFiles: false })
  const r = await quiet.runCode('1 + 1')
  assert.equal(r.results[0].text, '2')
  assert.deepEqual(r.files, [])
})

test('display() of several objects, in order, before the trailing expression', async () => {
  const r = await sbx.runCode('display(1, "two")\ndisplay(3.5, metadata={}, transient={}, display_id="a")\n"tail"')
  assert.deepEqual(
    r.results.map((x) => [x.text, x.isMainResult]),
    [
      ['1', false],
      ["'two'", false],
      ['3.5', false],
      ["'tail'", true],
    ],
  )
  // display() is importable the way IPython code imports it, and display(None) shows nothing.
  const r2 = await sbx.runCode('display(None)\nimport builtins\nbuiltins.display("x")')
  assert.deepEqual(
    r2.results.map((x) => x.text),
    ["'x'"],
  )
})

test('the _repr_*_ methods fill the MIME bundle and the getters read it', async () => {
  const code = `
class Rich:
    def _repr_html_(self): return "<b>h</b>"
    def _repr_markdown_(self): return "**m**"
    def _repr_svg_(self): return "<svg/>"
    def _repr_latex_(self): return "$x$"
    def _repr_json_(self): return {"k": [1, 2]}
    def _repr_javascript_(self): return "alert(1)"
    def _repr_png_(self): return b"\\x89PNG fake"
    def _repr_jpeg_(self): return b"\\xff\\xd8 fake"
    def __repr__(self): return "Rich()"
Rich()
`
  const [res] = (await sbx.runCode(code)).results
  assert.equal(res.html, '<b>h</b>')
  assert.equal(res.markdown, '**m**')
  assert.equal(res.svg, '<svg/>')
  assert.equal(res.latex, '$x$')
  assert.deepEqual(JSON.parse(res.json), { k: [1, 2] })
  assert.equal(res.javascript, 'alert(1)')
  assert.ok(Buffer.isBuffer(res.png))
  assert.equal(res.png.toString('latin1'), '\x89PNG fake')
  assert.equal(res.jpeg.toString('latin1'), '\xff\xd8 fake')
  assert.equal(res.text, 'Rich()')
  assert.deepEqual(res.formats().sort(), [
    'application/javascript',
    'application/json',
    'image/jpeg',
    'image/png',
    'image/svg+xml',
    'text/html',
    'text/latex',
    'text/markdown',
    'text/plain',
  ])
  const plain = (await sbx.runCode('1')).results[0]
  assert.equal(plain.png, null)
  assert.equal(plain.jpeg, null)
  assert.equal(plain.html, undefined)
  assert.deepEqual(JSON.parse(JSON.stringify(plain)), {
    data: { 'text/plain': '1' },
    isMainResult: true,
    executionCount: null,
  })
})

test('_repr_mimebundle_ is honoured, with include and exclude passed through', async () => {
  const code = `
class B:
    seen = []
    def _repr_mimebundle_(self, include=None, exclude=None):
        B.seen.append((include, exclude))
        return {"text/html": "<i>b</i>", "application/vnd.custom+json": {"a": 1}}
    def _repr_markdown_(self): return "md"
display(B())
display(B(), exclude=["text/markdown"])
display(B(), include=["text/html"])
print(B.seen)
`
  const r = await sbx.runCode(code)
  assert.equal(r.exitCode, 0, r.stderr)
  const [all, noMd, onlyHtml] = r.results
  assert.equal(all.html, '<i>b</i>')
  assert.equal(all.markdown, 'md', 'methods fill in what the bundle left out')
  assert.deepEqual(JSON.parse(all.data['application/vnd.custom+json']), { a: 1 })
  assert.ok(all.text.startsWith('<__main__.B object'))
  assert.equal(noMd.markdown, undefined)
  assert.deepEqual(onlyHtml.formats(), ['text/html'])
  assert.match(r.stdout, /\(None, None\), \(None, \{'text\/markdown'\}\), \(\{'text\/html'\}, None\)/)
})

test('a broken _repr_ method is skipped; the value still has its text', async () => {
  const r = await sbx.runCode(
    'class X:\n    def _repr_html_(self): raise ValueError("no")\n    def __repr__(self): return "X!"\nX()',
  )
  assert.equal(r.exitCode, 0)
  assert.deepEqual(r.results[0].data, { 'text/plain': 'X!' })
})

test('every open matplotlib figure is captured as PNG once, after the trailing expression', async () => {
  const r = await sbx.runCode(
    'import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\n' +
      'plt.figure(); plt.plot([1, 4, 9])\nplt.figure(); plt.bar([1, 2], [3, 4])\n"done"',
  )
  assert.equal(r.exitCode, 0, r.stderr)
  assert.deepEqual(
    r.results.map((x) => x.formats()),
    [['text/plain'], ['image/png'], ['image/png']],
  )
  assert.equal(r.results[0].isMainResult, true)
  for (const fig of r.results.slice(1)) {
    assert.ok(fig.png.subarray(0, 4).equals(PNG_MAGIC))
    assert.equal(fig.isMainResult, false)
  }
})

test('matplotlib gets a private config dir: no warning, no temp dir in the workspace', async () => {
  const before = rootNames()
  const r = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1])\nNone')
  assert.equal(r.exitCode, 0, r.stderr)
  assert.doesNotMatch(r.stderr, /matplotlib|not a writable|MPLCONFIGDIR/i)
  assert.deepEqual(rootNames().sort(), before.sort())
  assert.equal(r.results.length, 1)
})

test('a pandas DataFrame gives html and text', async () => {
  const r = await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})')
  assert.equal(r.exitCode, 0, r.stderr)
  const [df] = r.results
  assert.match(df.html, /<table/)
  assert.match(df.text, /a\s+b/)
})

test('capture never changes the exit status: sys.exit codes pass through', async () => {
  assert.equal((await sbx.runCode('import sys\nsys.exit(3)')).exitCode, 3)
  assert.equal((await sbx.runCode('import sys\nsys.exit()')).exitCode, 0)
  const r = await sbx.runCode('import sys\nprint("out")\nsys.exit("bye")')
  assert.equal(r.exitCode, 1)
  assert.equal(r.stdout, 'out\n')
  assert.match(r.stderr, /bye/)
  assert.equal(r.fault, null)
})

test('an uncaught exception: exit 1, no fault, a traceback of the user code only, and error', async () => {
  const r = await sbx.runCode('print("before")\ndef f():\n    raise KeyError("missing")\nf()')
  assert.equal(r.exitCode, 1)
  assert.equal(r.fault, null)
  assert.equal(r.success, false)
  assert.equal(r.stdout, 'before\n')
  assert.match(
    r.stderr,
    /Traceback \(most recent call last\):\n {2}File "\/workspace\/\.cell-[0-9a-f]{8}\.py", line 4, in <module>/,
  )
  assert.match(r.stderr, /KeyError: 'missing'/)
  assert.doesNotMatch(r.stderr, /\.run-|_run\(|exec\(/, 'no frame of the runner')
  assert.equal(r.error.name, 'KeyError')
  assert.equal(r.error.value, "'missing'")
  assert.ok(r.stderr.includes(r.error.traceback), 'error.traceback is what stderr shows')
  assert.deepEqual((await sbx.runCode('1')).error, null)
  // A syntax error is reported the same way.
  const s = await sbx.runCode('def (')
  assert.equal(s.exitCode, 1)
  assert.equal(s.error.name, 'SyntaxError')
  assert.match(s.stderr, /SyntaxError/)
})

test("how the runner compiles a cell is not the cell's business: names, lines, source, no tracer left", async () => {
  const cell = /\/workspace\/\.cell-[0-9a-f]{8}\.py/
  // A nested function's frames carry the cell's file, its lines and their source text.
  const r = await sbx.runCode(
    'import inspect, sys\ndef outer():\n    def inner():\n        return 1 / 0\n    return inner()\n' +
      'print(sys.gettrace(), inspect.getsource(outer).splitlines()[0])\nouter()',
  )
  assert.equal(r.stdout, 'None def outer():\n')
  assert.match(r.stderr, /\.cell-[0-9a-f]{8}\.py", line 7, in <module>\n {4}outer\(\)/)
  assert.match(r.stderr, /\.cell-[0-9a-f]{8}\.py", line 4, in inner\n {4}return 1 \/ 0/)
  assert.match(r.stderr, /ZeroDivisionError/)
  // A syntax error names the cell's file and line, whether the cell fails to parse anywhere or
  // only as a whole (a __future__ import after a statement).
  for (const [code, line] of [
    ['x = 1\ny = (', 2],
    ['x = 1\nfrom __future__ import annotations', 2],
  ]) {
    const s = await sbx.runCode(code)
    assert.equal(s.exitCode, 1, code)
    assert.equal(s.error.name, 'SyntaxError', code)
    assert.match(s.stderr, cell, code)
    assert.match(s.stderr, new RegExp(`line ${line}`), code)
    assert.doesNotMatch(s.stderr, /<string>/, code)
  }
})

test('an uncaught KeyboardInterrupt exits as plain python3 does', async () => {
  const plain = await sbx.run(['python3', '-c', 'raise KeyboardInterrupt'])
  const r = await sbx.runCode('raise KeyboardInterrupt')
  assert.equal(r.exitCode, plain.exitCode)
  assert.equal(r.error.name, 'KeyboardInterrupt')
  assert.match(r.stderr, /KeyboardInterrupt/)
})

test('helper files never show in result.files and are gone after the call', async () => {
  const r = await sbx.runCode('open("made.txt", "w").write("x")\nimport os\nsorted(os.listdir("."))')
  assert.deepEqual(
    r.files.map((f) => f.path),
    ['made.txt'],
  )
  assert.match(r.results[0].text, /\.cell-[0-9a-f]{8}\.py/, 'the cell file exists while it runs')
  assert.deepEqual(
    rootNames().filter((n) => /^\.(cell|run|res)-/.test(n)),
    [],
  )
  assert.deepEqual(
    (await sbx.listFiles()).map((f) => f.path),
    ['made.txt'],
  )
  fs.unlinkSync(path.join(sbx.workspacePath, 'made.txt'))
})

test('helper files are gone after a timeout and after an abort too', async () => {
  const t = await sbx.runCode('import time\ntime.sleep(30)', { timeoutS: 1 })
  assert.equal(t.fault.type, 'timeout')
  assert.deepEqual(t.results, [])
  assert.deepEqual(
    rootNames().filter((n) => /^\.(cell|run|res)-/.test(n)),
    [],
  )
  const ac = new AbortController()
  const p = sbx.runCode('import time\ntime.sleep(30)', { signal: ac.signal })
  setTimeout(() => ac.abort(), 300)
  await assert.rejects(p, { name: 'AbortError' })
  assert.deepEqual(
    rootNames().filter((n) => /^\.(cell|run|res)-/.test(n)),
    [],
  )
})

/** Makes `dir` immutable (even root then creates nothing in it); false where the filesystem or
 * the host does not allow it. */
function setImmutable(dir, on) {
  try {
    execFileSync('chattr', [on ? '+i' : '-i', dir], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

test('a runner call whose helper files cannot be written rejects, starts no box, and leaves no file', async (t) => {
  const rec = realKern ? null : recordingKern()
  const ws = tmpDir('kst-immutable-')
  fs.writeFileSync(path.join(ws, 'kept.txt'), 'x')
  const s = await openSandbox(t, { workspace: ws }, rec ? { bin: rec.bin } : {})
  if (!setImmutable(ws, true)) return t.skip('chattr +i is not available here')
  try {
    for (const language of ['python', 'javascript']) {
      await assert.rejects(s.runCode('print(1)', { language }), (e) => {
        assert.equal(e.name, 'SandboxError')
        assert.match(e.message, /cannot write "\.(cell|cap|run)-[0-9a-f]{8}\./)
        return true
      })
    }
    if (rec) assert.equal(rec.boxCalls().length, 0, 'kern is not started for a call whose files failed')
  } finally {
    setImmutable(ws, false)
  }
  assert.deepEqual(fs.readdirSync(ws), ['kept.txt'])
  const r = await s.runCode('print(1)\n1 + 1')
  assert.equal(r.stdout, '1\n', r.stderr)
  assert.equal(r.results[0].text, '2')
  assert.deepEqual(fs.readdirSync(ws), ['kept.txt'])
})

test('a missing results file gives results [] and an intact result', async () => {
  const r = await sbx.runCode('import os\nprint("kept", flush=True)\nos._exit(4)')
  assert.equal(r.exitCode, 4)
  assert.equal(r.stdout, 'kept\n')
  assert.deepEqual(r.results, [])
  assert.equal(r.error, null)
})

/** A cell that replaces its own results file with `write(res)` once the runner is done. */
function afterRunner(write) {
  return `
import atexit, sys
res = sys.argv[0].replace(".cell-", ".res-")[:-3] + ".json"
def _late():
${write}
atexit.register(_late)
print("ran")
"value"
`
}

test('a malformed results file gives results [] and an intact result', async () => {
  for (const body of [
    '    open(res, "w").write("{not json\\n[1,2]\\n\\"s\\"\\nnull")',
    '    open(res, "w").write(\'{"data": "x"}\\n{"data": {"text/plain": 5}}\')',
  ]) {
    const r = await sbx.runCode(afterRunner(body))
    assert.equal(r.exitCode, 0, r.stderr)
    assert.equal(r.stdout, 'ran\n')
    assert.equal(r.error, null)
    assert.ok(r.results.every((x) => x instanceof Result))
    assert.ok(r.results.every((x) => Object.values(x.data).every((v) => typeof v === 'string')))
  }
})

test('an oversize results file is not read: results [] and an intact result', async () => {
  const r = await sbx.runCode(afterRunner('    f = open(res, "w")\n    f.truncate(65 * 1024 * 1024)\n    f.close()'))
  assert.equal(r.exitCode, 0, r.stderr)
  assert.equal(r.stdout, 'ran\n')
  assert.deepEqual(r.results, [])
})

test('a results file that is a link or a FIFO is not followed and does not hang', async () => {
  fs.writeFileSync(path.join(sbx.workspacePath, 'fake.json'), '{"data": {"text/plain": "forged"}, "main": true}')
  const link = await sbx.runCode(
    afterRunner('    import os\n    os.unlink(res)\n    os.symlink("/workspace/fake.json", res)'),
  )
  assert.equal(link.exitCode, 0, link.stderr)
  assert.deepEqual(link.results, [], 'a symlinked results file is refused')
  const fifo = await sbx.runCode(afterRunner('    import os\n    os.unlink(res)\n    os.mkfifo(res)'))
  assert.equal(fifo.exitCode, 0, fifo.stderr)
  assert.deepEqual(fifo.results, [])
  assert.deepEqual(
    rootNames().filter((n) => /^\.(cell|run|res)-/.test(n)),
    [],
  )
  fs.unlinkSync(path.join(sbx.workspacePath, 'fake.json'))
})

test("the runner's code left for later calls is only a cache: a cell that spoils it costs a compile, not a result", async () => {
  // A plain cell first, so the session holds the runner's code; then cells that overwrite the
  // copy in their own box (with junk, and with this interpreter's tag over junk): each next call
  // still runs its cell, gives its result, and leaves no helper file behind.
  let r = await sbx.runCode('1 + 1')
  assert.equal(r.results[0].text, '2')
  const spoil = (body) =>
    `import glob, sys\nfor p in glob.glob('/workspace/.run-*.bin'):\n    open(p, 'wb').write(${body})\n'spoilt'`
  for (const body of ["b'junk'", "(sys.version + '\\n').encode() + b'\\x00junk'", "b''"]) {
    r = await sbx.runCode(spoil(body))
    assert.equal(r.exitCode, 0, r.stderr)
    assert.equal(r.results[0].text, "'spoilt'")
    r = await sbx.runCode('x = 20\nx + 22')
    assert.equal(r.exitCode, 0, r.stderr)
    assert.equal(r.stderr, '')
    assert.equal(r.results[0].text, '42')
    r = await sbx.runCode('[1] * 2')
    assert.equal(r.results[0].text, '[1, 1]')
  }
  assert.deepEqual(
    rootNames().filter((n) => /^\.(cell|run|res|cap)-/.test(n)),
    [],
  )
})

test('onResult fires for each result, in order, before runCode resolves', async () => {
  const seen = []
  const r = await sbx.runCode('display("a")\ndisplay("b")\n"c"', { onResult: (x) => seen.push(x) })
  assert.deepEqual(
    seen.map((x) => x.text),
    ["'a'", "'b'", "'c'"],
  )
  assert.deepEqual(seen, r.results)
  // A throwing callback does not break the call.
  const r2 = await sbx.runCode('1', {
    onResult: () => {
      throw new Error('user bug')
    },
  })
  assert.equal(r2.results[0].text, '1')
  await assert.rejects(sbx.runCode('1', { onResult: 'nope' }), TypeError)
})

test('the one-shot runCode returns results too, and takes onResult', async () => {
  const seen = []
  const r = await kern.runCode('[1, 2][0] + 1', { onResult: (x) => seen.push(x.text) })
  assert.equal(r.results[0].text, '2')
  assert.deepEqual(seen, ['2'])
})

test('Result works as 0.1.23 built it: from a MIME bundle alone', () => {
  const r = new Result({ 'text/plain': 'x', 'image/png': '' })
  assert.equal(r.text, 'x')
  assert.equal(r.png, null, 'an empty image is no image')
  assert.equal(r.isMainResult, false)
  assert.deepEqual(new Result().formats(), [])
})
