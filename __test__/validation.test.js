'use strict'
// Constructor validation: synchronous throws of the right class, as the reference does.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { kern, tmpDir, runNode, lastJson } = require('./helpers')

const { Sandbox, SandboxError, MountRefused } = kern

function throwsSandboxError(opts, what) {
  assert.throws(
    () => new Sandbox(opts),
    (e) => e instanceof SandboxError && !(e instanceof MountRefused) && e.name === 'SandboxError',
    what || JSON.stringify(opts),
  )
}

function throwsMountRefused(opts, what) {
  assert.throws(
    () => new Sandbox(opts),
    (e) => e instanceof MountRefused && e instanceof SandboxError && e.name === 'MountRefused',
    what || JSON.stringify(opts),
  )
}

test('defaults construct without throwing and without side effects', () => {
  const s = new Sandbox()
  assert.equal(s.image, 'python:3.12-slim')
  assert.equal(s.timeoutS, 30)
  assert.equal(s.memoryMb, 512)
  assert.equal(s.pids, 256)
  assert.equal(s.network, false)
  new Sandbox({})
  new Sandbox(undefined)
})

test('timeoutS must be a positive number', () => {
  for (const t of [0, -1, NaN, 'x', '5']) throwsSandboxError({ timeoutS: t }, `timeoutS ${String(t)}`)
  new Sandbox({ timeoutS: 0.5 })
  new Sandbox({ timeoutS: 120 })
})

test('maxOutputBytes must be positive', () => {
  for (const n of [0, -1]) throwsSandboxError({ maxOutputBytes: n }, `maxOutputBytes ${n}`)
  new Sandbox({ maxOutputBytes: 1 })
})

test('mounts: sensitive host sources are refused', () => {
  for (const src of ['/', '/etc', '/root', '/proc', '/sys', '/dev']) {
    throwsMountRefused({ mounts: { [src]: '/data' } }, `source ${src}`)
    throwsMountRefused({ mounts: { [src]: ['/data', 'ro'] } }, `source ${src} ro`)
  }
})

test('mounts: a symlink to /etc is refused after realpath', () => {
  const d = tmpDir()
  const link = path.join(d, 'innocent')
  fs.symlinkSync('/etc', link)
  throwsMountRefused({ mounts: { [link]: '/data' } })
  const link2 = path.join(d, 'rootlink')
  fs.symlinkSync('/', link2)
  throwsMountRefused({ mounts: { [link2 + '/']: '/data' } })
})

test('mounts: $HOME is refused (resolved via realpath)', async () => {
  const home = tmpDir('kst-home-')
  const alias = path.join(tmpDir(), 'home-alias')
  fs.symlinkSync(home, alias)
  const r = await runNode(
    `
const kern = require(REPO)
const out = {}
for (const [k, src] of Object.entries({ direct: process.env.HOME, alias: ${JSON.stringify(alias)} })) {
  try { new kern.Sandbox({ mounts: { [src]: '/data' } }); out[k] = 'ok' }
  catch (e) { out[k] = e.name + ':' + (e instanceof kern.MountRefused) }
}
console.log(JSON.stringify(out))
`,
    { env: { HOME: home } },
  )
  assert.equal(r.code, 0, r.stderr)
  assert.deepEqual(lastJson(r.stdout), { direct: 'MountRefused:true', alias: 'MountRefused:true' })
})

test('mounts: relative / missing sources and bad targets are refused', () => {
  const d = tmpDir()
  throwsMountRefused({ mounts: { 'relative/dir': '/data' } }, 'relative source')
  throwsMountRefused({ mounts: { [path.join(d, 'does-not-exist')]: '/data' } }, 'missing source')
  throwsMountRefused({ mounts: { [d]: 'data' } }, 'relative target')
  throwsMountRefused({ mounts: { [d]: '/data/../etc' } }, 'target with ..')
  throwsMountRefused({ mounts: { [d]: '/..' } }, 'target /..')
  for (const t of ['/', '/proc', '/proc/', '/sys', '/dev', '//proc', '/./dev']) {
    throwsMountRefused({ mounts: { [d]: t } }, `target ${t}`)
  }
})

test('mounts: mode must be ro or rw', () => {
  const d = tmpDir()
  for (const mode of ['rx', 'RO', '', undefined, 'ro,exec']) {
    throwsMountRefused({ mounts: { [d]: ['/data', mode] } }, `mode ${String(mode)}`)
  }
  new Sandbox({ mounts: { [d]: ['/data', 'ro'] } })
  new Sandbox({ mounts: { [d]: ['/data', 'rw'] } })
  new Sandbox({ mounts: { [d]: '/data' } })
})

test('profiles: valid tokens pass, anything that could smuggle a flag is refused', () => {
  new Sandbox({ profiles: ['vcpu:heavy'] })
  new Sandbox({ profiles: ['vcpu:heavy', 'vgpio:leds', 'vdisk:scratch'] })
  for (const bad of [
    '--net',
    'vgpu:x',
    'vcpu:a b',
    'vcpu:',
    'vcpu:-x',
    '-v /etc:/etc',
    'vcpu:a=b',
    'vcpu:a/b',
    ' vcpu:a',
  ]) {
    throwsSandboxError({ profiles: [bad] }, `profile ${JSON.stringify(bad)}`)
  }
})

test('egressAllow: bare FQDNs only', () => {
  new Sandbox({ egressAllow: ['pkgs.example.org', 'files.example.net'] })
  for (const bad of [
    'localhost',
    'http://x.org',
    'x.org:443',
    '*.x.org',
    'a.org,b.org',
    'x.org/path',
    'x .org',
    '-x.org',
    'x.o',
  ]) {
    throwsSandboxError({ egressAllow: [bad] }, `domain ${JSON.stringify(bad)}`)
  }
})

test('egressAllow with network:true is refused', () => {
  throwsSandboxError({ egressAllow: ['pkgs.example.org'], network: true })
  new Sandbox({ egressAllow: ['pkgs.example.org'], network: false })
})

test('kern missing: KERN_BIN not executable, or no kern on PATH -> SandboxError', async () => {
  const d = tmpDir()
  const notExec = path.join(d, 'kern')
  fs.writeFileSync(notExec, '#!/bin/sh\nexit 0\n', { mode: 0o644 })
  const emptyPathDir = tmpDir()
  const script = `
const kern = require(REPO)
try { new kern.Sandbox(); console.log(JSON.stringify({ threw: false })) }
catch (e) { console.log(JSON.stringify({ threw: true, name: e.name, isSE: e instanceof kern.SandboxError, msg: e.message })) }
`
  const cases = {
    notExecutable: { KERN_BIN: notExec },
    directory: { KERN_BIN: d },
    missingFile: { KERN_BIN: path.join(d, 'nope') },
    noKernOnPath: { KERN_BIN: undefined, PATH: `${emptyPathDir}:/nonexistent` },
  }
  for (const [name, env] of Object.entries(cases)) {
    const r = await runNode(script, { env })
    assert.equal(r.code, 0, `${name}: ${r.stderr}`)
    const j = lastJson(r.stdout)
    assert.equal(j.threw, true, `${name}: constructor should throw`)
    assert.equal(j.name, 'SandboxError', name)
    assert.equal(j.isSE, true, name)
  }
})

test('kern found on PATH when KERN_BIN is unset', async () => {
  const d = tmpDir()
  fs.symlinkSync(process.env.KERN_BIN, path.join(d, 'kern'))
  const r = await runNode(`const kern = require(REPO); new kern.Sandbox(); console.log(JSON.stringify({ ok: true }))`, {
    env: { KERN_BIN: undefined, PATH: `${d}:/usr/bin:/bin` },
  })
  assert.equal(r.code, 0, r.stderr)
  assert.deepEqual(lastJson(r.stdout), { ok: true })
})

test('image: a value that could read as a flag or carries odd characters is refused', () => {
  new Sandbox({ image: 'python:3.12-slim' })
  new Sandbox({ image: 'registry.example.org:5000/team/img:tag' })
  new Sandbox({ image: 'alpine@sha256:' + 'a'.repeat(64) })
  for (const bad of ['--net', '-v', '', 'a b', 'img\0x', 'img;rm']) {
    throwsSandboxError({ image: bad }, `image ${JSON.stringify(bad)}`)
  }
})

test('caps: memoryMb/pids/cpus must be positive numbers (or null)', () => {
  for (const [k, v] of [
    ['memoryMb', 0],
    ['memoryMb', -1],
    ['memoryMb', NaN],
    ['memoryMb', 1.5],
    ['pids', 0],
    ['pids', 2.5],
    ['cpus', 0],
    ['cpus', -2],
    ['cpus', Infinity],
  ]) {
    throwsSandboxError({ [k]: v }, `${k} ${v}`)
  }
  new Sandbox({ memoryMb: null, pids: null, cpus: null })
  new Sandbox({ memoryMb: 64, pids: 16, cpus: 0.5 })
})

test('options must be an object', () => {
  assert.throws(() => new Sandbox('python'), SandboxError)
  assert.throws(() => new Sandbox(42), SandboxError)
})

test('capDrop: capabilities(7) names (with or without CAP_, any case) or ALL; anything else is refused naming it', () => {
  for (const ok of [['ALL'], ['all'], ['NET_RAW', 'cap_sys_admin'], ['CAP_NET_BIND_SERVICE', 'Checkpoint_Restore'], []])
    new Sandbox({ capDrop: ok })
  const forty = 'A'.repeat(40)
  for (const bad of [forty, 'NET_RAWR', 'CAP_', 'NET_RAW,SYS_ADMIN', 'ALL ']) {
    assert.throws(
      () => new Sandbox({ capDrop: ['NET_RAW', bad] }),
      (e) =>
        e instanceof SandboxError &&
        e.message.startsWith('invalid option capDrop:') &&
        e.message.includes(JSON.stringify(bad)),
      bad,
    )
  }
})

test('a list option with holes is refused like a wrong element, in JS terms, naming the option', () => {
  // every()/some() skip holes: a hole reached the napi conversion and came back in Rust terms.
  for (const opt of ['egressAllow', 'profiles', 'capDrop']) {
    const valid = { egressAllow: 'a.example.org', profiles: 'vcpu:heavy', capDrop: 'NET_RAW' }[opt]
    // eslint-disable-next-line no-sparse-arrays
    for (const v of [[, valid], [valid, , valid], new Array(3)]) {
      assert.throws(
        () => new Sandbox({ [opt]: v }),
        (e) =>
          e instanceof SandboxError &&
          e.message ===
            `invalid option ${opt}: expected an array of strings, got undefined at index ${v.indexOf(valid) === 0 ? 1 : 0}`,
        `${opt}: ${v.length} entries`,
      )
    }
  }
})

test('every option default lives natively; the Sandbox, the README and index.d.ts quote it', () => {
  const native = require('../binding.js').optionDefaults()
  const MiB = 1024 * 1024
  /** A quoted default: `"x"`, `512`, `["ALL"]`, `false`, or `64 MiB`. */
  const parse = (text) => {
    const mib = /^(\d+) MiB$/.exec(text)
    return mib ? Number(mib[1]) * MiB : JSON.parse(text.replace(/^`|`$/g, ''))
  }
  const s = new Sandbox()
  const readme = fs.readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8')
  const table = readme.slice(readme.indexOf('### Options'), readme.indexOf('Per-call options'))
  const rows = new Map([...table.matchAll(/^\| `(\w+)` \| ([^|]+) \|/gm)].map((m) => [m[1], m[2].trim()]))
  const dts = fs.readFileSync(path.join(__dirname, '..', 'index.d.ts'), 'utf8')
  const options = dts.slice(dts.indexOf('export interface SandboxOptions'), dts.indexOf('export type Language'))
  for (const [key, value] of Object.entries(native)) {
    if (key in s) assert.deepEqual(s[key], value, `Sandbox#${key}`)
    assert.ok(rows.has(key), `README options table has no row for ${key}`)
    assert.deepEqual(parse(rows.get(key)), value, `README default of ${key}`)
    const doc = new RegExp(`/\\*\\*((?:(?!\\*/)[\\s\\S])*)\\*/\\s*${key}\\?:`).exec(options)
    assert.ok(doc, `index.d.ts documents no ${key}`)
    const quoted = /@default (\S+)/.exec(doc[1].replace(/\s*\*\s*/g, ' '))
    assert.ok(quoted, `index.d.ts: the doc of ${key} has no @default tag`)
    assert.deepEqual(parse(quoted[1]), value, `index.d.ts default of ${key}`)
  }
  for (const [key, text] of rows) {
    if (!(key in native) && /^`/.test(text))
      assert.fail(`README quotes a default for ${key} that the native side does not have`)
  }
})
