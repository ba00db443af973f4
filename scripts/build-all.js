#!/usr/bin/env node
'use strict'
// `npm run build:all`: builds the release addon for every target in package.json's napi config on
// this one x86_64 Linux machine, checks each with readelf, runs what can be run here, and prints a
// table. The same build the release workflow does, so a target that breaks shows up before a tag.
//
//   node scripts/build-all.js [--targets t1,t2] [--out DIR] [--skip-build] [--no-run]
//
// Builds go through `napi build -x` (cargo-zigbuild + zig): gnu targets pinned to glibc 2.17
// (`x86_64-unknown-linux-gnu.2.17`), musl targets against musl (napi adds -crt-static's opposite
// so the addon links musl dynamically, as Alpine's node needs). Release profile: LTO, one codegen
// unit, stripped (Cargo.toml). Cargo output goes to target/cross, the addons and the generated
// binding.js to DIR (default target/release-artifacts), logs to DIR/logs. The machine agent of each
// arch (scripts/build-agent.js) goes to DIR/kern-sandbox-agent.linux-<arch>, the egress proxy of
// each target (scripts/build-egress.js) to DIR/kern-sandbox-egress.<triple>.
//
// Run checks, each only where its tools are (bash scripts/setup-cross.sh installs them all):
//   - x64 gnu: host node loads the addon through the generated loader and runs one runCode;
//   - arm64 gnu: the same under qemu-aarch64 with Debian's arm64 nodejs (target/cross-sysroot);
//   - musl: no musl Node.js is reachable here, so a zig-built musl program dlopen()s the addon with
//     RTLD_NOW (every symbol resolved against Debian's musl) and finds napi_register_module_v1;
//     arm64 under qemu.
// runCode needs a kern: $KERN_BIN, else the stand-in at target/release/kern-standin
// (`npm run build:standin`); without either the addon is only loaded.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const cp = require('node:child_process')
const { repo, targets: allTargets, pkg } = require('./targets.js')
const { checkDir, summaryRow, table, COLUMNS } = require('./check-binaries.js')

const SYSROOT = path.join(repo, 'target', 'cross-sysroot', 'aarch64')
const napiBin = path.join(repo, 'node_modules', '.bin', 'napi')

function parseArgs(argv) {
  const o = { targets: allTargets, out: path.join(repo, 'target', 'release-artifacts'), build: true, run: true }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--targets') {
      const want = argv[++i].split(',')
      o.targets = allTargets.filter((t) => want.includes(t.triple) || want.includes(t.platformArchABI))
      if (o.targets.length !== want.length) throw new Error(`unknown target in ${want.join(',')}`)
    } else if (a === '--out') o.out = path.resolve(argv[++i])
    else if (a === '--skip-build') o.build = false
    else if (a === '--no-run') o.run = false
    else throw new Error(`unknown option ${a}`)
  }
  return o
}

function has(cmd, args = ['--version']) {
  return cp.spawnSync(cmd, args, { stdio: 'ignore' }).status === 0
}

/** `zig` on PATH, or PyPI's ziglang through python3 (what cargo-zigbuild falls back to). */
function zigCommand() {
  if (has('zig', ['version'])) return ['zig']
  if (has('python3', ['-m', 'ziglang', 'version'])) return ['python3', '-m', 'ziglang']
  return null
}

function preflight(targets) {
  const missing = []
  const installed = cp.execFileSync('rustup', ['target', 'list', '--installed'], { encoding: 'utf8' }).split('\n')
  // Every addon target, and the musl target of each arch for the agent.
  const muslAgent = { x64: 'x86_64-unknown-linux-musl', arm64: 'aarch64-unknown-linux-musl' }
  const triples = new Set([...targets.map((t) => t.triple), ...targets.map((t) => muslAgent[t.arch])])
  const noStd = [...triples].filter((t) => !installed.includes(t))
  if (noStd.length) missing.push(`rustup targets ${noStd.join(' ')}`)
  if (!zigCommand()) missing.push('zig (pip install ziglang)')
  if (!has('cargo-zigbuild')) missing.push('cargo-zigbuild (cargo install --locked cargo-zigbuild)')
  if (!has('readelf')) missing.push('readelf (apt-get install binutils)')
  if (!fs.existsSync(napiBin)) missing.push('@napi-rs/cli (npm install)')
  if (missing.length) {
    throw new Error(`build:all needs ${missing.join(', ')}. \`bash scripts/setup-cross.sh\` installs all of it.`)
  }
}

function build(t, out, { js }) {
  const log = path.join(out, 'logs', `${t.triple}.log`)
  const args = [
    'build',
    '--platform',
    '--release',
    '--target',
    t.buildTarget,
    '-x',
    '--target-dir',
    path.join(repo, 'target', 'cross'),
    '--output-dir',
    out,
    // Never the repo's index.d.ts: napi's default type-def file name is index.d.ts.
    '--dts',
    'binding.d.ts',
    ...(js ? ['--js', 'binding.js'] : ['--no-js']),
  ]
  const started = Date.now()
  process.stdout.write(`building ${t.triple} (${t.buildTarget}) ... `)
  const fd = fs.openSync(log, 'w')
  const r = cp.spawnSync(napiBin, args, { cwd: repo, stdio: ['ignore', fd, fd] })
  fs.closeSync(fd)
  const secs = ((Date.now() - started) / 1000).toFixed(0)
  if (r.status !== 0) {
    console.log(`FAILED after ${secs}s; last lines of ${log}:`)
    console.log(fs.readFileSync(log, 'utf8').split('\n').slice(-25).join('\n'))
    return false
  }
  console.log(`${secs}s`)
  return true
}

/** The machine agent for `arch` (static musl, one per arch for its gnu and musl packages), as
 * DIR/kern-sandbox-agent.linux-<arch>, where scripts/pack.js takes it from. */
function buildAgent(arch, out) {
  process.stdout.write(`building kern-sandbox-agent (${arch}) ... `)
  const r = cp.spawnSync(process.execPath, [path.join(__dirname, 'build-agent.js'), '--arch', arch, '--out', out], {
    cwd: repo,
    encoding: 'utf8',
  })
  console.log(r.status === 0 ? r.stdout.trim() : `FAILED:\n${r.stderr.split('\n').slice(-25).join('\n')}`)
  return r.status === 0
}

/** The egress proxy for target `t` (scripts/build-egress.js --target), as
 * DIR/kern-sandbox-egress.<triple>, where scripts/pack.js takes it from. */
function buildEgress(t, out) {
  process.stdout.write(`building kern-sandbox-egress (${t.triple}) ... `)
  const script = path.join(__dirname, 'build-egress.js')
  const r = cp.spawnSync(process.execPath, [script, '--target', t.triple, '--out', out], {
    cwd: repo,
    encoding: 'utf8',
  })
  console.log(r.status === 0 ? r.stdout.trim() : `FAILED:\n${r.stderr.split('\n').slice(-25).join('\n')}`)
  return r.status === 0
}

function kernForSmoke() {
  if (process.env.KERN_BIN) return process.env.KERN_BIN
  const standin = path.join(repo, 'target', 'release', 'kern-standin')
  return fs.existsSync(standin) ? standin : null
}

/** A throwaway copy of the package with `file` as its local addon, so the generated loader picks
 * it the way it would on that platform (arch, glibc/musl detection, file name). */
function smokePackage(t, out, file) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `kern-smoke-${t.platformArchABI}-`))
  smokeDirs.push(dir)
  for (const f of ['index.js', 'index.mjs', 'package.json']) fs.copyFileSync(path.join(repo, f), path.join(dir, f))
  const loader = fs.existsSync(path.join(out, 'binding.js'))
    ? path.join(out, 'binding.js')
    : path.join(repo, 'binding.js')
  fs.copyFileSync(loader, path.join(dir, 'binding.js'))
  fs.copyFileSync(file, path.join(dir, t.nodeFile))
  const kern = kernForSmoke()
  const source = `
    const kern = require(${JSON.stringify(dir)})
    const run = ${kern ? 'true' : 'false'}
    ;(async () => {
      const head = process.arch + ' node ' + process.version + ': loaded'
      if (!run) return console.log(head + ' (no kern for runCode)')
      const r = await kern.runCode('print(sum(range(100)))', { timeoutS: 60 })
      if (r.stdout !== '4950\\n' || !r.success) throw new Error('runCode gave ' + JSON.stringify(r))
      console.log(head + ', runCode ok')
    })().catch((e) => { console.error(e && e.stack || e); process.exit(1) })`
  fs.writeFileSync(path.join(dir, 'smoke.js'), source)
  return { dir, script: path.join(dir, 'smoke.js'), env: kern ? { ...process.env, KERN_BIN: kern } : process.env }
}

const smokeDirs = []
process.on('exit', () => {
  for (const d of smokeDirs) fs.rmSync(d, { recursive: true, force: true })
})

function runSmoke(cmd, args, env) {
  const r = cp.spawnSync(cmd, args, { encoding: 'utf8', env, timeout: 180_000 })
  const text = `${r.stdout || ''}${r.stderr || ''}`.trim().split('\n').filter(Boolean)
  return r.status === 0 ? `ok: ${text[text.length - 1]}` : `FAIL: ${text.slice(-3).join(' | ') || r.error || r.signal}`
}

let muslCheckers = null
/** Builds the musl dlopen probe for both arches with zig, once. */
function muslChecker(arch) {
  if (!muslCheckers) {
    muslCheckers = {}
    const zig = zigCommand()
    const dir = path.join(repo, 'target', 'cross', 'musl-probe')
    fs.mkdirSync(dir, { recursive: true })
    const src = path.join(dir, 'dlopen-probe.c')
    fs.writeFileSync(
      src,
      `#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
  if (argc < 2) return 64;
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) { printf("dlopen failed: %s\\n", dlerror()); return 1; }
  void *s = dlsym(h, "napi_register_module_v1");
  printf("dlopen(RTLD_NOW) under musl ok, napi_register_module_v1 %s\\n", s ? "found" : "MISSING");
  return s ? 0 : 2;
}
`,
    )
    for (const [a, zt] of [
      ['x64', 'x86_64-linux-musl'],
      ['arm64', 'aarch64-linux-musl'],
    ]) {
      const exe = path.join(dir, `probe-${a}`)
      // -fno-sanitize: zig's UBSan runtime would pull in symbols older musl lacks (statx).
      const r = cp.spawnSync(
        zig[0],
        [...zig.slice(1), 'cc', '-O2', '-fno-sanitize=all', '-target', zt, '-dynamic', '-o', exe, src],
        { encoding: 'utf8' },
      )
      if (r.status === 0) muslCheckers[a] = exe
    }
  }
  return muslCheckers[arch] || null
}

/** What could be run for target `t`'s addon on this machine, and how it went. */
function runCheck(t, out) {
  const file = path.join(out, t.nodeFile)
  if (t.abi === 'gnu') {
    if (t.arch === process.arch) {
      const s = smokePackage(t, out, file)
      return `native ${runSmoke(process.execPath, [s.script], s.env)}`
    }
    if (t.arch === 'arm64') {
      const node = path.join(SYSROOT, 'usr', 'bin', 'node')
      if (!has('qemu-aarch64', ['--version']) || !fs.existsSync(node))
        return 'not run (needs qemu-user and the arm64 root: scripts/setup-cross.sh)'
      const s = smokePackage(t, out, file)
      return `qemu ${runSmoke('qemu-aarch64', ['-L', SYSROOT, node, s.script], s.env)}`
    }
    return 'not run (no way to run this arch here)'
  }
  const loader = t.arch === 'x64' ? '/lib/ld-musl-x86_64.so.1' : path.join(SYSROOT, 'lib', 'ld-musl-aarch64.so.1')
  if (!fs.existsSync(loader))
    return `not run (needs ${t.arch === 'x64' ? "Debian's musl" : 'the arm64 root'}: scripts/setup-cross.sh)`
  const probe = muslChecker(t.arch)
  if (!probe) return 'not run (could not build the musl probe with zig)'
  if (t.arch === process.arch) return `native ${runSmoke(probe, [file], process.env)}`
  if (t.arch === 'arm64' && has('qemu-aarch64', ['--version']))
    return `qemu ${runSmoke('qemu-aarch64', ['-L', SYSROOT, probe, file], process.env)}`
  return 'not run (no qemu-user)'
}

function main() {
  const o = parseArgs(process.argv.slice(2))
  fs.mkdirSync(path.join(o.out, 'logs'), { recursive: true })
  let ok = true
  if (o.build) {
    preflight(o.targets)
    o.targets.forEach((t, i) => {
      ok = build(t, o.out, { js: i === 0 }) && ok
    })
    for (const arch of new Set(o.targets.map((t) => t.arch))) ok = buildAgent(arch, o.out) && ok
    for (const t of o.targets) ok = buildEgress(t, o.out) && ok
  }
  const rows = checkDir(o.out).filter((r) => o.targets.includes(r.target))
  for (const r of rows) {
    if (r.missing) {
      r.problems.push('not built')
      continue
    }
    if (o.run) {
      r.run = runCheck(r.target, o.out)
      if (r.run.includes('FAIL')) r.problems.push(r.run)
    }
  }
  console.log(`\n${pkg.name} ${pkg.version}: release addons in ${path.relative(repo, o.out) || '.'}\n`)
  console.log(table(rows.map(summaryRow), COLUMNS))
  if (o.run) {
    console.log('\nrun checks:')
    for (const r of rows) if (!r.missing) console.log(`  ${r.target.triple.padEnd(28)} ${r.run}`)
  }
  const bad = rows.filter((r) => r.problems.length)
  for (const r of bad) console.error(`\n${r.target.triple}: ${r.problems.join('; ')}`)
  ok = ok && bad.length === 0
  console.log(ok ? '\nall targets ok' : '\nbuild:all FAILED')
  return ok ? 0 : 1
}

try {
  process.exitCode = main()
} catch (e) {
  console.error(e.message)
  process.exitCode = 1
}
