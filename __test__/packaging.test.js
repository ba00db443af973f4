'use strict'
// Packaging (issue 4): the platform packages napi-rs v3 expects, the exports map (CJS, ESM and
// their types), what `npm pack` ships, and the loader's single clear error when no binary fits or
// the OS is not Linux. Fast: no build, no install (install.test.js does the install).

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const cp = require('node:child_process')
const { repo, pkg, targets, hostTarget } = require('../scripts/targets.js')
const { optionalDependencies } = require('../scripts/pack.js')

const host = hostTarget()
const made = []
process.on('exit', () => {
  for (const d of made) fs.rmSync(d, { recursive: true, force: true })
})
function tmp(prefix) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  made.push(d)
  return d
}

/** Runs `source` in a fresh node (CommonJS, or ESM with `esm`), cwd `cwd`; no loader override. */
function node(source, { cwd = repo, esm = false } = {}) {
  const env = { ...process.env }
  delete env.NAPI_RS_NATIVE_LIBRARY_PATH
  delete env.NAPI_RS_FORCE_WASI
  const args = esm ? ['--input-type=module', '-e', source] : ['-e', source]
  return cp.spawnSync(process.execPath, args, { cwd, env, encoding: 'utf8', timeout: 60_000 })
}

/** What a child's `require` (or, with `esm`, static `import`) of `entry` threw, or null if it
 * loaded. For ESM, the message the failed process printed. */
function loadError(entry, { before = '', esm = false } = {}) {
  if (esm) {
    // A static import: the failure is the process's, as in an ESM program importing the package.
    const r = node(`${before}; await import(${JSON.stringify(entry)}); console.log('LOADED')`, { esm: true })
    if (r.status === 0) return null
    assert.doesNotMatch(r.stdout, /LOADED/)
    // The thrown error's message: from "Error: " to its first stack frame (its causes follow).
    const m = /^Error: ([\s\S]*?)\n {4}at /m.exec(r.stderr)
    assert.ok(m, `no error message in:\n${r.stderr}`)
    return m[1]
  }
  const r = node(
    `${before}; try { require(${JSON.stringify(entry)}); console.log('LOADED') } catch (e) { console.log(JSON.stringify({ message: e.message })) }`,
  )
  assert.equal(r.status, 0, r.stderr)
  const out = r.stdout.trim()
  return out === 'LOADED' ? null : JSON.parse(out).message
}

/** A copy of the package (entries, manifest, generated loader) with no addon next to it and no
 * node_modules above it: what an install without the platform package looks like. */
function packageWithoutBinary() {
  const dir = tmp('kern-nobin-')
  for (const f of ['index.js', 'index.mjs', 'package.json', 'binding.js'])
    fs.copyFileSync(path.join(repo, f), path.join(dir, f))
  fs.cpSync(path.join(repo, 'lib'), path.join(dir, 'lib'), { recursive: true })
  return dir
}

test('napi config: the four Linux targets', () => {
  assert.deepEqual([...pkg.napi.targets].sort(), [
    'aarch64-unknown-linux-gnu',
    'aarch64-unknown-linux-musl',
    'x86_64-unknown-linux-gnu',
    'x86_64-unknown-linux-musl',
  ])
  assert.equal(pkg.napi.binaryName, 'kern-sandbox')
})

test('npm/<platform>/ holds one package per target, named and fielded as napi-rs v3 generates', () => {
  assert.deepEqual(fs.readdirSync(path.join(repo, 'npm')).sort(), targets.map((t) => t.platformArchABI).sort())
  for (const t of targets) {
    const m = JSON.parse(fs.readFileSync(path.join(t.npmDir, 'package.json'), 'utf8'))
    assert.equal(m.name, t.packageName)
    assert.equal(m.version, pkg.version, `${m.name} must be at exactly the main version`)
    assert.deepEqual(m.os, ['linux'])
    assert.deepEqual(m.cpu, [t.arch])
    assert.deepEqual(m.libc, [t.libc])
    assert.equal(m.main, t.nodeFile)
    // The machine agent and the egress proxy ship next to the addon (scripts/pack.js,
    // scripts/build-agent.js, scripts/build-egress.js).
    assert.deepEqual(m.files, [t.nodeFile, 'kern-sandbox-agent', 'kern-sandbox-egress'])
    assert.equal(m.license, pkg.license)
    assert.deepEqual(m.engines, pkg.engines)
    assert.ok(!m.dependencies && !m.scripts, `${m.name} must be inert: no dependencies, no install scripts`)
    assert.ok(fs.existsSync(path.join(t.npmDir, 'README.md')))
  }
})

test(
  'the generated loader asks for exactly these package and file names',
  { skip: !fs.existsSync(path.join(repo, 'binding.js')) && 'binding.js not generated (npm run build)' },
  () => {
    const loader = fs.readFileSync(path.join(repo, 'binding.js'), 'utf8')
    for (const t of targets) {
      assert.ok(loader.includes(`require('./${t.nodeFile}')`), `binding.js does not load ./${t.nodeFile}`)
      assert.ok(loader.includes(`require('${t.packageName}')`), `binding.js does not load ${t.packageName}`)
    }
    assert.ok(
      loader.includes(`expected ${pkg.version} but got`),
      'binding.js was generated for another version: rebuild',
    )
  },
)

test('the published main package lists every platform package at exactly its version', () => {
  const opt = optionalDependencies()
  assert.deepEqual(Object.keys(opt).sort(), targets.map((t) => t.packageName).sort())
  for (const v of Object.values(opt)) assert.equal(v, pkg.version)
  // The repo's own manifest may carry them too (scripts/pack.js explains why it does not), but then
  // exactly so.
  if (pkg.optionalDependencies) assert.deepEqual(pkg.optionalDependencies, opt)
  // JavaScript/TypeScript cells are prepared on the host with acorn and amaro: the only runtime
  // dependencies, and themselves dependency-free, so an install pulls in nothing else.
  assert.deepEqual(Object.keys(pkg.dependencies || {}).sort(), ['acorn', 'amaro'])
  for (const name of Object.keys(pkg.dependencies)) {
    const dep = JSON.parse(fs.readFileSync(path.join(repo, 'node_modules', name, 'package.json'), 'utf8'))
    assert.ok(!dep.dependencies || Object.keys(dep.dependencies).length === 0, `${name} has dependencies of its own`)
  }
  // The framework entries (kern-sandbox/ai, ...) name their frameworks as peers, every one optional:
  // an install of kern-sandbox alone pulls none of them in.
  for (const name of Object.keys(pkg.peerDependencies || {})) {
    assert.deepEqual(pkg.peerDependenciesMeta?.[name], { optional: true }, `peer ${name} must be optional`)
  }
})

test('exports map: require and import each with their own types, listed first', () => {
  const dot = pkg.exports['.']
  assert.deepEqual(Object.keys(dot), ['import', 'require'])
  assert.deepEqual(dot.import, { types: './index.d.mts', default: './index.mjs' })
  assert.deepEqual(dot.require, { types: './index.d.ts', default: './index.js' })
  // TypeScript takes the first matching condition: "types" must precede "default".
  assert.equal(Object.keys(dot.import)[0], 'types')
  assert.equal(Object.keys(dot.require)[0], 'types')
  assert.equal(pkg.main, 'index.js')
  assert.equal(pkg.types, 'index.d.ts', 'moduleResolution node10 reads the top-level "types"')
  for (const f of ['index.js', 'index.mjs', 'index.d.ts', 'index.d.mts']) {
    assert.ok(fs.existsSync(path.join(repo, f)), `${f} missing`)
    assert.ok(pkg.files.includes(f), `${f} not in package.json files`)
  }
  assert.ok(pkg.files.includes('binding.js'), 'the generated loader must be published')
})

// The subpath entries live in their own folders (lib/<name>/entry.*); the root keeps napi-rs's
// index.* and the generated loader only.
const SUBPATHS = ['e2b', 'ai', 'openai-agents', 'mastra', 'langchain']

test('exports map: each subpath points into lib/<name>/, and typesVersions gives node10 the same .d.ts', () => {
  assert.deepEqual(Object.keys(pkg.exports), ['.', ...SUBPATHS.map((s) => `./${s}`), './package.json'])
  assert.equal(pkg.exports['./package.json'], './package.json')
  for (const s of SUBPATHS) {
    const e = pkg.exports[`./${s}`]
    assert.deepEqual(Object.keys(e), ['import', 'require'])
    assert.deepEqual(e.import, { types: `./lib/${s}/entry.d.mts`, default: `./lib/${s}/entry.mjs` })
    assert.deepEqual(e.require, { types: `./lib/${s}/entry.d.ts`, default: `./lib/${s}/entry.js` })
    for (const f of [e.import.types, e.import.default, e.require.types, e.require.default])
      assert.ok(fs.existsSync(path.join(repo, f)), `${f} missing`)
    // node10 ignores "exports"; typesVersions sends kern-sandbox/<name> to the "require" types.
    assert.deepEqual(pkg.typesVersions['*'][s], [e.require.types.slice(2)])
  }
  assert.deepEqual(Object.keys(pkg.typesVersions), ['*'])
  assert.deepEqual(Object.keys(pkg.typesVersions['*']), SUBPATHS)
  assert.ok(pkg.files.includes('lib/'), 'lib/ (and with it the subpath entries) must be published')
  const rootEntries = fs.readdirSync(repo).filter((f) => /\.(js|mjs|d\.ts|d\.mts)$/.test(f))
  assert.deepEqual(
    rootEntries.filter((f) => !/^(index|binding)\./.test(f)),
    [],
    'only index.* and the generated binding.* belong at the root',
  )
})

test('every subpath resolves by the package name: require to lib/<name>/entry.js, import to entry.mjs', () => {
  // Resolution only, so no framework is loaded.
  const r = node(
    `const require = (await import('node:module')).createRequire(${JSON.stringify(path.join(repo, 'index.js'))})
    console.log(JSON.stringify(${JSON.stringify(SUBPATHS)}.map((s) => [require.resolve('kern-sandbox/' + s), import.meta.resolve('kern-sandbox/' + s)])))`,
    { esm: true },
  )
  assert.equal(r.status, 0, r.stderr)
  assert.deepEqual(
    JSON.parse(r.stdout),
    SUBPATHS.map((s) => [path.join(repo, 'lib', s, 'entry.js'), `file://${path.join(repo, 'lib', s, 'entry.mjs')}`]),
  )
})

test('npm pack ships the entries, both type files and the loader, and no addon or source', () => {
  const r = cp.spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: repo, encoding: 'utf8' })
  assert.equal(r.status, 0, r.stderr)
  const files = JSON.parse(r.stdout)[0].files.map((f) => f.path)
  for (const f of ['package.json', 'index.js', 'index.mjs', 'index.d.ts', 'index.d.mts'])
    assert.ok(files.includes(f), `${f} not packed`)
  for (const s of SUBPATHS)
    for (const f of ['entry.js', 'entry.mjs', 'entry.d.ts', 'entry.d.mts'])
      assert.ok(files.includes(`lib/${s}/${f}`), `lib/${s}/${f} not packed`)
  if (fs.existsSync(path.join(repo, 'binding.js'))) assert.ok(files.includes('binding.js'), 'binding.js not packed')
  assert.deepEqual(
    files.filter((f) => f.endsWith('.node') || /^(src|__test__|npm|scripts|target)\//.test(f)),
    [],
  )
})

test('"kern-sandbox" resolves through the exports map: require to index.js, import to index.mjs', () => {
  const r = node(`
    const k = require('kern-sandbox')
    import('kern-sandbox').then((m) => console.log(JSON.stringify({
      cjs: require.resolve('kern-sandbox'),
      sameObjects: m.default === k && m.runCode === k.runCode && m.Sandbox === k.Sandbox,
      named: Object.keys(m).filter((n) => n !== 'default').sort(),
    })))`)
  assert.equal(r.status, 0, r.stderr)
  const out = JSON.parse(r.stdout)
  assert.equal(out.cjs, path.join(repo, 'index.js'))
  assert.equal(out.sameObjects, true)
  assert.deepEqual(out.named, Object.keys(require(repo)).sort())
  const esm = node("console.log(import.meta.resolve('kern-sandbox'))", { esm: true })
  assert.equal(esm.status, 0, esm.stderr)
  assert.equal(esm.stdout.trim(), `file://${path.join(repo, 'index.mjs')}`)
})

for (const platform of ['darwin', 'win32', 'freebsd']) {
  test(`an unsupported OS (${platform}) fails at require and import time, saying so`, () => {
    const before = `Object.defineProperty(process, 'platform', { value: ${JSON.stringify(platform)} })`
    for (const esm of [false, true]) {
      const msg = loadError(path.join(repo, esm ? 'index.mjs' : 'index.js'), { before, esm })
      assert.ok(msg, `${esm ? 'import' : 'require'} succeeded on ${platform}`)
      assert.match(msg, /runs on Linux only/)
      assert.ok(msg.includes(`this is ${platform}-${process.arch}`), msg)
      assert.match(msg, /WSL2/)
    }
  })
}

test(
  'no binary for this platform: one error naming it, each place tried, and the fix',
  { skip: !host && 'no release target for this host' },
  () => {
    const dir = packageWithoutBinary()
    for (const esm of [false, true]) {
      const msg = loadError(path.join(dir, esm ? 'index.mjs' : 'index.js'), { esm })
      assert.ok(msg, 'loaded without any binary?')
      assert.ok(msg.startsWith(`kern-sandbox: no native binary loads on linux-${process.arch} (`), msg)
      assert.ok(msg.includes(`./${host.nodeFile}`), `the local file tried is not named:\n${msg}`)
      assert.ok(msg.includes(`'${host.packageName}'`), `the platform package tried is not named:\n${msg}`)
      assert.ok(msg.includes(`optional dependency ${host.packageName}@${pkg.version}`), msg)
      assert.match(msg, /--omit=optional/)
      assert.match(msg, /npm run build/)
      assert.doesNotMatch(msg, /wasi|wasm32|@kern-sandbox\//i, 'names packages this project does not ship')
      // local first, then the package: the order the loader tries them
      assert.ok(msg.indexOf(host.nodeFile) < msg.indexOf(`'${host.packageName}'`), msg)
    }
  },
)

test(
  'a broken binary: the error carries the loader failure for that file',
  { skip: !host && 'no release target for this host' },
  () => {
    const dir = packageWithoutBinary()
    fs.writeFileSync(path.join(dir, host.nodeFile), 'not an ELF file')
    const msg = loadError(path.join(dir, 'index.js'))
    assert.ok(msg)
    assert.ok(msg.includes(`${path.join(dir, host.nodeFile)}: `), `the dlopen failure is not shown:\n${msg}`)
    assert.match(msg, /no native binary loads/)
  },
)

test('an architecture with no prebuilt binary: the error says which ones exist', () => {
  const dir = packageWithoutBinary()
  const msg = loadError(path.join(dir, 'index.js'), {
    before: "Object.defineProperty(process, 'arch', { value: 'ia32' })",
  })
  assert.ok(msg)
  assert.match(msg, /no native binary loads on linux-ia32/)
  assert.match(msg, /Unsupported architecture on Linux: ia32/)
  assert.match(msg, /Linux x64 and arm64/)
  assert.match(msg, /npm run build/)
})
