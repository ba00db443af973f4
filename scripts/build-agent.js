#!/usr/bin/env node
'use strict'
// Builds the machine agent (crate agent/, kern-sandbox-agent): a static musl executable that runs
// as PID 1 of a machine's box, mounted read-only into images of any distribution.
//
//   node scripts/build-agent.js [--debug] [--arch x64|arm64] [--out DIR]
//
// Default: this host's arch, the `agent` profile (release, size-optimized, stripped; root
// Cargo.toml), copied to the package root as `kern-sandbox-agent` (gitignored), where the host
// finds it in a work tree. --debug: the dev profile (quicker to build; `npm run build:debug`).
// --out DIR: writes DIR/kern-sandbox-agent.linux-<arch> instead, the name scripts/pack.js takes
// from a release's artifacts and ships as `kern-sandbox-agent` in every platform package of
// that arch (glibc and musl packages alike: the agent links nothing dynamically).
// Cross builds (arm64 on x86_64) go through cargo-zigbuild when it is installed.

const fs = require('node:fs')
const path = require('node:path')
const cp = require('node:child_process')

const { cargoExecutable } = require('./cargo-exe.js')
const musl = require('./musl-target.js')

const repo = path.resolve(__dirname, '..')
const TRIPLES = musl.TRIPLES

function parseArgs(argv) {
  const o = { debug: false, arch: process.arch, out: null }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--debug') o.debug = true
    else if (a === '--arch') o.arch = argv[++i]
    else if (a === '--out') o.out = path.resolve(argv[++i])
    else throw new Error(`unknown option ${a}`)
  }
  if (!TRIPLES[o.arch]) throw new Error(`no agent build for arch ${o.arch} (x64 or arm64)`)
  return o
}

function has(cmd, args) {
  return cp.spawnSync(cmd, args, { stdio: 'ignore' }).status === 0
}

/** Makes sure the toolchain has `triple`: rustup adds it when it is missing (a fresh rustup
 * install has the host's gnu target only), so `npm ci && npm test` needs no step of its own. */
function ensureTarget(triple) {
  if (musl.installed(triple, repo)) return
  if (!musl.hasRustup())
    throw new Error(
      `the Rust target ${triple} is not installed, and there is no rustup to add it: install Rust with rustup, or that target's standard library`,
    )
  musl.add(triple, repo, 'build-agent')
}

/** The cargo subcommand for `triple`: plain cargo for this host's arch, zigbuild across. */
function cargoCommand(arch, triple) {
  ensureTarget(triple)
  if (arch === process.arch) return 'build'
  if (has('cargo-zigbuild', ['--version'])) return 'zigbuild'
  throw new Error(`building the ${arch} agent on ${process.arch} needs cargo-zigbuild (scripts/setup-cross.sh)`)
}

/** Runs the cargo build and returns the path of the executable it produced. */
function cargoBuild(o) {
  const triple = TRIPLES[o.arch]
  const args = [cargoCommand(o.arch, triple), '-p', 'kern-sandbox-agent', '--target', triple]
  args.push('--profile', o.debug ? 'dev' : 'agent')
  return cargoExecutable(repo, args, 'kern-sandbox-agent')
}

function main() {
  const o = parseArgs(process.argv.slice(2))
  const exe = cargoBuild(o)
  const dest = o.out ? path.join(o.out, `kern-sandbox-agent.linux-${o.arch}`) : path.join(repo, 'kern-sandbox-agent')
  if (o.out) fs.mkdirSync(o.out, { recursive: true })
  // Copy to a temporary name and rename: a machine starting meanwhile never mounts half a file.
  fs.copyFileSync(exe, `${dest}.tmp`)
  fs.chmodSync(`${dest}.tmp`, 0o755)
  fs.renameSync(`${dest}.tmp`, dest)
  console.log(`${path.relative(process.cwd(), dest) || dest}: ${fs.statSync(dest).size} bytes (${TRIPLES[o.arch]})`)
}

try {
  main()
} catch (e) {
  console.error(`build-agent: ${e.message}`)
  process.exitCode = 1
}
