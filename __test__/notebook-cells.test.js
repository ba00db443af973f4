'use strict'
// Cells run as a notebook runs them, in one-shot runCode and the warm kernel alike: code sent with
// a common leading indentation (as models send it from an indented string) runs as IPython runs
// it, and PIL's Image.show() displays the image as a result instead of looking for a viewer.

const test = require('node:test')
const assert = require('node:assert/strict')
const { kern } = require('./helpers')

const { Sandbox } = kern

let sbx
let k
test.before(async () => {
  sbx = await new Sandbox().open()
  k = await sbx.kernel()
})
test.after(async () => {
  await k.close()
  await sbx.close()
})

/** The one-shot runner and the warm kernel, each as `name` and a runCode. */
const runners = () => [
  ['runCode', (code) => sbx.runCode(code)],
  ['kernel', (code) => k.runCode(code)],
]

const texts = (r) => r.results.map((x) => x.text)

test('the indentation common to every non-blank line is stripped, and only that', async () => {
  for (const [name, run] of runners()) {
    let r = await run('    x = 20\n    x + 1')
    assert.equal(r.exitCode, 0, `${name}: ${r.stderr}`)
    assert.deepEqual(texts(r), ['21'], name)
    // Blank and whitespace-only lines count for nothing; deeper blocks keep their extra indent.
    r = await run('\n    a = 2\n\n  \n    if a:\n        a += 1\n    a\n')
    assert.deepEqual(texts(r), ['3'], `${name}: ${r.stderr}`)
    r = await run('\tt = 4\n\tt')
    assert.deepEqual(texts(r), ['4'], `${name}: tabs: ${r.stderr}`)
    // Inside a string the common indentation goes too, as IPython does it.
    r = await run('    s = """\n      a\n    """\n    s')
    assert.deepEqual(texts(r), ["'\\n  a\\n'"], `${name}: ${r.stderr}`)
    // A cell that is not indented as a whole is left alone: its stray indent is still an error.
    r = await run('y = 1\n    z = 2')
    assert.equal(r.exitCode, 1, name)
    assert.equal(r.error.name, 'IndentationError', name)
  }
})

test("a traceback of an indented cell keeps the user's line numbers", async () => {
  for (const [name, run] of runners()) {
    const r = await run('\n    x = 1\n    def f():\n        return 1 / 0\n    f()')
    assert.equal(r.exitCode, 1, name)
    assert.equal(r.error.name, 'ZeroDivisionError', name)
    assert.match(r.stderr, /line 5, in <module>/, name)
    assert.match(r.stderr, /line 4, in f/, name)
  }
})

/** The width and height in a PNG's IHDR. */
function pngSize(buf) {
  return [buf.readUInt32BE(16), buf.readUInt32BE(20)]
}

test('PIL Image.show() displays the image as a result (image/png)', async () => {
  for (const [name, run] of runners()) {
    const r = await run(
      'from PIL import Image\n' +
        'img = Image.new("RGB", (7, 3), "red")\n' +
        'img.show()\n' +
        'img.show(title="again")\n' +
        'print("after")',
    )
    assert.equal(r.exitCode, 0, `${name}: ${r.stderr}`)
    assert.equal(r.stdout, 'after\n', name)
    assert.equal(r.results.length, 2, name)
    for (const res of r.results) {
      assert.ok(res.png, `${name}: ${res.formats()}`)
      assert.deepEqual(pngSize(res.png), [7, 3], name)
      assert.equal(res.isMainResult, false, name)
      assert.match(res.text, /PIL\.Image\.Image image mode=RGB size=7x3/, name)
    }
  }
})
