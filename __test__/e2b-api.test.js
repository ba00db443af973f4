'use strict'
// kern-sandbox/e2b against what E2B's own SDK tests (`e2b` 2.5x, packages/js-sdk/tests) hold it
// to: list order and errors, absolute symlink targets, write's errors and metadata checks, the
// wording when a sandbox is killed mid-command, Sandbox.getInfo, connect's timeout, debug-mode
// connect, and getMetrics time ranges.

const test = require('node:test')
const assert = require('node:assert/strict')
require('./helpers') // KERN_BIN: a real kern, or the stand-in
const { Sandbox, InvalidArgumentError, SandboxNotFoundError, TimeoutError, FileType } = require('kern-sandbox/e2b')

let sbx
test.before(async () => {
  sbx = await Sandbox.create()
})
test.after(async () => {
  await sbx.kill()
})

test('list: depth first, each directory before what is under it, names sorted; depth < 1 in E2B words', async () => {
  for (const d of ['t/b', 't/a/y', 't/a/x', 't/b/z']) await sbx.files.makeDir(d)
  await sbx.files.write('t/c.txt', 'c')
  await sbx.files.write('t/a.txt', 'a')
  const names = async (depth) => (await sbx.files.list('t', { depth })).map((e) => e.path.slice('/home/user/t/'.length))
  assert.deepEqual(await names(1), ['a', 'a.txt', 'b', 'c.txt'])
  assert.deepEqual(await names(2), ['a', 'a/x', 'a/y', 'a.txt', 'b', 'b/z', 'c.txt'])
  assert.deepEqual(await names(5), await names(2))
  for (const depth of [0, -1, 1.5]) {
    await assert.rejects(sbx.files.list('t', { depth }), (e) => {
      assert.ok(e instanceof InvalidArgumentError)
      assert.match(e.message, /depth should be at least one/)
      return true
    })
  }
})

test("a symlink's target is absolute: a relative one is resolved from the link's directory", async () => {
  await sbx.files.write('links/target.txt', 'x')
  await sbx.commands.run(
    'cd /home/user/links && ln -s target.txt rel && ln -s ../links/target.txt up && ln -s /etc abs',
  )
  const info = await sbx.files.getInfo('links/rel')
  assert.equal(info.type, FileType.SYMLINK)
  assert.equal(info.symlinkTarget, '/home/user/links/target.txt')
  const listed = Object.fromEntries((await sbx.files.list('links')).map((e) => [e.name, e.symlinkTarget]))
  assert.deepEqual(listed, {
    abs: '/etc',
    rel: '/home/user/links/target.txt',
    'target.txt': undefined,
    up: '/home/user/links/target.txt',
  })
})

test("write: no path, or a path and an array, are InvalidArgumentErrors in E2B's words", async () => {
  for (const p of [undefined, null, '']) {
    await assert.rejects(sbx.files.write(p, 'x'), (e) => {
      assert.ok(e instanceof InvalidArgumentError)
      assert.match(e.message, /Path or files are required/)
      return true
    })
  }
  await assert.rejects(sbx.files.write('/tmp/both', [{ path: 'one.txt', data: 'x' }]), (e) => {
    assert.ok(e instanceof InvalidArgumentError)
    assert.match(e.message, /Cannot specify both path and array of files/)
    return true
  })
  assert.equal(await sbx.files.exists('/tmp/both'), false)
  assert.deepEqual(await sbx.files.write([]), [])
})

test('metadata: keys are header tokens, values printable ASCII; a rejected write creates nothing', async () => {
  const bad = [{ 'bad key': 'v' }, { '': 'v' }, { 'k\n': 'v' }, { good: 'bad\nvalue' }, { good: 'v\n' }, { good: 'é' }]
  for (const metadata of bad) {
    await assert.rejects(sbx.files.write('meta-bad.txt', 'x', { metadata }), InvalidArgumentError)
    await assert.rejects(
      sbx.files.writeFiles([{ path: 'meta-bad.txt', data: 'x' }], { metadata }),
      InvalidArgumentError,
    )
  }
  assert.equal(await sbx.files.exists('meta-bad.txt'), false)
  const ok = { "a-b_c.d~!#$%&'*+^`|": 'any printable: ~ "quoted" ' }
  assert.deepEqual((await sbx.files.write('meta-ok.txt', 'x', { metadata: ok })).metadata, ok)
})

test("a command cut short by kill() rejects with E2B's TimeoutError wording", async () => {
  const other = await Sandbox.create()
  const cmd = await other.commands.run('sleep 60', { background: true })
  await other.kill()
  const err = await cmd.wait().catch((e) => e)
  assert.ok(err instanceof TimeoutError)
  assert.match(err.message, /sandbox was killed or reached its end of life/)
  assert.match(err.message, /sandbox was killed while the request was in progress/)
})

test('Sandbox.getInfo(id) is getInfo() of the live sandbox; an unknown id is SandboxNotFoundError', async () => {
  const info = await Sandbox.getInfo(sbx.sandboxId)
  assert.equal(info.sandboxId, sbx.sandboxId)
  assert.deepEqual(info.endAt, (await sbx.getInfo()).endAt)
  await assert.rejects(Sandbox.getInfo('kern-none'), SandboxNotFoundError)
  await assert.rejects(Sandbox.getMetrics('kern-none'), SandboxNotFoundError)
  await assert.rejects(Sandbox.setTimeout('kern-none', 1000), SandboxNotFoundError)
})

test('connect({ timeoutMs }) extends the lifetime, never shortens it; Sandbox.setTimeout sets it', async () => {
  const before = (await sbx.getInfo()).endAt.getTime()
  assert.equal(await Sandbox.connect(sbx.sandboxId, { timeoutMs: 1000 }), sbx)
  assert.equal((await sbx.getInfo()).endAt.getTime(), before)
  assert.equal(await sbx.connect({ timeoutMs: 3_600_000 }), sbx)
  const extended = (await sbx.getInfo()).endAt.getTime()
  assert.ok(extended > before)
  await assert.rejects(sbx.connect({ timeoutMs: -1 }), InvalidArgumentError)
  await Sandbox.setTimeout(sbx.sandboxId, 300_000)
  assert.ok((await sbx.getInfo()).endAt.getTime() < extended)
})

test('connect(id, { debug: true }) gives a sandbox under that id; connect() on it is the same object', async () => {
  const id = `debug-${process.pid}`
  const d = await Sandbox.connect(id, { debug: true, apiKey: 'ignored' })
  try {
    assert.equal(d.sandboxId, id)
    assert.equal(await d.connect(), d)
    assert.equal(await Sandbox.connect(id, { debug: true }), d)
    assert.equal((await d.commands.run('echo hi')).stdout, 'hi\n')
  } finally {
    await d.kill()
  }
  await assert.rejects(Sandbox.connect(id), SandboxNotFoundError)
})

test('getMetrics({ start, end }): the samples taken in that range, none before the sandbox started', async () => {
  const t0 = new Date()
  const [first] = await sbx.getMetrics({ start: t0 })
  assert.ok(first.timestamp >= t0)
  const all = await sbx.getMetrics()
  assert.ok(all.length >= 2)
  assert.ok(all.every((m, i) => i === 0 || m.timestamp >= all[i - 1].timestamp))
  const t1 = new Date()
  assert.ok((await sbx.getMetrics({ start: t0, end: t1 })).every((m) => m.timestamp >= t0 && m.timestamp <= t1))
  const hourAgo = new Date(Date.now() - 3_600_000)
  assert.deepEqual(await sbx.getMetrics({ start: hourAgo, end: new Date(hourAgo.getTime() + 60_000) }), [])
  await assert.rejects(sbx.getMetrics({ start: t1, end: t0 }), InvalidArgumentError)
  await assert.rejects(sbx.getMetrics({ start: 'yesterday' }), InvalidArgumentError)
})

test("metadata is the file's user.e2b.* extended attributes: a program's are read, rename keeps, overwrite clears", async () => {
  await sbx.files.write('x/m.txt', 'x')
  const abs = '/home/user/x/m.txt'
  await sbx.commands.run(`python3 -c "import os; os.setxattr('${abs}', 'user.e2b.author', b'mish')"`)
  assert.deepEqual((await sbx.files.getInfo('x/m.txt')).metadata, { author: 'mish' })
  await sbx.files.write('x/m.txt', 'y', { metadata: { Purpose: 'up' } })
  // What the write gives replaces what the file had, keys lowercased as E2B's.
  assert.deepEqual((await sbx.files.getInfo(abs)).metadata, { purpose: 'up' })
  const inBox = await sbx.commands.run(
    `python3 -c "import os; print(os.getxattr('${abs}', 'user.e2b.purpose').decode())"`,
  )
  assert.equal(inBox.stdout.trim(), 'up')
  assert.deepEqual((await sbx.files.rename('x/m.txt', 'x/n.txt')).metadata, { purpose: 'up' })
  assert.deepEqual((await sbx.files.list('x')).find((e) => e.name === 'n.txt').metadata, { purpose: 'up' })
  // A command that moves the file carries them too.
  await sbx.commands.run('mv /home/user/x/n.txt /tmp/n.txt')
  assert.deepEqual((await sbx.files.getInfo('/tmp/n.txt')).metadata, { purpose: 'up' })
  await sbx.files.write('/tmp/n.txt', 'z')
  assert.equal((await sbx.files.getInfo('/tmp/n.txt')).metadata, undefined)
})

test('what files.write and makeDir create is owned by the user commands run as; user: "root" gives it to root', async () => {
  const who = (await sbx.commands.run('id -un')).stdout.trim()
  await sbx.files.write('own/a/f.txt', 'f')
  await sbx.files.makeDir('own/d/e')
  for (const p of ['own', 'own/a', 'own/a/f.txt', 'own/d', 'own/d/e']) {
    const info = await sbx.files.getInfo(p)
    assert.equal(info.owner, who, p)
    assert.equal(info.group, (await sbx.commands.run('id -gn')).stdout.trim(), p)
  }
  await sbx.files.write('/tmp/root-owned.txt', 'r', { user: 'root' })
  assert.equal((await sbx.files.getInfo('/tmp/root-owned.txt')).owner, 'root')
  assert.equal((await sbx.commands.run('id -un', { user: 'root' })).stdout.trim(), 'root')
  await assert.rejects(sbx.files.write('/tmp/u.txt', 'u', { user: '' }), InvalidArgumentError)
})

test('commands.kill and pty.kill resolve once the process is gone', async () => {
  for (let i = 0; i < 3; i++) {
    const term = await sbx.pty.create({ cols: 80, rows: 24, onData: () => {} })
    assert.equal(await sbx.pty.kill(term.pid), true)
    assert.notEqual((await sbx.commands.run(`kill -0 ${term.pid}`).catch((e) => e)).exitCode, 0)
    const bg = await sbx.commands.run('sleep 60', { background: true })
    assert.equal(await sbx.commands.kill(bg.pid), true)
    assert.notEqual((await sbx.commands.run(`kill -0 ${bg.pid}`).catch((e) => e)).exitCode, 0)
    assert.equal(await sbx.commands.kill(bg.pid), false)
  }
})

test("a figure plt.show() displays is a Result with its PNG, its text/plain repr and an empty extra (E2B's display data)", async () => {
  const ex = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([0, 1], [1, 0])\nplt.show()')
  assert.equal(ex.error, undefined, ex.error && ex.error.traceback)
  const [r] = ex.results
  assert.ok(r.png)
  assert.equal(r.text, '<Figure size 640x480 with 1 Axes>')
  assert.deepEqual(r.extra, {})
  assert.deepEqual(r.formats(), ['png'])
})

test('files.write for another user of the image: theirs where the box switches users, else root, as commands', async () => {
  const who = (await sbx.commands.run('id -un', { user: 'nobody' }).catch((e) => e)).stdout.trim()
  await sbx.files.write('/tmp/nobody.txt', 'n', { user: 'nobody' })
  assert.equal((await sbx.files.getInfo('/tmp/nobody.txt')).owner, who)
})
