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

/** A PATH of one directory holding node and stubs of `tools` (a stub apt-get picks the hint). */
function pathWith(tools) {
  const dir = tmpDir('kst-path-')
  fs.symlinkSync(process.execPath, path.join(dir, 'node'))
  for (const t of tools) fs.writeFileSync(path.join(dir, t), '#!/bin/sh\nexit 0\n', { mode: 0o755 })
  return dir
}

function check(mode, tools, env = {}) {
  const r = cp.spawnSync(process.execPath, [script, mode], {
    env: { PATH: pathWith(tools), HOME: tmpDir('kst-home-'), ...env },
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
