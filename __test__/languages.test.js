'use strict'
// One language table (lib/languages.js) for every entry point, parsed again at the napi boundary.

const test = require('node:test')
const assert = require('node:assert/strict')
const { kern } = require('./helpers.js')
const e2b = require('../e2b.js')
const native = require('../lib/native.js')
const { Sandbox, SandboxError, resolveLanguage, LANGUAGE_NAMES } = kern

const unsupported = (e) =>
  e instanceof SandboxError && e.code === 'ERR_UNSUPPORTED_LANGUAGE' && /language/.test(e.message)

test('the resolver: names, aliases, kernels, and one error for anything else', () => {
  const canon = (n, o) => resolveLanguage(n, o).name
  assert.deepEqual(
    LANGUAGE_NAMES.map((n) => canon(n)),
    ['python', 'bash', 'javascript', 'typescript', 'python', 'bash', 'javascript', 'javascript', 'typescript'],
  )
  assert.equal(canon('ts', { kernel: true }), 'typescript')
  assert.equal(resolveLanguage('ts').native, 'javascript')
  assert.equal(resolveLanguage('ts').typescript, true)
  assert.throws(() => resolveLanguage('bash', { kernel: true }), unsupported)
  assert.throws(() => resolveLanguage('sh', { kernel: true }), unsupported)
  for (const bad of ['ruby', 'Python', '', 'sh ', 42, null, {}]) assert.throws(() => resolveLanguage(bad), unsupported)
  assert.throws(
    () => resolveLanguage('R'),
    (e) => unsupported(e) && /no R or Java kernel/.test(e.message),
  )
})

test('every entry point takes the same names; the native side parses its own', async (t) => {
  const sbx = await new Sandbox().open()
  t.after(() => sbx.close())
  assert.equal((await sbx.runCode('print(6 * 7)', { language: 'python3' })).stdout, '42\n')
  assert.equal((await sbx.runCode('echo via-sh', { language: 'sh' })).stdout, 'via-sh\n')
  const k = await sbx.kernel({ language: 'python3' })
  t.after(() => k.close())
  assert.equal(k.language, 'python')
  await assert.rejects(sbx.kernel({ language: 'bash' }), unsupported)
  // Below the JS table: the napi boundary refuses what it does not run.
  const raw = new native.NativeSandbox({})
  assert.throws(() => raw.runCode('1', 'typescript', {}), /^Error: \[ERR_UNSUPPORTED_LANGUAGE\]/)
  assert.throws(() => raw.kernel(undefined, 'bash'), /^Error: \[ERR_UNSUPPORTED_LANGUAGE\]/)

  const box = await e2b.Sandbox.create()
  t.after(() => box.kill())
  const ctx = await box.createCodeContext({ language: 'Python3' })
  assert.equal(ctx.language, 'python')
  await assert.rejects(box.runCode('1', { language: 'cobol' }), e2b.InvalidArgumentError)
})
