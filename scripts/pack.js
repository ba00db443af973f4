#!/usr/bin/env node
'use strict'
// Makes the tarballs a release publishes: one per platform package (npm/<platform>/ plus its
// .node) and the main package, whose package.json gains `optionalDependencies` on every platform
// package at exactly this version. The release workflow publishes these very files (platform
// packages first), and __test__/install.test.js installs them, so what is tested is what ships.
//
//   node scripts/pack.js [--artifacts DIR] [--out DIR] [--targets all|host|t1,t2] [--json]
//   node scripts/pack.js --refuse-direct-publish   (package.json's prepublishOnly)
//
// --artifacts: where the built <binaryName>.<platform>.node files (and, from the release build,
//   binding.js and kern-sandbox-agent.linux-<arch>) are; default the repo root, where `npm run
//   build` puts them (the agent there as kern-sandbox-agent).
// --targets: which platform packages to pack (default all; every one must have its .node). The main
//   package always lists all of them: npm installs the one matching os/cpu/libc and skips the rest.
//
// Why the repo's package.json has no optionalDependencies: until the platform packages are on the
// registry, `npm ci` refuses a package.json whose dependencies the lockfile cannot hold, and after
// that every dev install would fetch a published binary it never uses (the loader prefers the local
// build). napi-rs' own `napi prepublish` adds them at publish time the same way.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const cp = require('node:child_process')
const { repo, pkg, targets, hostTarget } = require('./targets.js')

function parseArgs(argv) {
  const o = { artifacts: repo, out: path.join(repo, 'target', 'npm-pack'), targets, json: false }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--artifacts') o.artifacts = path.resolve(argv[++i])
    else if (a === '--out') o.out = path.resolve(argv[++i])
    else if (a === '--json') o.json = true
    else if (a === '--targets') {
      const v = argv[++i]
      if (v === 'host') {
        const h = hostTarget()
        if (!h) throw new Error(`no release target for this host (${process.platform}-${process.arch})`)
        o.targets = [h]
      } else if (v !== 'all') {
        const want = v.split(',')
        o.targets = targets.filter((t) => want.includes(t.triple) || want.includes(t.platformArchABI))
        if (o.targets.length !== want.length) throw new Error(`unknown target in ${v}`)
      }
    } else throw new Error(`unknown option ${a}`)
  }
  return o
}

function npmPack(dir, out) {
  // --ignore-scripts: the staged copies have no build to run, and a pack must not start one.
  const stdout = cp.execFileSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', out], {
    cwd: dir,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const [info] = JSON.parse(stdout)
  return {
    name: info.name,
    version: info.version,
    file: path.join(out, info.filename),
    files: info.files.map((f) => f.path),
  }
}

/** The optionalDependencies the published main package carries: every target, exact version. */
function optionalDependencies() {
  return Object.fromEntries(targets.map((t) => [t.packageName, pkg.version]))
}

function stagePlatform(t, o, stage) {
  const node = path.join(o.artifacts, t.nodeFile)
  if (!fs.existsSync(node))
    throw new Error(`${t.nodeFile} not found in ${o.artifacts}: build it first (npm run build / npm run build:all)`)
  const manifest = JSON.parse(fs.readFileSync(path.join(t.npmDir, 'package.json'), 'utf8'))
  const expect = { name: t.packageName, version: pkg.version, main: t.nodeFile }
  for (const [k, v] of Object.entries(expect)) {
    if (manifest[k] !== v)
      throw new Error(
        `npm/${t.platformArchABI}/package.json: ${k} is ${JSON.stringify(manifest[k])}, expected ${JSON.stringify(v)}`,
      )
  }
  const dir = path.join(stage, t.platformArchABI)
  fs.mkdirSync(dir)
  for (const f of fs.readdirSync(t.npmDir)) fs.copyFileSync(path.join(t.npmDir, f), path.join(dir, f))
  fs.copyFileSync(node, path.join(dir, t.nodeFile))
  fs.copyFileSync(agentFor(t, o), path.join(dir, AGENT))
  fs.chmodSync(path.join(dir, AGENT), 0o755)
  fs.copyFileSync(egressFor(t, o), path.join(dir, EGRESS))
  fs.chmodSync(path.join(dir, EGRESS), 0o755)
  return dir
}

/** The egress proxy each platform package carries next to its .node (the addon runs it for a
 * network policy). It is built per target (scripts/build-egress.js): a release's artifacts hold
 * kern-sandbox-egress.<triple>; a work tree's `npm run build` leaves this host's as
 * kern-sandbox-egress. */
const EGRESS = 'kern-sandbox-egress'
function egressFor(t, o) {
  const candidates = [path.join(o.artifacts, `${EGRESS}.${t.triple}`)]
  if (t.triple === hostTarget()?.triple) candidates.push(path.join(o.artifacts, EGRESS), path.join(repo, EGRESS))
  const found = candidates.find((f) => fs.existsSync(f))
  if (!found)
    throw new Error(
      `${EGRESS}.${t.triple} not found in ${o.artifacts}: build it first (npm run build / node scripts/build-egress.js --out DIR on that target)`,
    )
  return found
}

/** The machine agent every platform package carries next to its .node (the host mounts it into a
 * machine's box). It is static, so one build per arch serves the glibc and the musl package: a
 * release's artifacts hold kern-sandbox-agent.linux-<arch> (scripts/build-agent.js --out); a work
 * tree's `npm run build` leaves this host's as kern-sandbox-agent. */
const AGENT = 'kern-sandbox-agent'
function agentFor(t, o) {
  const candidates = [path.join(o.artifacts, `${AGENT}.linux-${t.arch}`)]
  if (t.arch === process.arch) candidates.push(path.join(o.artifacts, AGENT), path.join(repo, AGENT))
  const found = candidates.find((f) => fs.existsSync(f))
  if (!found)
    throw new Error(
      `${AGENT}.linux-${t.arch} not found in ${o.artifacts}: build it first (npm run build / node scripts/build-agent.js --arch ${t.arch} --out DIR)`,
    )
  return found
}

function stageMain(o, stage) {
  const loader = [path.join(o.artifacts, 'binding.js'), path.join(repo, 'binding.js')].find((f) => fs.existsSync(f))
  if (!loader) throw new Error('binding.js not found: it is generated by `npm run build` (napi build --js binding.js)')
  // The files npm itself would pack from the repo (package.json `files`, plus what npm always adds).
  const listing = cp.execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
    cwd: repo,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const files = JSON.parse(listing)[0].files.map((f) => f.path)
  const dir = path.join(stage, 'main')
  for (const f of files) {
    fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true })
    fs.copyFileSync(path.join(repo, f), path.join(dir, f))
  }
  fs.copyFileSync(loader, path.join(dir, 'binding.js'))
  const manifest = JSON.parse(fs.readFileSync(path.join(repo, 'package.json'), 'utf8'))
  manifest.optionalDependencies = { ...optionalDependencies(), ...manifest.optionalDependencies }
  // The repo's guard against `npm publish` from the work tree; this staged copy is the real thing.
  if (manifest.scripts) delete manifest.scripts.prepublishOnly
  fs.writeFileSync(path.join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`)
  return dir
}

function pack(o) {
  fs.mkdirSync(o.out, { recursive: true })
  const stage = fs.mkdtempSync(path.join(os.tmpdir(), 'kern-pack-'))
  try {
    const platforms = o.targets.map((t) => ({ target: t.triple, ...npmPack(stagePlatform(t, o, stage), o.out) }))
    const main = npmPack(stageMain(o, stage), o.out)
    if (main.files.some((f) => f.endsWith('.node'))) throw new Error('the main package must not carry a .node file')
    return { main, platforms }
  } finally {
    fs.rmSync(stage, { recursive: true, force: true })
  }
}

module.exports = { pack, optionalDependencies }

if (require.main === module) {
  if (process.argv[2] === '--refuse-direct-publish') {
    // package.json's prepublishOnly: a publish from the work tree would ship a main package with no
    // optionalDependencies, so every install would have no binary. npm runs prepublishOnly only
    // when publishing a directory, never for the tarballs this script makes.
    console.error(
      'Do not `npm publish` the work tree: publish the tarballs `node scripts/pack.js` makes, platform ' +
        'packages first (.github/workflows/release.yml does this on a v* tag).',
    )
    process.exit(1)
  }
  try {
    const o = parseArgs(process.argv.slice(2))
    const r = pack(o)
    if (o.json) console.log(JSON.stringify(r, null, 2))
    else {
      for (const p of r.platforms) console.log(`${path.relative(process.cwd(), p.file)}  (${p.files.join(', ')})`)
      console.log(`${path.relative(process.cwd(), r.main.file)}  (${r.main.files.join(', ')})`)
    }
  } catch (e) {
    console.error(e.message)
    process.exitCode = 1
  }
}
