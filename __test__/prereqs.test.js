'use strict'
// `npm test` and `npm run build` on a machine without their tools: one line naming what is
// missing and the command that installs it, and an exit at once (scripts/prereqs.js).

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const cp = require('node:child_process')
const { repo, tmpDir } = require('./helpers')

const script = path.join(repo, 'scripts', 'prereqs.js')
const buildAgent = path.join(repo, 'scripts', 'build-agent.js')
/** The machine agent's target on this host. */
const TRIPLE = { x64: 'x86_64-unknown-linux-musl', arm64: 'aarch64-unknown-linux-musl' }[process.arch]

/** A PATH of one directory holding node and stubs of `tools` (a stub apt-get picks the hint).
 * The rustc stub answers `--print target-libdir` with a directory that holds the agent's musl
 * target's standard library, or lacks it with `musl: false`. A rustup stub logs its argv to
 * `rustup.log` there and, on `target add`, installs that library (or fails with `addFails`); a
 * cargo stub logs its argv to `cargo.log` and reports an agent executable, as cargo's JSON does. */
function pathWith(tools, { musl = true, addFails = false } = {}) {
  const dir = tmpDir('kst-path-')
  fs.symlinkSync(process.execPath, path.join(dir, 'node'))
  const libdir = path.join(dir, 'rustlib', TRIPLE, 'lib')
  fs.mkdirSync(libdir, { recursive: true })
  const std = path.join(libdir, 'libstd-0a1b2c.rlib')
  if (musl) fs.writeFileSync(std, '')
  const agent = path.join(dir, 'built-agent')
  fs.writeFileSync(agent, '#!/bin/sh\n', { mode: 0o755 })
  const artifact = JSON.stringify({
    reason: 'compiler-artifact',
    target: { name: 'kern-sandbox-agent' },
    executable: agent,
  })
  const body = {
    rustc: `[ "$2" = target-libdir ] && echo '${libdir}'\nexit 0`,
    rustup: `echo "$*" >> '${dir}/rustup.log'\n[ "$1" = target ] || exit 0\n${
      addFails ? 'echo "error: offline" >&2; exit 1' : `: > '${std}'`
    }`,
    cargo: `echo "$*" >> '${dir}/cargo.log'\necho '${artifact}'`,
  }
  for (const t of tools) fs.writeFileSync(path.join(dir, t), `#!/bin/sh\n${body[t] || 'exit 0'}\n`, { mode: 0o755 })
  return dir
}

function check(mode, tools, env = {}, opts = {}) {
  const r = cp.spawnSync(process.execPath, [script, mode], {
    env: { PATH: pathWith(tools, opts), HOME: tmpDir('kst-home-'), ...env },
    encoding: 'utf8',
    timeout: 10_000,
  })
  assert.equal(r.error, undefined, String(r.error))
  return r
}

const ALL = ['cargo', 'rustc', 'cc', 'bwrap', 'python3', 'tar', 'setpriv', 'prlimit', 'apt-get']

test('npm test without bubblewrap and python3: one line naming both and the apt-get command, exit 1', () => {
  const r = check(
    'test',
    ALL.filter((t) => t !== 'bwrap' && t !== 'python3'),
  )
  assert.equal(r.status, 1)
  assert.equal(r.stdout, '')
  const lines = r.stderr.split('\n').filter(Boolean)
  assert.equal(lines.length, 1, r.stderr)
  assert.match(lines[0], /npm test cannot start: bubblewrap \(bwrap\) and python3 not found on PATH/)
  assert.match(lines[0], /Install: (sudo )?apt-get install -y bubblewrap python3$/)
})

test('npm run build without Rust or a C compiler names them, with rustup', () => {
  const r = check('build', ['apt-get', 'tar'])
  assert.equal(r.status, 1)
  assert.match(
    r.stderr,
    /npm run build cannot start: a Rust toolchain \(cargo, rustc\) and a C compiler \(cc\) not found/,
  )
  assert.match(r.stderr, /apt-get install -y gcc && curl .*https:\/\/sh\.rustup\.rs \| sh\n$/)
})

test('nothing missing: silent, exit 0; with KERN_BIN (a real kern) bubblewrap is not needed', () => {
  for (const mode of ['build', 'test']) {
    const r = check(mode, ALL)
    assert.deepEqual([r.status, r.stdout, r.stderr], [0, '', ''], mode)
  }
  const r = check(
    'test',
    ALL.filter((t) => t !== 'bwrap'),
    { KERN_BIN: '/opt/kern/bin/kern' },
  )
  assert.deepEqual([r.status, r.stderr], [0, ''])
})

test('the check runs first in npm run build and in npm test (pretest)', () => {
  const { scripts } = JSON.parse(fs.readFileSync(path.join(repo, 'package.json'), 'utf8'))
  assert.match(scripts.build, /^node scripts\/prereqs\.js build && /)
  assert.match(scripts.pretest, /^node scripts\/prereqs\.js test && /)
})

// The machine agent is a static musl executable: a fresh rustup has the host's gnu target only.

test('no musl target and no rustup to add it: npm run build and npm test name it up front', () => {
  for (const mode of ['build', 'test']) {
    const r = check(mode, ALL, {}, { musl: false })
    assert.equal(r.status, 1, mode)
    const lines = r.stderr.split('\n').filter(Boolean)
    assert.equal(lines.length, 1, r.stderr)
    assert.ok(
      lines[0].includes(`cannot start: Rust has no ${TRIPLE} target (the machine agent's) and no rustup to add it.`),
      lines[0],
    )
    assert.match(lines[0], /Install: curl .*https:\/\/sh\.rustup\.rs \| sh \(the build then adds the target/)
  }
  // Named with the rest of what is missing, in one line.
  const r = check(
    'test',
    ALL.filter((t) => t !== 'bwrap'),
    {},
    { musl: false },
  )
  assert.ok(
    r.stderr.includes(`bubblewrap (bwrap) not found on PATH; Rust has no ${TRIPLE} target (the machine agent's)`),
    r.stderr,
  )
  assert.match(r.stderr, /Install: (sudo )?apt-get install -y bubblewrap && curl /)
})

test('no musl target but rustup: nothing is missing (the agent build adds the target)', () => {
  const r = check('build', [...ALL, 'rustup'], {}, { musl: false })
  assert.deepEqual([r.status, r.stderr], [0, ''])
})

/** Runs scripts/build-agent.js on a PATH of stubs, writing the agent into a temp dir. */
function buildAgentWith(tools, opts) {
  const bin = pathWith(tools, opts)
  const out = tmpDir('kst-agent-out-')
  const r = cp.spawnSync(process.execPath, [buildAgent, '--out', out], {
    env: { PATH: bin, HOME: tmpDir('kst-home-') },
    encoding: 'utf8',
    timeout: 10_000,
  })
  assert.equal(r.error, undefined, String(r.error))
  const log = (name) => {
    try {
      return fs.readFileSync(path.join(bin, name), 'utf8')
    } catch {
      return ''
    }
  }
  const arch = process.arch
  return {
    r,
    rustup: log('rustup.log'),
    cargo: log('cargo.log'),
    agent: path.join(out, `kern-sandbox-agent.linux-${arch}`),
  }
}

test('build-agent adds a missing musl target with rustup target add, says so on stderr, then builds', () => {
  const { r, rustup, cargo, agent } = buildAgentWith(['cargo', 'rustc', 'rustup'], { musl: false })
  assert.equal(r.status, 0, r.stderr)
  assert.ok(
    r.stderr.includes(
      `build-agent: the Rust target ${TRIPLE} is not installed; adding it: rustup target add ${TRIPLE}`,
    ),
    r.stderr,
  )
  assert.ok(rustup.split('\n').includes(`target add ${TRIPLE}`), rustup)
  assert.match(cargo, new RegExp(`^build -p kern-sandbox-agent --target ${TRIPLE} `))
  assert.ok(fs.existsSync(agent), 'the agent was copied out')
  assert.match(r.stdout, new RegExp(`kern-sandbox-agent\\.linux-${process.arch}: \\d+ bytes \\(${TRIPLE}\\)`))
})

test('build-agent with the target installed calls no rustup target add and prints nothing on stderr', () => {
  const { r, rustup, cargo } = buildAgentWith(['cargo', 'rustc', 'rustup'], { musl: true })
  assert.equal(r.status, 0, r.stderr)
  assert.equal(r.stderr, '')
  assert.doesNotMatch(rustup, /target add/)
  assert.match(cargo, /^build -p kern-sandbox-agent/)
})

test('build-agent stops before cargo when the target cannot be added: rustup fails, or there is none', () => {
  const failed = buildAgentWith(['cargo', 'rustc', 'rustup'], { musl: false, addFails: true })
  assert.equal(failed.r.status, 1)
  assert.ok(failed.rustup.includes(`target add ${TRIPLE}`), failed.rustup)
  assert.match(failed.r.stderr, new RegExp(`build-agent: rustup target add ${TRIPLE} failed \\(exit 1\\)`))
  assert.equal(failed.cargo, '', 'no build without the target')
  const none = buildAgentWith(['cargo', 'rustc'], { musl: false })
  assert.equal(none.r.status, 1)
  assert.ok(
    none.r.stderr.includes(`build-agent: the Rust target ${TRIPLE} is not installed, and there is no rustup to add it`),
    none.r.stderr,
  )
  assert.equal(none.cargo, '')
})
