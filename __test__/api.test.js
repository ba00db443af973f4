'use strict'
// The public shape: every export of the 0.1.1 d.ts, real classes, version.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { kern, openSandbox, repo, tmpDir } = require('./helpers')

test('every export of the reference d.ts exists with the right kind', () => {
  assert.equal(typeof kern.Sandbox, 'function')
  assert.equal(typeof kern.withSandbox, 'function')
  assert.equal(typeof kern.runCode, 'function')
  assert.equal(typeof kern.ExecutionResult, 'function')
  assert.equal(typeof kern.SandboxError, 'function')
  assert.equal(typeof kern.MountRefused, 'function')
  assert.equal(typeof kern.version, 'string')
  for (const m of ['open', 'close', 'runCode', 'run', 'writeFile', 'readFile', 'snapshot', 'restore', 'listFiles']) {
    assert.equal(typeof kern.Sandbox.prototype[m], 'function', `Sandbox.prototype.${m}`)
  }
})

test('version is 0.2.0 and matches package.json', () => {
  assert.equal(kern.version, '0.2.0')
  assert.equal(kern.version, JSON.parse(fs.readFileSync(path.join(repo, 'package.json'), 'utf8')).version)
})

test('ExecutionResult is a class with a success getter', () => {
  const ok = new kern.ExecutionResult({
    stdout: 'a',
    stderr: '',
    exitCode: 0,
    durationMs: 1,
    fault: null,
    files: [],
    truncated: false,
  })
  assert.ok(ok instanceof kern.ExecutionResult)
  assert.equal(ok.success, true)
  const desc = Object.getOwnPropertyDescriptor(kern.ExecutionResult.prototype, 'success')
  assert.equal(typeof desc.get, 'function', 'success is a getter on the prototype')
  const failed = new kern.ExecutionResult({ stdout: '', stderr: '', exitCode: 1, durationMs: 1 })
  assert.equal(failed.success, false)
  assert.equal(failed.fault, null)
  assert.deepEqual(failed.files, [])
  assert.equal(failed.truncated, false)
  const faulted = new kern.ExecutionResult({
    stdout: '',
    stderr: '',
    exitCode: 0,
    durationMs: 1,
    fault: { type: 'timeout', message: 'x' },
  })
  assert.equal(faulted.success, false)
})

test('SandboxError and MountRefused are real Error subclasses with names', () => {
  const e = new kern.SandboxError('x')
  assert.ok(e instanceof Error)
  assert.equal(e.name, 'SandboxError')
  assert.equal(e.message, 'x')
  const m = new kern.MountRefused('y')
  assert.ok(m instanceof kern.SandboxError)
  assert.ok(m instanceof Error)
  assert.equal(m.name, 'MountRefused')
})

test('errors from native code are SandboxError / MountRefused instances with the right name', async (t) => {
  // constructor (native validation)
  assert.throws(
    () => new kern.Sandbox({ profiles: ['--net'] }),
    (e) => e instanceof kern.SandboxError && e.name === 'SandboxError',
  )
  assert.throws(
    () => new kern.Sandbox({ mounts: { '/etc': '/x' } }),
    (e) => e instanceof kern.MountRefused && e instanceof kern.SandboxError && e.name === 'MountRefused',
  )
  // async method (native I/O refusal)
  const sbx = await openSandbox(t)
  await assert.rejects(sbx.readFile('../escape'), (e) => e instanceof kern.SandboxError && e.name === 'SandboxError')
  await assert.rejects(sbx.readFile('no-such-file'), (e) => e instanceof kern.SandboxError && e.name === 'SandboxError')
  // sync method (native)
  assert.throws(
    () => sbx.restore(path.join(tmpDir(), 'missing.tar.gz')),
    (e) => e instanceof kern.SandboxError,
  )
})

test('native errors carry a stable code', async (t) => {
  assert.throws(
    () => new kern.Sandbox({ mounts: { '/etc': '/x' } }),
    (e) => e.code === 'ERR_MOUNT_REFUSED',
  )
  assert.throws(
    () => new kern.Sandbox({ profiles: ['--net'] }),
    (e) => e.code === 'ERR_INVALID_OPTION',
  )
  const sbx = await openSandbox(t)
  await assert.rejects(sbx.readFile('../x'), (e) => e.code === 'ERR_PATH_ESCAPES')
  await assert.rejects(sbx.readFile('missing'), (e) => e.code === 'ERR_NOT_FOUND')
})

test('wrongly typed options are a SandboxError, not a raw napi error', () => {
  for (const opts of [
    { network: 'yes' },
    { egressAllow: 'a.example.org' },
    { profiles: 'vcpu:x' },
    { memoryMb: '512' },
    { env: 'A=1' },
    { trackFiles: 1 },
  ]) {
    assert.throws(
      () => new kern.Sandbox(opts),
      (e) => e instanceof kern.SandboxError,
      JSON.stringify(opts),
    )
  }
  assert.throws(
    () => new kern.Sandbox({ mounts: ['/tmp'] }),
    (e) => e instanceof kern.MountRefused,
  )
})

test('open() resolves to the sandbox itself', async () => {
  const sbx = new kern.Sandbox()
  const r = await sbx.open()
  try {
    assert.equal(r, sbx)
  } finally {
    await sbx.close()
  }
})

test('README quickstart: runCode("print(sum(range(100)))") -> "4950\\n", success', async () => {
  const r = await kern.runCode('print(sum(range(100)))')
  assert.ok(r instanceof kern.ExecutionResult)
  assert.equal(r.stdout, '4950\n')
  assert.equal(r.success, true)
  assert.equal(r.exitCode, 0)
  assert.equal(r.fault, null)
  assert.equal(typeof r.durationMs, 'number')
  assert.ok(Array.isArray(r.files))
  assert.equal(r.truncated, false)
})

test('a result object has the same fields, in the same order, with or without the shaper lib/native.js hands the addon', async () => {
  // The addon alone (no lib/): results are made field by field; then with the shaper registered.
  const { runNode, lastJson } = require('./helpers')
  const r = await runNode(`
const b = require(REPO + '/binding.js')
;(async () => {
  const s = new b.NativeSandbox({})
  await s.open()
  const call = () => s.run(['sh', '-c', 'echo out; echo err >&2; echo x > made.txt; exit 3'], {})
  const plain = await call()
  b.shapeResults(
    ['stdout', 'stderr', 'exitCode', 'durationMs', 'fault', 'files', 'truncated', 'rich', 'executionCount'],
    (stdout, stderr, exitCode, durationMs, fault, files, truncated, rich, executionCount) =>
      ({ stdout, stderr, exitCode, durationMs, fault, files, truncated, rich, executionCount }),
  )
  const shaped = await call()
  let refused = null
  try { b.shapeResults(['stderr', 'stdout'], () => ({})) } catch (e) { refused = e.message }
  const afterRefusal = await call()
  await s.close()
  const keys = (o) => Object.keys(o).filter((k) => o[k] !== undefined)
  const same = (o) => ({ ...o, durationMs: typeof o.durationMs, files: o.files.map((f) => f.path + ':' + f.change) })
  console.log(JSON.stringify({ plain: keys(plain), shaped: keys(shaped), values: [same(plain), same(shaped), same(afterRefusal)], refused }))
})()
`)
  assert.equal(r.code, 0, r.stderr)
  const got = lastJson(r.stdout)
  // No fault and no execution count: absent (undefined), as napi-rs leaves a None field.
  const fields = ['stdout', 'stderr', 'exitCode', 'durationMs', 'files', 'truncated', 'rich']
  assert.deepEqual(got.plain, fields)
  assert.deepEqual(got.shaped, fields)
  assert.equal(got.values[0].stdout, 'out\n')
  assert.match(got.values[0].stderr, /^err\n/) // kern's notes may follow
  assert.equal(got.values[0].exitCode, 3)
  assert.equal(got.values[0].durationMs, 'number')
  assert.deepEqual(got.values[0].files, ['made.txt:created'])
  assert.deepEqual(got.values[1], { ...got.values[0], files: ['made.txt:modified'] })
  assert.deepEqual(got.values[2], got.values[1])
  assert.match(got.refused, /fields must be/)
})
