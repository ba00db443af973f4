#!/usr/bin/env node
'use strict'
// Builds the egress proxy (crate egress/, kern-sandbox-egress): the process the addon starts for
// every network policy, beside Node, so that TLS (rustls on ring) stays out of the .node.
//
//   node scripts/build-egress.js [--debug] [--out DIR] [--target TRIPLE]
//
// Default: this host's target, the egress profile (root Cargo.toml: release with LTO), copied to
// the package root as `kern-sandbox-egress` (gitignored), beside the .node, where the addon finds
// it in a work tree (src/locate.rs). --debug: the dev profile (`npm run build:debug`). --out DIR:
// writes DIR/kern-sandbox-egress.<triple> instead, the name scripts/pack.js takes from a release's
// artifacts for that target's platform package. --target TRIPLE (with --out; scripts/build-all.js):
// that release target through cargo-zigbuild, as the addon is built (gnu pinned to the glibc
// baseline), into target/cross.
//
// It is built for the host's own target (glibc or musl), not as a static musl executable like the
// agent: ring's C and assembly need a C compiler for the target, and a fresh Debian has none for
// musl (musl-tools); the addon itself is built per target anyway.

const fs = require('node:fs')
const path = require('node:path')
const { cargoExecutable } = require('./cargo-exe.js')
const { hostTarget, describe } = require('./targets.js')

const repo = path.resolve(__dirname, '..')
const NAME = 'kern-sandbox-egress'

function parseArgs(argv) {
  const o = { debug: false, out: null, target: null }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--debug') o.debug = true
    else if (a === '--out') o.out = path.resolve(argv[++i])
    else if (a === '--target') o.target = describe(argv[++i])
    else throw new Error(`unknown option ${a}`)
  }
  if (o.target && !o.out) throw new Error('--target needs --out DIR')
  return o
}

/** Runs the cargo build and returns the path of the executable it produced. */
function cargoBuild(o) {
  const args = o.target
    ? ['zigbuild', '--target', o.target.buildTarget, '--target-dir', path.join(repo, 'target', 'cross')]
    : ['build']
  args.push('-p', NAME, '--profile', o.debug ? 'dev' : 'egress')
  return cargoExecutable(repo, args, NAME)
}

function main() {
  const o = parseArgs(process.argv.slice(2))
  const exe = cargoBuild(o)
  const target = o.target || hostTarget()
  if (o.out && !target) throw new Error(`no release target for this host (${process.arch})`)
  const dest = o.out ? path.join(o.out, `${NAME}.${target.triple}`) : path.join(repo, NAME)
  if (o.out) fs.mkdirSync(o.out, { recursive: true })
  // Copy to a temporary name and rename: a proxy starting meanwhile never runs half a file.
  fs.copyFileSync(exe, `${dest}.tmp`)
  fs.chmodSync(`${dest}.tmp`, 0o755)
  fs.renameSync(`${dest}.tmp`, dest)
  console.log(`${path.relative(process.cwd(), dest) || dest}: ${fs.statSync(dest).size} bytes`)
}

try {
  main()
} catch (e) {
  console.error(`build-egress: ${e.message}`)
  process.exitCode = 1
}
