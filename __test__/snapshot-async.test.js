'use strict'
// snapshotAsync()/restoreAsync(): the promise twins of the synchronous snapshot()/restore(). The
// same archive, limits, refusals and cleanup, off the event loop, stopped by an AbortSignal or by
// close().

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const cp = require('node:child_process')
const { kern, openSandbox, tmpDir } = require('./helpers')

const { Sandbox, SandboxError } = kern

/** A session for test `t` whose workspace holds `mib` MiB of random bytes in 8 files, plus a small
 * text file. */
async function filled(t, mib) {
  const s = await openSandbox(t, { timeoutS: 60 })
  const r = await s.run([
    'sh',
    '-c',
    `for i in 1 2 3 4 5 6 7 8; do head -c ${(mib << 20) / 8} /dev/urandom > blob$i; done; mkdir -p d && echo text > d/t.txt`,
  ])
  assert.equal(r.exitCode, 0, r.stderr)
  return s
}

/** Settles `p` into { value } or { error }, never throwing. */
const settle = (p) =>
  p.then(
    (value) => ({ value }),
    (error) => ({ error }),
  )
const leftovers = (dir) => fs.readdirSync(dir).filter((n) => n.endsWith('.partial'))

test('the twins return promises and make the same archive as the synchronous methods', async (t) => {
  const s = await filled(t, 2)
  const to = await openSandbox(t)
  const dir = tmpDir()
  const p = s.snapshotAsync(path.join(dir, 'a.tar.gz'))
  assert.ok(p instanceof Promise)
  assert.equal(await p, undefined)
  s.snapshot(path.join(dir, 's.tar.gz'))
  const list = (f) =>
    cp
      .execFileSync('tar', ['tzf', path.join(dir, f)], { encoding: 'utf8' })
      .split('\n')
      .sort()
  assert.deepEqual(list('a.tar.gz'), list('s.tar.gz'))
  assert.equal(await to.restoreAsync(path.join(dir, 'a.tar.gz')), undefined)
  assert.equal((await to.readFile('d/t.txt')).toString(), 'text\n')
  assert.ok((await to.readFile('blob3')).equals(await s.readFile('blob3')))
})

test('the event loop keeps running while they work; the synchronous ones block it', async (t) => {
  const s = await filled(t, 64)
  const to = await openSandbox(t)
  const dir = tmpDir()
  const dest = path.join(dir, 'big.tar.gz')
  let turns = 0
  const timer = setInterval(() => turns++, 1)
  try {
    for (const job of [() => s.snapshotAsync(dest), () => to.restoreAsync(dest)]) {
      turns = 0
      let done = false
      const p = job().then(() => (done = true))
      while (!done && turns < 3) await new Promise((r) => setTimeout(r, 1))
      assert.equal(done, false, 'the event loop turned while the job was still running')
      await p
    }
    turns = 0
    s.snapshot(dest)
    assert.equal(turns, 0, 'snapshot() kept the event loop waiting, as in 0.1.1')
  } finally {
    clearInterval(timer)
  }
})

test('the same limits and refusals, as rejections, with no partial archive left', async (t) => {
  const s = await filled(t, 2)
  const to = await openSandbox(t)
  const dir = tmpDir()
  const dest = path.join(dir, 'capped.tar.gz')
  await assert.rejects(
    s.snapshotAsync(dest, { maxBytes: 1 << 20 }),
    (e) => e instanceof SandboxError && /more than 1048576 bytes/.test(e.message),
  )
  assert.deepEqual(fs.readdirSync(dir), [])
  await assert.rejects(s.snapshotAsync(path.join(dir, 'no-such-dir', 'x.tar.gz')), SandboxError)
  await assert.rejects(s.snapshotAsync(''), SandboxError)
  await assert.rejects(s.snapshotAsync(dest, { maxBytes: -1 }), SandboxError)
  await assert.rejects(s.snapshotAsync(5), TypeError)
  await assert.rejects(to.restoreAsync(path.join(dir, 'missing.tar.gz')), SandboxError)
  const notGz = path.join(dir, 'plain.txt')
  fs.writeFileSync(notGz, 'not an archive')
  await assert.rejects(to.restoreAsync(notGz), (e) => e instanceof SandboxError && /malformed/.test(e.message))
  s.snapshot(dest)
  await assert.rejects(
    to.restoreAsync(dest, { maxBytes: 1 << 20 }),
    (e) => e instanceof SandboxError && /ceiling/.test(e.message),
  )
  const evil = path.join(dir, 'evil.tar.gz')
  cp.execFileSync('python3', [
    '-c',
    `
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w:gz") as t:
    ti = tarfile.TarInfo("../escape.txt"); ti.size = 1
    t.addfile(ti, io.BytesIO(b"x"))
`,
    evil,
  ])
  await assert.rejects(to.restoreAsync(evil), (e) => e instanceof SandboxError && /unsafe path/.test(e.message))
  assert.ok(!fs.existsSync(path.join(path.dirname(to.workspacePath), 'escape.txt')))
  const closed = new Sandbox()
  await assert.rejects(
    closed.snapshotAsync(path.join(dir, 'c.tar.gz')),
    (e) => e instanceof SandboxError && /open the Sandbox first/.test(e.message),
  )
})

test('an AbortSignal stops them: rejects with signal.reason, no archive at dest', async (t) => {
  const s = await filled(t, 16)
  const to = await openSandbox(t)
  const dir = tmpDir()
  const dest = path.join(dir, 'snap.tar.gz')
  // Already aborted: nothing starts.
  const gone = AbortSignal.abort()
  await assert.rejects(s.snapshotAsync(dest, { signal: gone }), (e) => e === gone.reason)
  await assert.rejects(to.restoreAsync(dest, { signal: gone }), (e) => e === gone.reason)
  // Aborted once started.
  const ac = new AbortController()
  const p = s.snapshotAsync(dest, { signal: ac.signal })
  const reason = new Error('changed my mind')
  ac.abort(reason)
  await assert.rejects(p, (e) => e === reason)
  assert.deepEqual(fs.readdirSync(dir), [], 'no archive and no partial file')
  // The default reason is an AbortError, as with fetch.
  s.snapshot(dest)
  const ac2 = new AbortController()
  const q = to.restoreAsync(dest, { signal: ac2.signal })
  ac2.abort()
  await assert.rejects(q, (e) => e.name === 'AbortError')
  // The session is fine afterwards.
  await to.restoreAsync(dest)
  assert.equal((await to.readFile('d/t.txt')).toString(), 'text\n')
  await assert.rejects(s.snapshotAsync(dest, { signal: 'soon' }), TypeError)
})

test('close() stops a running snapshotAsync and still removes the temp workspace', async (t) => {
  const s = await filled(t, 64)
  const dir = tmpDir()
  const dest = path.join(dir, 'snap.tar.gz')
  const ws = s.workspacePath
  const job = settle(s.snapshotAsync(dest))
  await new Promise((r) => setTimeout(r, 5))
  await s.close()
  const { value, error } = await job
  if (error) {
    assert.ok(error instanceof SandboxError, String(error))
    assert.deepEqual(fs.readdirSync(dir), [])
  } else {
    assert.equal(value, undefined)
    cp.execFileSync('tar', ['tzf', dest])
  }
  assert.deepEqual(leftovers(dir), [])
  assert.ok(!fs.existsSync(ws), 'the temp workspace is gone')
})
