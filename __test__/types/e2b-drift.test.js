'use strict'
// Fails when kern-sandbox/e2b's runtime and e2b.d.ts drift apart: an export, a class member (static
// ones included), or a method of sandbox.files / sandbox.commands added on one side only.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const ts = require('typescript')
require('../helpers.js') // KERN_BIN, for a sample Sandbox
const { declaredValues, declaredInterface, runtimeMembers, show } = require('./dts.js')

const dtsPath = path.resolve(__dirname, '..', '..', 'e2b.d.ts')
const source = ts.createSourceFile(dtsPath, fs.readFileSync(dtsPath, 'utf8'), ts.ScriptTarget.Latest, true)
const runtime = require('kern-sandbox/e2b')
const declared = declaredValues(source)

let sbx
test.before(async () => {
  sbx = await runtime.Sandbox.create()
})
test.after(async () => {
  await sbx.kill()
})

test('every export of kern-sandbox/e2b is declared, and every declared value exists', async () => {
  assert.deepEqual(Object.keys(runtime).sort(), [...declared.keys()].sort())
  for (const [name, d] of declared) {
    if (d.kind === 'reexport') assert.equal(runtime[name], require('kern-sandbox')[name], `${name} is the main entry's`)
  }
  const esm = await import('kern-sandbox/e2b')
  assert.deepEqual(
    Object.keys(esm)
      .filter((k) => k !== 'default')
      .sort(),
    Object.keys(runtime).sort(),
  )
  assert.equal(esm.default, runtime)
})

const SAMPLES = {
  Sandbox: () => sbx,
  Execution: () => new runtime.Execution(),
  Result: () => new runtime.Result({ text: 'x' }, true),
  ExecutionError: () => new runtime.ExecutionError('E', 'v', 't'),
  OutputMessage: () => new runtime.OutputMessage('l\n', 0, false),
  CommandExitError: () => new runtime.CommandExitError({ stdout: '', stderr: '', exitCode: 1, error: 'exit status 1' }),
}
const FROM_ERROR = ['name', 'message', 'stack']

for (const [name, d] of declared) {
  if (d.kind !== 'class') continue
  test(`class ${name}: declared and runtime members match`, () => {
    const Class = runtime[name]
    const have = runtimeMembers(Class, SAMPLES[name] ? SAMPLES[name]() : null)
    const inherited = (key) => d.heritage && declared.get(d.heritage)?.members.has(key)
    for (const [key, m] of d.members) {
      if (!m.optional)
        assert.ok(have.has(key) || inherited(key), `${name}.${show(key)} is declared but missing at run time`)
    }
    for (const key of have) {
      if (typeof key === 'string' && (key.startsWith('_') || FROM_ERROR.includes(key))) continue
      assert.ok(
        d.members.has(key) || inherited(key),
        `${name}.${show(key)} exists at run time but e2b.d.ts does not declare it`,
      )
    }
    const statics = Reflect.ownKeys(Class).filter((k) => !['length', 'name', 'prototype'].includes(k))
    assert.deepEqual(statics.map(show).sort(), [...d.statics.keys()].map(show).sort(), `static members of ${name}`)
  })
}

test('sandbox.files and sandbox.commands have exactly the declared methods', () => {
  for (const [iface, obj] of [
    ['Filesystem', sbx.files],
    ['Commands', sbx.commands],
  ]) {
    const methods = Reflect.ownKeys(Object.getPrototypeOf(obj)).filter((k) => k !== 'constructor')
    assert.deepEqual(methods.sort(), [...new Set(declaredInterface(source, iface))].sort(), iface)
  }
})
