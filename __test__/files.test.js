'use strict'
// Workspace file I/O: round trips, containment against what a box plants (symlinks, FIFOs, `..`),
// listFiles, result.files, trackFiles, readFile maxBytes; both the openat2 path and the fallback.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { kern, openSandbox, tmpDir, runNode, lastJson, within } = require('./helpers')

const { Sandbox, SandboxError } = kern

let sbx
let outside
test.before(async () => {
  sbx = await new Sandbox().open()
  outside = tmpDir('kst-outside-')
  fs.writeFileSync(path.join(outside, 'secret'), 'host secret')
})
test.after(async () => {
  await sbx.close()
})

test('writeFile/readFile round trip: Buffer (all byte values) and string', async () => {
  const bin = Buffer.from(Array.from({ length: 4096 }, (_, i) => i % 256))
  await sbx.writeFile('bin.dat', bin)
  const back = await sbx.readFile('bin.dat')
  assert.ok(Buffer.isBuffer(back))
  assert.ok(back.equals(bin))
  await sbx.writeFile('text.txt', 'héllo wörld ✓\n')
  assert.equal((await sbx.readFile('text.txt')).toString('utf8'), 'héllo wörld ✓\n')
  await sbx.writeFile('text.txt', 'short')
  assert.equal((await sbx.readFile('text.txt')).toString(), 'short', 'overwrite truncates')
  await sbx.writeFile('empty', '')
  assert.equal((await sbx.readFile('empty')).length, 0)
})

test('the box sees host writes and the host reads box writes', async () => {
  await sbx.writeFile('in.txt', 'from host')
  const r = await sbx.runCode('print(open("in.txt").read())\nopen("out.txt", "w").write("from box")')
  assert.equal(r.stdout, 'from host\n')
  assert.equal((await sbx.readFile('out.txt')).toString(), 'from box')
})

test('writeFile creates parent directories', async () => {
  await sbx.writeFile('a/b/c/deep.txt', 'deep')
  assert.equal((await sbx.readFile('a/b/c/deep.txt')).toString(), 'deep')
  const r = await sbx.runCode('print(open("a/b/c/deep.txt").read())')
  assert.equal(r.stdout, 'deep\n')
})

test('`..` escapes are refused; absolute paths stay inside the workspace', async () => {
  for (const p of ['../x', 'a/../../x', '../../etc/passwd', './../x']) {
    await assert.rejects(sbx.writeFile(p, 'x'), SandboxError, `write ${p}`)
    await assert.rejects(sbx.readFile(p), SandboxError, `read ${p}`)
  }
  assert.ok(!fs.existsSync(path.join(path.dirname(sbx.workspacePath), 'x')))
  // "/etc/passwd" is workspace-relative: it must never read the host's file
  let got = null
  try {
    got = await sbx.readFile('/etc/passwd')
  } catch (e) {
    assert.ok(e instanceof SandboxError)
  }
  if (got !== null) assert.notEqual(got.toString(), fs.readFileSync('/etc/passwd', 'utf8'))
  // `..` that stays inside is fine
  await sbx.writeFile('a/../inside.txt', 'in')
  assert.equal((await sbx.readFile('inside.txt')).toString(), 'in')
})

test('a symlinked directory planted by the box is refused (read and write), nothing written outside', async () => {
  const r = await sbx.run(['sh', '-c', `ln -s /etc leak && ln -s ${outside} out`])
  assert.equal(r.exitCode, 0, r.stderr)
  await assert.rejects(sbx.readFile('leak/passwd'), SandboxError)
  await assert.rejects(sbx.writeFile('leak/x', 'pwned'), SandboxError)
  await assert.rejects(sbx.readFile('out/secret'), SandboxError)
  await assert.rejects(sbx.writeFile('out/pwned', 'pwned'), SandboxError)
  await assert.rejects(sbx.writeFile('out/sub/pwned', 'pwned'), SandboxError)
  assert.ok(!fs.existsSync('/etc/x'))
  assert.deepEqual(fs.readdirSync(outside), ['secret'], 'nothing was written outside')
})

test('a symlink leaf planted by the box is refused (read and write)', async () => {
  const r = await sbx.run(['sh', '-c', `ln -s ${outside}/secret leaf && ln -s /etc/passwd pw`])
  assert.equal(r.exitCode, 0, r.stderr)
  await assert.rejects(sbx.readFile('leaf'), SandboxError)
  await assert.rejects(sbx.readFile('pw'), SandboxError)
  await assert.rejects(sbx.writeFile('leaf', 'clobbered'), SandboxError)
  assert.equal(fs.readFileSync(path.join(outside, 'secret'), 'utf8'), 'host secret')
})

test('a FIFO planted by the box makes readFile/writeFile reject quickly (no hang)', async () => {
  const r = await sbx.run(['sh', '-c', 'mkfifo p && mkdir -p d && mkfifo d/q'])
  assert.equal(r.exitCode, 0, r.stderr)
  await within(assert.rejects(sbx.readFile('p'), SandboxError), 5000, 'readFile on a FIFO')
  await within(assert.rejects(sbx.writeFile('p', 'x'), SandboxError), 5000, 'writeFile on a FIFO')
  await within(assert.rejects(sbx.readFile('d/q'), SandboxError), 5000, 'readFile on a nested FIFO')
  // the session still works afterwards
  const again = await within(sbx.runCode('print("alive")'), 30_000, 'a call after the FIFO')
  assert.equal(again.stdout, 'alive\n')
})

test('reading a directory is a SandboxError', async () => {
  await assert.rejects(sbx.readFile('a'), SandboxError)
  await assert.rejects(sbx.writeFile('a', 'x'), SandboxError)
})

test('listFiles: regular files only, .deps and symlinks excluded, subdir works', async (t) => {
  const s = await openSandbox(t)
  await s.writeFile('one.txt', '1')
  await s.writeFile('dir/two.txt', '22')
  await s.writeFile('.deps/pkg/mod.py', 'x = 1')
  await s.run(['sh', '-c', 'ln -s one.txt link.txt && ln -s /etc etclink && mkfifo fifo && ln -s /etc dir/esc'])
  const all = await s.listFiles()
  assert.deepEqual(all.map((f) => [f.path, f.size]).sort(), [
    ['dir/two.txt', 2],
    ['one.txt', 1],
  ])
  for (const f of all) assert.equal(typeof f.change, 'string')
  const sub = await s.listFiles('dir')
  assert.deepEqual(
    sub.map((f) => f.path),
    ['dir/two.txt'],
  )
  await assert.rejects(s.listFiles('../'), SandboxError)
  // a symlinked subdir is refused as readFile/writeFile refuse one, naming the path
  for (const p of ['etclink', 'dir/esc', 'dir/esc/ssl']) {
    await assert.rejects(
      s.listFiles(p),
      (e) => e instanceof SandboxError && e.message.includes(JSON.stringify(p)) && /symlink/.test(e.message),
      p,
    )
  }
})

test('listFiles of a subdir that does not exist (yet) is [] as in 0.1.1', async (t) => {
  // 0.1.1 walks the subdir and skips what it cannot read: agent code that lists an output dir
  // before the code created it gets [] rather than an exception.
  const s = await openSandbox(t)
  await s.writeFile('file.txt', 'x')
  assert.deepEqual(await s.listFiles('out'), [])
  assert.deepEqual(await s.listFiles('no/such/dir'), [])
  await s.runCode('import os\nos.makedirs("out")\nopen("out/r.txt", "w").write("r")')
  assert.deepEqual(
    (await s.listFiles('out')).map((f) => f.path),
    ['out/r.txt'],
  )
})

test('result.files reports created and modified files (not .deps, not untouched)', async (t) => {
  const s = await openSandbox(t)
  await s.writeFile('keep.txt', 'same')
  await s.writeFile('change.txt', 'old')
  const r = await s.runCode(
    'import os\nopen("change.txt", "w").write("new content")\nos.makedirs("sub", exist_ok=True)\nopen("sub/new.txt", "w").write("abc")\nos.makedirs(".deps/x", exist_ok=True)\nopen(".deps/x/m.py", "w").write("1")',
  )
  assert.equal(r.exitCode, 0, r.stderr)
  const files = [...r.files].sort((a, b) => a.path.localeCompare(b.path))
  assert.deepEqual(files, [
    { path: 'change.txt', size: 11, change: 'modified' },
    { path: 'sub/new.txt', size: 3, change: 'created' },
  ])
  const none = await s.runCode('print("no writes")')
  assert.deepEqual(none.files, [])
})

test('result.files across calls: host writes between calls, moved trees, deletes, same-size rewrites', async (t) => {
  const s = await openSandbox(t)
  const sorted = (r) => [...r.files].map((f) => `${f.change}:${f.path}`).sort()
  await s.writeFile('d/a.txt', 'a')
  let r = await s.run(['sh', '-c', 'mkdir -p d/e && echo x > d/e/b.txt'])
  assert.deepEqual(sorted(r), ['created:d/e/b.txt'])
  await s.writeFile('host.txt', 'written by the host between calls')
  r = await s.run(['sh', '-c', 'mv d m && echo y > m/e/b.txt && rm m/a.txt && mkdir d && echo z > d/n.txt'])
  assert.deepEqual(sorted(r), ['created:d/n.txt', 'created:m/e/b.txt'])
  // The moved tree is still tracked under its new name; a same-size rewrite is a modification.
  r = await s.run(['sh', '-c', 'sleep 0.01; echo q > m/e/b.txt; touch host.txt'])
  assert.deepEqual(sorted(r), ['modified:host.txt', 'modified:m/e/b.txt'])
  r = await s.run(['true'])
  assert.deepEqual(r.files, [])
})

test('result.files of overlapping calls: each sees what changed while it ran', async (t) => {
  const s = await openSandbox(t)
  const slow = s.run(['sh', '-c', 'echo 1 > slow.txt; sleep 1'])
  await new Promise((res) => setTimeout(res, 300))
  const fast = await s.run(['sh', '-c', 'echo 2 > fast.txt'])
  assert.deepEqual(
    fast.files.map((f) => f.path),
    ['fast.txt'],
  )
  const r = await slow
  assert.deepEqual(r.files.map((f) => f.path).sort(), ['fast.txt', 'slow.txt'])
})

test('trackFiles:false reports no files', async (t) => {
  const s = await openSandbox(t, { trackFiles: false })
  const r = await s.runCode('open("made.txt", "w").write("x")')
  assert.equal(r.exitCode, 0)
  assert.deepEqual(r.files, [])
  assert.equal((await s.readFile('made.txt')).toString(), 'x')
})

test('readFile maxBytes refuses larger files, allows up to the limit', async () => {
  await sbx.writeFile('hundred.bin', Buffer.alloc(100, 7))
  assert.equal((await sbx.readFile('hundred.bin', { maxBytes: 100 })).length, 100)
  assert.equal((await sbx.readFile('hundred.bin', { maxBytes: 1e9 })).length, 100)
  await assert.rejects(sbx.readFile('hundred.bin', { maxBytes: 99 }), SandboxError)
  await assert.rejects(sbx.readFile('hundred.bin', { maxBytes: 0 }), SandboxError)
  assert.equal((await sbx.readFile('empty', { maxBytes: 0 })).length, 0)
})

// --- the same refusals through openat2 and through the forced openat(O_NOFOLLOW) fallback ------

const BATTERY = `
const fs = require('fs')
const kern = require(REPO)
const outside = process.argv[2]
async function attempt(f) {
  let t
  try { const v = await Promise.race([f(), new Promise((_, j) => { t = setTimeout(() => j(new Error('HANG')), 5000) })]); return 'ok:' + (Buffer.isBuffer(v) ? v.toString() : String(v)) }
  catch (e) { return e.message === 'HANG' ? 'HANG' : e.name }
  finally { clearTimeout(t) }
}
async function main() {
  const s = await new kern.Sandbox().open()
  const r = await s.run(['sh', '-c', 'ln -s /etc leak && ln -s ' + outside + ' out && ln -s ' + outside + '/secret leaf && mkfifo p && mkdir real && ln -s .. real/up'])
  const res = { setup: r.exitCode }
  res.roundTrip = await attempt(async () => { await s.writeFile('x/y/z.txt', 'deep'); return s.readFile('x/y/z.txt') })
  res.readDirLink = await attempt(() => s.readFile('leak/passwd'))
  res.writeDirLink = await attempt(() => s.writeFile('out/pwned', 'x'))
  res.writeNestedDirLink = await attempt(() => s.writeFile('out/a/b', 'x'))
  res.readLeaf = await attempt(() => s.readFile('leaf'))
  res.writeLeaf = await attempt(() => s.writeFile('leaf', 'clobber'))
  res.readUpLink = await attempt(() => s.readFile('real/up/x/y/z.txt'))
  res.dotdot = await attempt(() => s.readFile('../x'))
  res.readFifo = await attempt(() => s.readFile('p'))
  res.writeFifo = await attempt(() => s.writeFile('p', 'x'))
  res.list = (await s.listFiles()).map((f) => f.path).sort().join(',')
  res.listDirLink = await attempt(() => s.listFiles('out'))
  res.listUpLink = await attempt(() => s.listFiles('real/up/x'))
  res.listMissing = await attempt(() => s.listFiles('real/none'))
  res.outside = fs.readdirSync(outside).join(',') + '|' + fs.readFileSync(outside + '/secret', 'utf8')
  await s.close()
  console.log(JSON.stringify(res))
}
main().catch((e) => { console.log(JSON.stringify({ crashed: String(e && e.stack) })) })
`

const EXPECTED = {
  setup: 0,
  roundTrip: 'ok:deep',
  readDirLink: 'SandboxError',
  writeDirLink: 'SandboxError',
  writeNestedDirLink: 'SandboxError',
  readLeaf: 'SandboxError',
  writeLeaf: 'SandboxError',
  readUpLink: 'SandboxError',
  dotdot: 'SandboxError',
  readFifo: 'SandboxError',
  writeFifo: 'SandboxError',
  list: 'x/y/z.txt',
  listDirLink: 'SandboxError',
  listUpLink: 'SandboxError',
  listMissing: 'ok:',
  outside: 'secret|host secret',
}

test('containment battery through openat2 (default path)', async () => {
  const out = tmpDir('kst-outside-')
  fs.writeFileSync(path.join(out, 'secret'), 'host secret')
  const r = await runNode(BATTERY, { args: [out], env: { KERN_SANDBOX_NO_OPENAT2: undefined }, timeoutMs: 60_000 })
  assert.equal(r.code, 0, r.stderr)
  assert.deepEqual(lastJson(r.stdout), EXPECTED)
})

test('containment battery through the forced openat(O_NOFOLLOW) fallback (KERN_SANDBOX_NO_OPENAT2=1)', async () => {
  const out = tmpDir('kst-outside-')
  fs.writeFileSync(path.join(out, 'secret'), 'host secret')
  const r = await runNode(BATTERY, { args: [out], env: { KERN_SANDBOX_NO_OPENAT2: '1' }, timeoutMs: 60_000 })
  assert.equal(r.code, 0, r.stderr)
  assert.deepEqual(lastJson(r.stdout), EXPECTED)
})
