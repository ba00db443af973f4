#!/usr/bin/env node
'use strict'
// Runs first in `npm run build` and `npm test`: if a tool they need is not installed, says so in
// one line, with the command that installs it, and exits 1 at once (instead of a Rust or napi
// error, or a hundred tests failing one by one on a missing bwrap).
//
//   node scripts/prereqs.js build   Rust (cargo, rustc), a C compiler (Rust links with cc), and
//                                   the musl target of the machine agent unless rustup is there
//                                   (scripts/build-agent.js then adds it itself)
//   node scripts/prereqs.js test    the same, plus what the tests and the kern stand-in run:
//                                   bubblewrap (not with KERN_BIN, a real kern), python3, GNU tar,
//                                   setpriv and prlimit; and mcp/'s own dependencies (its tests run
//                                   in `npm test` too)

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const musl = require('./musl-target.js')

/** What each command needs: [what to call it, the commands (the first found will do, unless
 * EVERY lists the need), its package per package manager]. */
const NEEDS = {
  rust: ['a Rust toolchain (cargo, rustc)', ['cargo', 'rustc'], null],
  // Not a command: checked by asking rustc (muslMissing), and said in a sentence of its own.
  muslTarget: [
    `Rust has no ${musl.TRIPLES[process.arch] || musl.TRIPLES.x64} target (the machine agent's) and no rustup to add it`,
    [],
    null,
  ],
  cc: [
    'a C compiler (cc)',
    ['cc', 'gcc', 'clang'],
    { apt: 'gcc', dnf: 'gcc', apk: 'gcc musl-dev', pacman: 'gcc', zypper: 'gcc' },
  ],
  bwrap: [
    'bubblewrap (bwrap)',
    ['bwrap'],
    { apt: 'bubblewrap', dnf: 'bubblewrap', apk: 'bubblewrap', pacman: 'bubblewrap', zypper: 'bubblewrap' },
  ],
  python3: [
    'python3',
    ['python3'],
    { apt: 'python3', dnf: 'python3', apk: 'python3', pacman: 'python', zypper: 'python3' },
  ],
  tar: ['GNU tar', ['tar'], { apt: 'tar', dnf: 'tar', apk: 'tar', pacman: 'tar', zypper: 'tar' }],
  utilLinux: [
    'setpriv and prlimit (util-linux)',
    ['setpriv', 'prlimit'],
    {
      apt: 'util-linux',
      dnf: 'util-linux',
      apk: 'setpriv util-linux-misc',
      pacman: 'util-linux',
      zypper: 'util-linux',
    },
  ],
}
const EVERY = new Set(['rust', 'utilLinux'])
const MANAGERS = [
  ['apt', 'apt-get', 'apt-get install -y'],
  ['dnf', 'dnf', 'dnf install -y'],
  ['apk', 'apk', 'apk add'],
  ['pacman', 'pacman', 'pacman -S --needed'],
  ['zypper', 'zypper', 'zypper install -y'],
]
const RUSTUP = "curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh"

const dirs = (process.env.PATH || '').split(path.delimiter).filter(Boolean)
function onPath(name) {
  return dirs.some((d) => {
    try {
      fs.accessSync(path.join(d, name), fs.constants.X_OK)
      return fs.statSync(path.join(d, name)).isFile()
    } catch {
      return false
    }
  })
}

/** The agent's musl target is missing and nothing will add it: Rust is there (else that is what
 * is missing) but has no such target, and there is no rustup. */
function muslMissing() {
  const triple = musl.TRIPLES[process.arch]
  if (!triple || !NEEDS.rust[1].every(onPath) || onPath('rustup')) return false
  return !musl.installed(triple, path.join(__dirname, '..'))
}

function missing(mode) {
  const keys = ['rust', 'cc']
  if (mode === 'test') {
    if (!process.env.KERN_BIN) keys.push('bwrap')
    keys.push('python3', 'tar', 'utilLinux')
  }
  const out = keys.filter((k) => (EVERY.has(k) ? !NEEDS[k][1].every(onPath) : !NEEDS[k][1].some(onPath)))
  if (muslMissing()) out.unshift('muslTarget')
  return out
}

function installHint(keys) {
  const sudo = process.getuid && process.getuid() !== 0 && onPath('sudo') ? 'sudo ' : ''
  const hints = []
  const pkgs = keys.filter((k) => NEEDS[k][2])
  if (pkgs.length) {
    const pm = MANAGERS.find(([, bin]) => onPath(bin))
    if (pm) hints.push(`${sudo}${pm[2]} ${pkgs.map((k) => NEEDS[k][2][pm[0]]).join(' ')}`)
    else hints.push(`install ${pkgs.map((k) => NEEDS[k][0]).join(', ')} with your package manager`)
  }
  if (keys.includes('rust')) {
    const home = path.join(os.homedir(), '.cargo', 'bin')
    hints.push(fs.existsSync(path.join(home, 'cargo')) ? `add ${home} to PATH (. ~/.cargo/env)` : RUSTUP)
  }
  if (keys.includes('muslTarget')) {
    // A Rust without rustup (a distribution's) rarely packages the musl target; rustup's Rust
    // gets it from the build itself.
    hints.push(`${RUSTUP} (the build then adds the target with rustup target add)`)
  }
  return hints.join(' && ')
}

const mode = process.argv[2] === 'test' ? 'test' : 'build'
const keys = missing(mode)
if (keys.length) {
  const what = mode === 'test' ? 'npm test' : 'npm run build'
  const names = keys.filter((k) => k !== 'muslTarget').map((k) => NEEDS[k][0])
  const list = names.length > 1 ? `${names.slice(0, -1).join(', ')} and ${names[names.length - 1]}` : names[0]
  const why = [
    names.length ? `${list} not found on PATH` : null,
    keys.includes('muslTarget') ? NEEDS.muslTarget[0] : null,
  ]
  process.stderr.write(
    `kern-sandbox: ${what} cannot start: ${why.filter(Boolean).join('; ')}. Install: ${installHint(keys)}\n`,
  )
  process.exit(1)
}

// mcp/ (kern-sandbox-mcp) has its own lockfile: `npm ci` at the root does not install it.
if (mode === 'test') {
  const mcp = path.join(__dirname, '..', 'mcp')
  const sdk = path.join(mcp, 'node_modules', '@modelcontextprotocol', 'sdk', 'package.json')
  const lib = path.join(mcp, 'node_modules', 'kern-sandbox')
  let linked = false
  try {
    linked = fs.realpathSync(lib) === fs.realpathSync(path.join(__dirname, '..'))
  } catch {
    // not installed
  }
  if (!fs.existsSync(sdk) || !linked) {
    process.stderr.write(
      'kern-sandbox: npm test cannot start: the dependencies of mcp/ (kern-sandbox-mcp) are not installed. Install: npm ci --prefix mcp\n',
    )
    process.exit(1)
  }
}
