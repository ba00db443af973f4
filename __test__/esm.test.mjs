// ESM entry: named and default imports, the same objects as the CommonJS entry.
import test from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import kernDefault, {
  Sandbox,
  withSandbox,
  runCode,
  ExecutionResult,
  SandboxError,
  MountRefused,
  version,
} from '../index.mjs'

const require = createRequire(import.meta.url)
require('./helpers.js') // sets KERN_BIN
const cjs = require('../index.js')

test('ESM named imports exist and are the CommonJS objects', () => {
  assert.equal(version, '0.2.0')
  assert.equal(Sandbox, cjs.Sandbox)
  assert.equal(withSandbox, cjs.withSandbox)
  assert.equal(runCode, cjs.runCode)
  assert.equal(ExecutionResult, cjs.ExecutionResult)
  assert.equal(SandboxError, cjs.SandboxError)
  assert.equal(MountRefused, cjs.MountRefused)
})

test('ESM default import is the module object', () => {
  assert.equal(kernDefault.Sandbox, Sandbox)
  assert.equal(kernDefault.version, '0.2.0')
})

test('instanceof holds across the ESM and CommonJS entries', () => {
  assert.throws(
    () => new Sandbox({ mounts: { '/etc': '/x' } }),
    (e) => e instanceof cjs.MountRefused && e instanceof SandboxError,
  )
})

test('ESM runCode runs the README example', async () => {
  const r = await runCode('print(sum(range(100)))')
  assert.equal(r.stdout, '4950\n')
  assert.equal(r.success, true)
})

test('the package resolves by its own name through its exports map (import and require)', async () => {
  const viaImport = await import('kern-sandbox')
  assert.equal(viaImport.Sandbox, cjs.Sandbox)
  assert.equal(viaImport.default.version, '0.2.0')
  assert.equal(require('kern-sandbox'), cjs)
  assert.equal(require('kern-sandbox/package.json').version, '0.2.0')
})

test("kern-sandbox/e2b: the ESM entry's named and default exports are the CommonJS objects, and run a cell", async () => {
  const esm = await import('kern-sandbox/e2b')
  const e2bCjs = require('kern-sandbox/e2b')
  assert.equal(require.resolve('kern-sandbox/e2b'), require.resolve('../lib/e2b/entry.js'))
  assert.equal(esm.default, e2bCjs)
  for (const k of Object.keys(e2bCjs)) assert.equal(esm[k], e2bCjs[k], k)
  const { Sandbox, TimeoutError, SandboxError } = esm
  assert.ok(new TimeoutError('x') instanceof e2bCjs.SandboxError && new TimeoutError('y') instanceof SandboxError)
  const sbx = await Sandbox.create()
  try {
    const ex = await sbx.runCode('6 * 7')
    assert.equal(ex.text, '42')
    assert.ok(ex instanceof e2bCjs.Execution)
  } finally {
    await sbx.kill()
  }
})
