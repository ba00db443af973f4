'use strict'
// What a box can do to the host side's walks and file tracking: a directory the host may not
// enter (as a non-root Node), and a tree wider than the process's fd limit. Each case runs in a
// child Node under setpriv / prlimit, with a do-nothing kern that writes one file when told to.

const test = require('node:test')
const assert = require('node:assert/strict')
const cp = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { lastJson } = require('./helpers')

const repo = path.resolve(__dirname, '..')

/** A world-readable copy of the package (the checkout may sit in a private home directory). */
function publicCopy() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kst-limits-'))
  fs.chmodSync(dir, 0o755)
  const pkg = path.join(dir, 'pkg')
  fs.mkdirSync(pkg, { mode: 0o755 })
  for (const f of fs.readdirSync(repo)) {
    if (f === 'package.json' || /^(index|binding)\.js$/.test(f) || f.endsWith('.node')) {
      fs.copyFileSync(path.join(repo, f), path.join(pkg, f))
      fs.chmodSync(path.join(pkg, f), 0o755)
    }
  }
  fs.cpSync(path.join(repo, 'lib'), path.join(pkg, 'lib'), { recursive: true })
  fs.chmodSync(path.join(pkg, 'lib'), 0o755)
  // Every file readable and every directory (lib/doctor, which lib/sandbox.js loads) enterable.
  for (const f of fs.readdirSync(path.join(pkg, 'lib'), { recursive: true })) {
    const p = path.join(pkg, 'lib', f)
    fs.chmodSync(p, fs.statSync(p).isDirectory() ? 0o755 : 0o644)
  }
  // A kern that does nothing but, when $FAKE_WS is set, write one file into the workspace.
  const kern = path.join(dir, 'kern')
  fs.writeFileSync(kern, '#!/bin/sh\n[ -n "$FAKE_WS" ] && echo new > "$FAKE_WS/open/new.txt"\nexit 0\n', {
    mode: 0o755,
  })
  return { dir, pkg, kern }
}

function runWrapped(wrapper, source, { kern, dir }) {
  const file = path.join(dir, 'script.js')
  fs.writeFileSync(file, source, { mode: 0o644 })
  const [cmd, ...args] = wrapper
  const r = cp.spawnSync(cmd, [...args, process.execPath, file], {
    cwd: dir,
    env: { ...process.env, KERN_BIN: kern, TMPDIR: os.tmpdir() },
    encoding: 'utf8',
    timeout: 120_000,
  })
  return { code: r.status, out: r.stdout, err: r.stderr + (r.error ? String(r.error) : '') }
}

const script = (pkg, body) => `
const fs = require('fs'), path = require('path')
const { Sandbox, SandboxError } = require(${JSON.stringify(pkg)})
async function main() {
  // The fake kern writes into the workspace on every invocation: no boxes started ahead.
  const s = await new Sandbox({ prewarm: 0 }).open()
  const ws = s.workspacePath
  const out = {}
  try {
${body}
  } finally {
    await s.close()
  }
  console.log(JSON.stringify(out))
}
main().catch((e) => { console.error(e); process.exit(1) })
`

test('a directory the host may not enter (non-root Node): calls keep working, listFiles skips it, snapshot refuses', (t) => {
  if (process.getuid() !== 0) return t.skip('needs root to run the child as another user')
  const probe = cp.spawnSync('setpriv', [
    '--reuid=65534',
    '--regid=65534',
    '--clear-groups',
    process.execPath,
    '-e',
    '0',
  ])
  if (probe.status !== 0) return t.skip(`uid 65534 cannot run ${process.execPath} here`)
  const { dir, pkg, kern } = publicCopy()
  const body = `
    await s.writeFile('open/a.txt', 'a')
    await s.writeFile('locked/b.txt', 'b')
    await s.run(['true'])
    fs.chmodSync(path.join(ws, 'locked'), 0)
    process.env.FAKE_WS = ws
    const r = await s.run(['true'])
    delete process.env.FAKE_WS
    out.exit = r.exitCode
    out.files = r.files.map((f) => f.change + ':' + f.path)
    out.listed = (await s.listFiles()).map((f) => f.path).sort()
    try { s.snapshot(path.join(ws, '..', 'snap.tar.gz')); out.snapshot = 'ok' } catch (e) { out.snapshot = e instanceof SandboxError ? 'SandboxError' : String(e) }
    const again = await s.run(['true'])
    out.again = again.exitCode
    fs.chmodSync(path.join(ws, 'locked'), 0o755)
`
  const r = runWrapped(['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'], script(pkg, body), {
    dir,
    kern,
  })
  assert.equal(r.code, 0, r.err)
  assert.deepEqual(lastJson(r.out), {
    exit: 0,
    files: ['created:open/new.txt'],
    listed: ['open/a.txt', 'open/new.txt'],
    snapshot: 'SandboxError',
    again: 0,
  })
  fs.rmSync(dir, { recursive: true, force: true })
})

test('a tree wider than the fd limit: tracking, listFiles, snapshot and restore see every file', () => {
  const { dir, pkg, kern } = publicCopy()
  const body = `
    for (let i = 0; i < 1500; i++) {
      fs.mkdirSync(path.join(ws, 'd' + i))
      fs.writeFileSync(path.join(ws, 'd' + i, 'f'), String(i))
    }
    fs.mkdirSync(path.join(ws, 'open'))
    await s.run(['true'])
    process.env.FAKE_WS = ws
    const r = await s.run(['true'])
    delete process.env.FAKE_WS
    out.files = r.files.map((f) => f.change + ':' + f.path)
    out.listed = (await s.listFiles()).length
    const snap = path.join(ws, '..', 'wide.tar.gz')
    s.snapshot(snap)
    fs.rmSync(path.join(ws, 'd7'), { recursive: true })
    s.restore(snap)
    out.restored = fs.readFileSync(path.join(ws, 'd7', 'f'), 'utf8')
    out.after = (await s.listFiles()).length
`
  const r = runWrapped(['prlimit', '--nofile=128:128'], script(pkg, body), { dir, kern })
  assert.equal(r.code, 0, r.err)
  assert.deepEqual(lastJson(r.out), { files: ['created:open/new.txt'], listed: 1501, restored: '7', after: 1501 })
  fs.rmSync(dir, { recursive: true, force: true })
})
