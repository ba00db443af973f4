'use strict'
// The Rust target the machine agent (agent/) is built for: it is a static musl executable, so the
// toolchain needs that target's standard library. Shared by build-agent.js, which adds a missing
// target with rustup, and prereqs.js, which names it up front when there is no rustup to add it.
// No musl C toolchain (musl-gcc, Debian's musl-tools) is needed: the agent's crates compile no C,
// and rustc links the musl target with the C runtime it ships, through the host's cc.

const fs = require('node:fs')
const cp = require('node:child_process')

const TRIPLES = { x64: 'x86_64-unknown-linux-musl', arm64: 'aarch64-unknown-linux-musl' }

/** Whether the active Rust toolchain has the standard library of `triple`. Asks rustc where that
 * target's libraries go, so it holds with or without rustup (a distribution's Rust too). */
function installed(triple, cwd) {
  const r = cp.spawnSync('rustc', ['--print', 'target-libdir', '--target', triple], { cwd, encoding: 'utf8' })
  if (r.status !== 0 || !r.stdout) return false
  try {
    return fs.readdirSync(r.stdout.trim()).some((f) => /^libstd-.*\.rlib$/.test(f))
  } catch {
    return false
  }
}

/** Whether rustup is there to add a target. */
function hasRustup() {
  return cp.spawnSync('rustup', ['--version'], { stdio: 'ignore' }).status === 0
}

/** `rustup target add triple`, said first on stderr (its own output goes to stderr too: stdout is
 * the build's result line). Throws when it fails. */
function add(triple, cwd, who) {
  process.stderr.write(`${who}: the Rust target ${triple} is not installed; adding it: rustup target add ${triple}\n`)
  const r = cp.spawnSync('rustup', ['target', 'add', triple], { cwd, stdio: ['ignore', 2, 'inherit'] })
  if (r.status !== 0)
    throw new Error(`rustup target add ${triple} failed (${r.error ? r.error.message : `exit ${r.status}`})`)
}

module.exports = { TRIPLES, installed, hasRustup, add }
