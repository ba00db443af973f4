'use strict'
// kern-sandbox/e2b, Python and bash cells and code contexts: IPython's shell escapes and magics
// (as E2B's kernels take them), images saved with PIL shown as results, a DataFrame's data, bash
// cells, and contexts that are each one warm kernel, independent of the others.

const test = require('node:test')
const assert = require('node:assert/strict')
require('./helpers')
const { Sandbox, InvalidArgumentError, NotFoundError } = require('kern-sandbox/e2b')

let sbx
test.before(async () => {
  sbx = await Sandbox.create()
})
test.after(async () => {
  await sbx.kill()
})

test("!cmd runs in a shell, its output in the cell's stdout, with {expr} and $name from the cell", async () => {
  const ex = await sbx.runCode(
    'name = "kern"\nfor i in range(2):\n    !echo loop {i} $name\n!echo err >&2\nprint("after")',
  )
  assert.deepEqual(ex.logs.stdout, ['loop 0 kern\n', 'loop 1 kern\n', 'after\n'])
  assert.deepEqual(ex.logs.stderr, ['err\n'])
  const got = await sbx.runCode('files = !printf "a\\nb\\n"\nfiles')
  assert.equal(got.text, "['a', 'b']")
  const literal = await sbx.runCode('s = """\n!not a command\n%not a magic\n"""\ns.splitlines()')
  assert.equal(literal.text, "['', '!not a command', '%not a magic']", 'a cell that is valid Python is left alone')
})

test('%cd, %pwd and %env; an unknown magic is a UsageError; line numbers survive the rewrite', async () => {
  const ctx = await sbx.createCodeContext()
  try {
    const cd = await sbx.runCode('%cd /tmp\nimport os\nos.getcwd()', { context: ctx })
    assert.deepEqual(cd.logs.stdout, ['/tmp\n'])
    assert.equal(cd.text, "'/tmp'")
    assert.equal((await sbx.runCode('%pwd', { context: ctx })).text, "'/tmp'")
    assert.equal((await sbx.runCode('%cd\n%pwd', { context: ctx })).text, "'/home/user'")
    const env = await sbx.runCode('%env KST_MAGIC=42\nimport os\nos.environ["KST_MAGIC"]', { context: ctx })
    assert.deepEqual(env.logs.stdout, ['env: KST_MAGIC=42\n'])
    assert.equal(env.text, "'42'")
    assert.equal((await sbx.runCode('%env KST_MAGIC', { context: ctx })).text, "'42'")
    const bad = await sbx.runCode('x = 1\n%nosuchmagic\n', { context: ctx })
    assert.equal(bad.error.name, 'UsageError')
    assert.match(bad.error.value, /nosuchmagic/)
    const line = await sbx.runCode('!true\n\n1/0', { context: ctx })
    assert.equal(line.error.name, 'ZeroDivisionError')
    assert.match(line.error.traceback, /line 3/)
  } finally {
    await sbx.removeCodeContext(ctx)
  }
})

test("%pip install without network says so in the cell's stderr", async () => {
  const ex = await sbx.runCode('%pip install requests')
  assert.equal(ex.error, undefined)
  assert.equal(ex.logs.stderr.length, 1)
  assert.match(ex.logs.stderr[0], /%pip install needs network access.*allowInternetAccess/)
})

test("an image saved with PIL's Image.save(path) is a result (PNG) and a file", async () => {
  const ex = await sbx.runCode(
    'from PIL import Image\nimg = Image.new("RGB", (4, 3), (255, 0, 0))\nimg.save("red.png")\nimg.save("red.jpg")\nNone',
  )
  assert.equal(ex.error, undefined, ex.error && ex.error.traceback)
  assert.equal(ex.results.length, 2)
  for (const r of ex.results) {
    assert.equal(r.isMainResult, false)
    const png = Buffer.from(r.png, 'base64')
    assert.equal(png.subarray(1, 4).toString(), 'PNG')
    assert.equal(png.readUInt32BE(16), 4, 'width')
  }
  const saved = await sbx.files.read('red.png', { format: 'bytes' })
  assert.equal(Buffer.from(saved).subarray(1, 4).toString(), 'PNG')
  const toBuffer = await sbx.runCode('import io\nbuf = io.BytesIO()\nimg.save(buf, "PNG")\nNone')
  assert.deepEqual(toBuffer.results, [], 'a save to a file object is not shown')
})

test("a pandas DataFrame gives html, text and E2B's data (its columns)", async () => {
  const ex = await sbx.runCode(
    'import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", None], "t": pd.to_datetime(["2024-01-02", "2024-03-04"]), "f": [0.5, float("nan")]})',
  )
  const [r] = ex.results
  assert.match(r.html, /<table/)
  assert.match(r.text, /a/)
  assert.deepEqual(r.data, {
    a: [1, 2],
    b: ['x', null],
    t: ['2024-01-02T00:00:00', '2024-03-04T00:00:00'],
    f: [0.5, null],
  })
  assert.deepEqual(r.formats(), ['html', 'data'])
  assert.equal(r.raw.data, r.data)
})

test("bash cells: one shell per context (state carries), in /home/user, the cell's envs, errors, exit, timeout", async () => {
  await sbx.files.write('in-home.txt', 'x')
  const ex = await sbx.runCode('pwd; ls in-home.txt; echo "$KST_B"', { language: 'bash', envs: { KST_B: 'b' } })
  assert.deepEqual(ex.logs.stdout, ['/home/user\n', 'in-home.txt\n', 'b\n'])
  assert.equal(ex.error, undefined)
  const bad = await sbx.runCode('echo before; false', { language: 'bash' })
  assert.deepEqual(bad.logs.stdout, ['before\n'])
  assert.equal(bad.error.name, 'CalledProcessError')
  assert.match(bad.error.value, /exit status 1/)
  const kept = await sbx.runCode('echo "$KST_B-${KEPT:-none}"; KEPT=yes; cd /tmp', { language: 'bash' })
  assert.deepEqual(kept.logs.stdout, ['-none\n'], "the cell's envs were for that cell only")
  const state = await sbx.runCode('echo "$KEPT $(pwd)"; f() { echo fn; }', { language: 'bash' })
  assert.deepEqual(state.logs.stdout, ['yes /tmp\n'], 'variables and the working directory carry over')
  assert.deepEqual((await sbx.runCode('f', { language: 'bash' })).logs.stdout, ['fn\n'])
  const exited = await sbx.runCode('exit 4', { language: 'bash' })
  assert.match(exited.error.value, /exit status 4/)
  assert.deepEqual(
    (await sbx.runCode('echo "${KEPT:-fresh}"', { language: 'bash' })).logs.stdout,
    ['fresh\n'],
    'a fresh shell after exit',
  )
  await assert.rejects(sbx.runCode('sleep 30', { language: 'bash', timeoutMs: 300 }), (e) => e.name === 'TimeoutError')
  assert.deepEqual((await sbx.runCode('echo after', { language: 'bash' })).logs.stdout, ['after\n'])
  const ctxs = await sbx.listCodeContexts()
  assert.ok(ctxs.some((c) => c.language === 'bash'))
})

test('contexts: the defaults are listed, each is its own kernel, restart clears one, remove forgets it', async () => {
  const before = await sbx.listCodeContexts()
  assert.ok(before.some((c) => c.language === 'python' && c.cwd === '/home/user'))
  assert.ok(before.some((c) => c.language === 'javascript'))
  assert.ok(before.every((c) => typeof c.id === 'string' && c.id.length > 0))
  const a = await sbx.createCodeContext({ language: 'python' })
  const b = await sbx.createCodeContext({ language: 'python', cwd: '/home/user/sub' })
  assert.deepEqual(Object.keys(a).sort(), ['cwd', 'id', 'language'])
  assert.equal(b.cwd, '/home/user/sub')
  await sbx.runCode('v = "a"', { context: a })
  await sbx.runCode('v = "b"', { context: b })
  assert.equal((await sbx.runCode('v', { context: a })).text, "'a'")
  assert.equal((await sbx.runCode('v', { context: b })).text, "'b'")
  assert.equal((await sbx.runCode('import os; os.getcwd()', { context: b })).text, "'/home/user/sub'")
  assert.ok(await sbx.files.exists('sub'), 'the cwd was created')
  assert.equal((await sbx.runCode('"v" in globals()')).text, 'False', 'the default context is another kernel')
  const ids = (await sbx.listCodeContexts()).map((c) => c.id)
  assert.ok(ids.includes(a.id) && ids.includes(b.id))
  await sbx.restartCodeContext(a)
  const gone = await sbx.runCode('v', { context: a })
  assert.equal(gone.error.name, 'NameError')
  assert.equal(gone.executionCount, 1, 'a restarted context counts from 1')
  await sbx.restartCodeContext(b.id)
  assert.equal((await sbx.runCode('import os; os.getcwd()', { context: b })).text, "'/home/user/sub'", 'cwd kept')
  await sbx.removeCodeContext(a.id)
  await sbx.removeCodeContext(b)
  const after = (await sbx.listCodeContexts()).map((c) => c.id)
  assert.ok(!after.includes(a.id) && !after.includes(b.id))
  await assert.rejects(sbx.runCode('1', { context: a }), NotFoundError)
  await assert.rejects(sbx.restartCodeContext('no-such-id'), NotFoundError)
  await assert.rejects(sbx.createCodeContext({ language: 'r' }), InvalidArgumentError)
})

test('notebook magics: %time, %ls, %matplotlib inline (no-op), %%writefile, %%html, automagic pip/cd', async () => {
  const ctx = await sbx.createCodeContext()
  try {
    const timed = await sbx.runCode('%time 6 * 7', { context: ctx })
    assert.equal(timed.text, '42')
    assert.match(timed.logs.stdout.join(''), /Wall time: /)
    await sbx.files.write('listed/one.txt', '1')
    assert.deepEqual((await sbx.runCode('%ls listed', { context: ctx })).logs.stdout, ['one.txt\n'])
    const setup = await sbx.runCode('%matplotlib inline\n%config InlineBackend.figure_format = "retina"\n1', {
      context: ctx,
    })
    assert.equal(setup.error, undefined)
    assert.equal(setup.text, '1')
    const wrote = await sbx.runCode('%%writefile listed/a.py\nprint("hi")\n', { context: ctx })
    assert.deepEqual(wrote.logs.stdout, ['Writing listed/a.py\n'])
    assert.equal(await sbx.files.read('listed/a.py'), 'print("hi")\n')
    const html = await sbx.runCode('%%html\n<b>bold</b>', { context: ctx })
    assert.equal(html.results[0].html, '<b>bold</b>')
    const auto = await sbx.runCode('cd /tmp\nimport os\nos.getcwd()', { context: ctx })
    assert.equal(auto.text, "'/tmp'")
    const pip = await sbx.runCode('pip install requests', { context: ctx })
    assert.match(pip.logs.stderr.join(''), /%pip install needs network access/)
    const py = await sbx.runCode('cd = 5\ncd', { context: ctx })
    assert.equal(py.text, '5', 'a line that is Python stays Python')
    const inString = await sbx.runCode('s = """\nls -la\n!echo no\n"""\n!true\ns', { context: ctx })
    assert.equal(inString.text, "'\\nls -la\\n!echo no\\n'", 'lines inside a string literal are never rewritten')
  } finally {
    await sbx.removeCodeContext(ctx)
  }
})
