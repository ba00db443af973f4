'use strict'
// kern-sandbox/e2b's JavaScript and TypeScript contexts: the package's JS kernel behind E2B's
// runCode, with the same Execution shapes, envs, working directory, timeouts and errors as Python.

const test = require('node:test')
const assert = require('node:assert/strict')
require('./helpers')
const { Sandbox, SandboxError, TimeoutError } = require('kern-sandbox/e2b')

let sbx
test.before(async () => {
  sbx = await Sandbox.create()
})
test.after(async () => {
  await sbx.kill()
})

test('language js / javascript share the default JavaScript context; its state persists', async () => {
  const a = await sbx.runCode('const xs = [1, 2, 3]\nconsole.log("hi")\nxs.map((x) => x * 2)', { language: 'js' })
  assert.equal(a.text, '[ 2, 4, 6 ]')
  assert.deepEqual(a.logs, { stdout: ['hi\n'], stderr: [] })
  assert.equal(a.results[0].isMainResult, true)
  const b = await sbx.runCode('xs.length', { language: 'javascript' })
  assert.equal(b.text, '3')
  assert.equal(b.executionCount, 2)
  const def = (await sbx.listCodeContexts()).find((c) => c.language === 'javascript')
  assert.equal((await sbx.runCode('xs[0]', { context: def })).text, '1', 'the listed default is that context')
  assert.equal((await sbx.runCode('"xs" in globals()')).text, 'False', 'the Python context is another kernel')
})

test('TypeScript: types stripped, a context of its own; cwd is /home/user', async () => {
  const ex = await sbx.runCode('const n: number = 21\nfunction twice(v: number): number { return v * 2 }\ntwice(n)', {
    language: 'ts',
  })
  assert.equal(ex.text, '42')
  assert.equal((await sbx.runCode('process.cwd()', { language: 'typescript' })).text, '/home/user')
  const ctx = await sbx.createCodeContext({ language: 'ts', cwd: '/home/user/tsdir' })
  assert.deepEqual([ctx.language, ctx.cwd], ['typescript', '/home/user/tsdir'])
  assert.equal((await sbx.runCode('process.cwd()', { context: ctx })).text, '/home/user/tsdir')
  assert.equal((await sbx.runCode('typeof n', { context: ctx })).text, 'undefined', 'contexts are independent')
  await sbx.removeCodeContext(ctx)
})

test('JavaScript: errors are the error (not stderr), envs for one execution, output lines, results', async () => {
  const errs = []
  const failed = await sbx.runCode('throw new TypeError("boom")', { language: 'js', onError: (e) => errs.push(e) })
  assert.equal(failed.error.name, 'TypeError')
  assert.equal(failed.error.value, 'boom')
  assert.match(failed.error.traceback, /TypeError: boom/)
  assert.deepEqual(failed.logs.stderr, [])
  assert.equal(errs[0], failed.error)
  assert.equal((await sbx.runCode('process.env.KST_JS', { language: 'js', envs: { KST_JS: 'set' } })).text, 'set')
  assert.equal((await sbx.runCode('process.env.KST_JS ?? "unset"', { language: 'js' })).text, 'unset')
  const out = []
  const ex = await sbx.runCode(
    'console.log("a\\nb"); console.error("e"); display({ "text/html": "<i>x</i>" }, { raw: true }); 7',
    {
      language: 'js',
      onStdout: (m) => out.push(m.line),
    },
  )
  assert.deepEqual(out, ['a\n', 'b\n'])
  assert.deepEqual(ex.logs.stderr, ['e\n'])
  assert.deepEqual(
    ex.results.map((r) => [r.html, r.text, r.isMainResult]),
    [
      ['<i>x</i>', undefined, false],
      [undefined, '7', true],
    ],
  )
})

test('JavaScript: timeoutMs interrupts a busy loop, the context keeps its state', async () => {
  await sbx.runCode('globalThis.keptJs = "still here"', { language: 'js' })
  await assert.rejects(sbx.runCode('while (true) {}', { language: 'js', timeoutMs: 300 }), TimeoutError)
  assert.equal((await sbx.runCode('keptJs', { language: 'js' })).text, 'still here')
})

test('an image without node: a JavaScript context rejects, saying so', async () => {
  const s = await Sandbox.create({ envs: { PATH: '/kst-no-such-dir' } })
  try {
    await assert.rejects(
      s.runCode('1', { language: 'js' }),
      (e) => e instanceof SandboxError && /has no node/.test(e.message),
    )
    await assert.rejects(
      s.createCodeContext({ language: 'ts' }),
      (e) => e instanceof SandboxError && /has no node/.test(e.message),
    )
  } finally {
    await s.kill()
  }
})
