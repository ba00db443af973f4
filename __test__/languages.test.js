'use strict'
// One language table (lib/languages.js) for every entry point, parsed again at the napi boundary;
// and 'bash' that is bash.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { kern, tmpDir } = require('./helpers.js')
const e2b = require('../lib/e2b/entry.js')
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

test("language 'bash' runs bash where the image has it, sh where it does not", async (t) => {
  const sbx = await new Sandbox().open()
  t.after(() => sbx.close())
  const r = await sbx.runCode('arr=(a b); [[ ${#arr[@]} == 2 ]] && echo ok', { language: 'bash' })
  assert.equal(r.stdout, 'ok\n', r.stderr)
  assert.equal(r.exitCode, 0)
  // The code is one argument: quotes, $1 and newlines reach bash as written.
  const q = await sbx.runCode(`printf '%s|' "a b" '$1' "$0"\necho\nexit 7`, { language: 'bash' })
  assert.equal(q.stdout, 'a b|$1|bash|\n')
  assert.equal(q.exitCode, 7)
  // Past argv's per-string limit the code goes through a workspace file, removed afterwards.
  const big = await sbx.runCode(`# ${'pad '.repeat(40_000)}\nb=(x y z); echo "big:\${b[2]}"`, { language: 'bash' })
  assert.equal(big.stdout, 'big:z\n', big.stderr)
  assert.deepEqual(
    (await sbx.listFiles()).filter((f) => f.path.startsWith('.cell-')),
    [],
  )

  // An image without bash, as far as the box can tell: a PATH whose only shell is sh.
  const ws = tmpDir('kst-nobash-')
  fs.mkdirSync(path.join(ws, 'nobash'))
  fs.symlinkSync('/bin/sh', path.join(ws, 'nobash', 'sh'))
  const plain = await new Sandbox({ workspace: ws, env: { PATH: '/workspace/nobash' } }).open()
  t.after(() => plain.close())
  const s = await plain.runCode('echo "${BASH_VERSION:-no bash}"', { language: 'bash' })
  assert.equal(s.stdout, 'no bash\n', s.stderr)
  const sBig = await plain.runCode(`# ${'pad '.repeat(40_000)}\necho "\${BASH_VERSION:-no bash}"`, { language: 'bash' })
  assert.equal(sBig.stdout, 'no bash\n', sBig.stderr)
})
