'use strict'
// Fails when kern-sandbox/e2b's runtime and lib/e2b/entry.d.ts drift apart: an export, a class
// member (static ones included), or a method of sandbox.files / sandbox.commands added on one side
// only.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const ts = require('typescript')
require('../helpers.js') // KERN_BIN, for a sample Sandbox
const { declaredValues, declaredInterface, runtimeMembers, show } = require('./dts.js')

const dtsPath = path.resolve(__dirname, '..', '..', 'lib', 'e2b', 'entry.d.ts')
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
        `${name}.${show(key)} exists at run time but lib/e2b/entry.d.ts does not declare it`,
      )
    }
    const statics = Reflect.ownKeys(Class).filter((k) => !['length', 'name', 'prototype'].includes(k))
    assert.deepEqual(statics.map(show).sort(), [...d.statics.keys()].map(show).sort(), `static members of ${name}`)
  })
}

test('sandbox.files, sandbox.commands and sandbox.git have exactly the declared methods', () => {
  for (const [iface, obj] of [
    ['Filesystem', sbx.files],
    ['Commands', sbx.commands],
    ['Git', sbx.git],
  ]) {
    const methods = Reflect.ownKeys(Object.getPrototypeOf(obj)).filter((k) => k !== 'constructor')
    assert.deepEqual(methods.sort(), [...new Set(declaredInterface(source, iface))].sort(), iface)
  }
})

test('enums: the declared values are the runtime ones', () => {
  for (const [name, d] of declared) {
    if (d.kind !== 'enum') continue
    assert.deepEqual({ ...runtime[name] }, Object.fromEntries(d.members), name)
    assert.ok(Object.isFrozen(runtime[name]), `${name} is frozen`)
  }
})

test('sandbox.pty, a CommandHandle, a WatchHandle and Sandbox.list() have exactly the declared members', async () => {
  const h = await sbx.commands.run('true', { background: true })
  await h.wait()
  await sbx.files.makeDir('/tmp/drift')
  const w = await sbx.files.watchDir('/tmp/drift', () => {})
  await w.stop()
  for (const [iface, obj] of [
    ['Pty', sbx.pty],
    ['CommandHandle', h],
    ['WatchHandle', w],
    ['SandboxPaginator', runtime.Sandbox.list()],
  ]) {
    const members = Reflect.ownKeys(Object.getPrototypeOf(obj)).filter((k) => k !== 'constructor')
    assert.deepEqual(members.sort(), [...new Set(declaredInterface(source, iface))].sort(), iface)
  }
})

// E2B's own declarations (the `e2b` package, a dev dependency): each public member of its Sandbox
// and of its files, commands, pty, git and handles is here, or listed below as not provided (and said so
// in docs/e2b.md). A member E2B adds fails this test until it is implemented or listed.
const E2B_NOT_HERE = {
  Sandbox: ['trafficAccessToken', 'getMcpUrl', 'getMcpToken', 'uploadUrl', 'downloadUrl'],
  Commands: ['supportsStdinClose'],
}

/** The public instance members E2B's .d.ts declares for `declare class name`. */
function e2bMembers(e2bSource, name) {
  const decl = e2bSource.statements.find((s) => ts.isClassDeclaration(s) && s.name?.text === name)
  assert.ok(decl, `e2b declares class ${name}`)
  const hidden = ts.ModifierFlags.Private | ts.ModifierFlags.Protected | ts.ModifierFlags.Static
  return decl.members
    .filter((m) => m.name && !ts.isConstructorDeclaration(m) && !(ts.getCombinedModifierFlags(m) & hidden))
    .filter((m) => !/@(hidden|internal)/.test(m.getFullText()))
    .map((m) => m.name.getText())
}

test("E2B's declared API: every public member of its Sandbox, files, commands, pty, git and handles is here or listed as not provided", async () => {
  const e2bPath = require.resolve('e2b').replace(/index\.js$/, 'index.d.ts')
  const e2bSource = ts.createSourceFile(e2bPath, fs.readFileSync(e2bPath, 'utf8'), ts.ScriptTarget.Latest, true)
  const h = await sbx.commands.run('true', { background: true })
  await h.wait()
  const ours = {
    Sandbox: sbx,
    Filesystem: sbx.files,
    Commands: sbx.commands,
    Pty: sbx.pty,
    CommandHandle: h,
    Git: sbx.git,
  }
  for (const [name, obj] of Object.entries(ours)) {
    const missing = e2bMembers(e2bSource, name).filter((k) => !(k in obj) && !(E2B_NOT_HERE[name] ?? []).includes(k))
    assert.deepEqual(missing, [], `E2B's ${name} members missing here`)
    for (const k of E2B_NOT_HERE[name] ?? []) assert.ok(!(k in obj), `${name}.${k} exists now: take it off the list`)
  }
  const statics = [
    'create',
    'connect',
    'kill',
    'list',
    'fork',
    'updateNetwork',
    'pause',
    'betaPause',
    'createSnapshot',
    'listSnapshots',
    'deleteSnapshot',
    'getInfo',
  ]
  for (const k of statics) assert.equal(typeof runtime.Sandbox[k], 'function', `Sandbox.${k}`)
})
