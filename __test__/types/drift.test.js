'use strict'
// Fails when the runtime and index.d.ts drift apart: an export, a class member, or a constructor
// option added on one side and not the other. index.d.ts is parsed with the TypeScript compiler
// API; the runtime is the package itself, loaded by name ("kern-sandbox", through its exports map).

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const ts = require('typescript')

const repo = path.resolve(__dirname, '..', '..')
const dtsPath = path.join(repo, 'index.d.ts')
const source = ts.createSourceFile(dtsPath, fs.readFileSync(dtsPath, 'utf8'), ts.ScriptTarget.Latest, true)
const runtime = require('kern-sandbox')

const { declaredValues, declaredInterface: declaredIn, runtimeMembers, show } = require('./dts.js')

const declared = declaredValues(source)
const declaredInterface = (name) => declaredIn(source, name)

test('every runtime export is declared, and every declared value exists at run time', () => {
  assert.deepEqual(
    Object.keys(runtime).sort(),
    [...declared.keys()].sort(),
    'exports of require("kern-sandbox") vs value declarations in index.d.ts',
  )
  for (const [name, d] of declared) {
    const v = runtime[name]
    if (d.kind === 'const') assert.notEqual(typeof v, 'function', `${name} is declared a const`)
    else if (d.kind === 'enum') assert.equal(typeof v, 'object', `${name} is declared an enum`)
    else assert.equal(typeof v, 'function', `${name} is declared a ${d.kind}`)
    if (d.kind === 'class')
      assert.ok(v.prototype && /^class\b/.test(Function.prototype.toString.call(v)), `${name} is declared a class`)
  }
})

test('the ESM entry exports the same names', async () => {
  const esm = await import('kern-sandbox')
  assert.deepEqual(
    Object.keys(esm)
      .filter((k) => k !== 'default')
      .sort(),
    Object.keys(runtime).sort(),
  )
  assert.equal(esm.default, runtime)
})

const SAMPLES = {
  ExecutionResult: () =>
    new runtime.ExecutionResult({
      stdout: '',
      stderr: '',
      exitCode: 0,
      durationMs: 0,
      fault: null,
      files: [],
      truncated: false,
    }),
  SandboxError: () => new runtime.SandboxError('x'),
  MountRefused: () => new runtime.MountRefused('x'),
  Result: () => new runtime.Result({ 'text/plain': 'x' }),
}
/** Runtime-only members that are deliberately not part of the public contract. */
const UNDECLARED_OK = {
  // Set by the constructor from Error; declared by lib.es5's Error.
  SandboxError: ['name', 'message', 'stack'],
  MountRefused: ['name', 'message', 'stack'],
}

for (const [name, d] of declared) {
  if (d.kind !== 'class') continue
  test(`class ${name}: declared members and runtime members match`, () => {
    const Class = runtime[name]
    const sample = SAMPLES[name] ? SAMPLES[name]() : null
    const have = runtimeMembers(Class, sample)
    const proto = Class.prototype
    // Declared → exists (optional properties such as SandboxError.code may be absent on a sample).
    for (const [key, m] of d.members) {
      if (m.optional) continue
      const inherited = d.heritage && declared.get(d.heritage)?.members.has(key)
      assert.ok(have.has(key) || inherited, `${name}.${show(key)} is declared in index.d.ts but missing at run time`)
      if (m.kind === 'method') {
        assert.equal(typeof proto[key], 'function', `${name}.${show(key)} is declared a method`)
        assert.ok(
          proto[key].length <= m.params,
          `${name}.${show(key)} takes ${proto[key].length} required parameters at run time, index.d.ts declares ${m.params}`,
        )
      }
    }
    // Runtime → declared: every public method/accessor on the prototype (and field on a sample).
    const ok = new Set(UNDECLARED_OK[name] || [])
    for (const key of have) {
      if (typeof key === 'string' && (key.startsWith('_') || ok.has(key))) continue
      const inherited = d.heritage && declared.get(d.heritage)?.members.has(key)
      assert.ok(
        d.members.has(key) || inherited,
        `${name}.${show(key)} exists at run time but index.d.ts does not declare it`,
      )
    }
    // Statics
    const statics = Reflect.ownKeys(Class).filter((k) => !['length', 'name', 'prototype'].includes(k))
    assert.deepEqual(statics.map(show).sort(), [...d.statics.keys()].map(show).sort(), `static members of ${name}`)
  })
}

test('enums: the runtime objects have exactly the declared members and string values, frozen', () => {
  for (const [name, d] of declared) {
    if (d.kind !== 'enum') continue
    assert.deepEqual({ ...runtime[name] }, Object.fromEntries(d.members), `${name}: runtime vs index.d.ts`)
    assert.ok(Object.isFrozen(runtime[name]), `${name} is frozen`)
  }
})

test('functions: index.d.ts declares at least the parameters the runtime requires', () => {
  for (const [name, d] of declared) {
    if (d.kind !== 'function') continue
    assert.ok(
      runtime[name].length <= d.params,
      `${name} requires ${runtime[name].length} parameters at run time, index.d.ts declares ${d.params}`,
    )
  }
})

/** The JS surface's source: index.js and the files of lib/ it is made of. */
function jsSources() {
  const lib = path.join(repo, 'lib')
  const files = [
    path.join(repo, 'index.js'),
    ...fs
      .readdirSync(lib)
      .filter((f) => f.endsWith('.js'))
      .map((f) => path.join(lib, f)),
  ]
  return files.map((f) => fs.readFileSync(f, 'utf8')).join('\n')
}

test('SandboxOptions declares exactly the options the Sandbox constructor reads', () => {
  // index.js forwards the plain options listed (with their types) in OPTION_TYPES, and shapes
  // mounts, env and the two callbacks itself. Read that list from the source: it is the
  // runtime's own statement.
  const js = jsSources()
  const m = /const OPTION_TYPES = \{([^}]*)\}/.exec(js)
  assert.ok(
    m,
    'lib/options.js no longer has `const OPTION_TYPES = {...}`: update this test to read the option list from where it now lives',
  )
  const plain = [...m[1].matchAll(/(\w+):\s*'/g)].map((x) => x[1])
  const shaped = ['mounts', 'env', 'onStdout', 'onStderr', 'onRequest']
  for (const k of shaped) assert.ok(new RegExp(`opts\\.${k}\\b`).test(js), `index.js no longer reads opts.${k}`)
  assert.deepEqual(declaredInterface('SandboxOptions').sort(), [...plain, ...shaped].sort())
})

test('per-call options: what Sandbox#runCode/#run read is what PerCallOptions/RunCodeOptions declare', () => {
  assert.deepEqual(declaredInterface('PerCallOptions').sort(), ['onStderr', 'onStdout', 'signal', 'timeoutS'])
  assert.deepEqual(declaredInterface('RunCodeOptions').sort(), ['language', 'onResult'])
  assert.deepEqual(declaredInterface('CellOptions').sort(), ['onResult', 'onStderr', 'onStdout', 'signal', 'timeoutS'])
  assert.deepEqual(declaredInterface('KernelOptions').sort(), ['image', 'language', 'timeoutS'])
  const js = jsSources()
  for (const k of ['signal', 'onStdout', 'onStderr', 'onResult', 'timeoutS', 'language']) {
    assert.ok(new RegExp(`opts\\.${k}\\b`).test(js), `index.js no longer reads opts.${k}: update PerCallOptions`)
  }
})
