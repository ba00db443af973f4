'use strict'
// kern-sandbox/e2b's sandbox.files: E2B's filesystem API over the sandbox's machine: absolute
// paths anywhere in the box, relative ones from /home/user (the workspace, which cells and commands
// see there too); E2B's EntryInfo, metadata, FileNotFoundError and watchDir.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { Blob } = require('node:buffer')
const { tmpDir, waitFor } = require('./helpers')
const {
  Sandbox,
  InvalidArgumentError,
  NotFoundError,
  FileNotFoundError,
  SandboxError,
  FileType,
  FilesystemEventType,
} = require('kern-sandbox/e2b')

let sbx
let ws
test.before(async () => {
  ws = tmpDir()
  sbx = await Sandbox.create({ kern: { workspace: ws } })
})
test.after(async () => {
  await sbx.kill()
})

test('write and read: text, bytes, blob, stream; absolute under /home/user or relative to it', async () => {
  const info = await sbx.files.write('/home/user/dir/a.txt', 'héllo')
  // E2B's WriteInfo: no metadata key when none was written
  assert.deepEqual(info, { name: 'a.txt', type: 'file', path: '/home/user/dir/a.txt' })
  assert.equal(await sbx.files.read('dir/a.txt'), 'héllo')
  assert.equal(await sbx.files.read('/home/user/dir/../dir/a.txt', { format: 'text' }), 'héllo')
  const bytes = await sbx.files.read('dir/a.txt', { format: 'bytes' })
  assert.ok(bytes instanceof Uint8Array)
  assert.equal(Buffer.from(bytes).toString(), 'héllo')
  const blob = await sbx.files.read('dir/a.txt', { format: 'blob' })
  assert.ok(blob instanceof Blob)
  assert.equal(await blob.text(), 'héllo')
  const stream = await sbx.files.read('dir/a.txt', { format: 'stream' })
  const parts = []
  for await (const c of stream) parts.push(Buffer.from(c))
  assert.equal(Buffer.concat(parts).toString(), 'héllo')
  await sbx.files.write('b.bin', new Uint8Array([1, 2, 3]).buffer)
  await sbx.files.write('c.bin', new Blob(['blob data']))
  await sbx.files.write(
    'd.bin',
    new ReadableStream({
      start(c) {
        c.enqueue(new Uint8Array([9]))
        c.close()
      },
    }),
  )
  assert.deepEqual([...fs.readFileSync(path.join(ws, 'b.bin'))], [1, 2, 3])
  assert.equal(fs.readFileSync(path.join(ws, 'c.bin'), 'utf8'), 'blob data')
  assert.deepEqual([...fs.readFileSync(path.join(ws, 'd.bin'))], [9])
  const many = await sbx.files.write([
    { path: 'm/1.txt', data: 'one' },
    { path: '/home/user/m/2.txt', data: 'two' },
  ])
  assert.deepEqual(
    many.map((w) => w.path),
    ['/home/user/m/1.txt', '/home/user/m/2.txt'],
  )
  const ex = await sbx.runCode('open("/home/user/m/2.txt").read() + open("m/1.txt").read()')
  assert.equal(ex.text, "'twoone'", 'cells see the files at /home/user, their working directory')
  await sbx.runCode('open("from-cell.txt", "w").write("cell")')
  assert.equal(await sbx.files.read('/home/user/from-cell.txt'), 'cell')
  await assert.rejects(sbx.files.read('nope.txt'), FileNotFoundError)
  await assert.rejects(sbx.files.read('dir/a.txt', { format: 'xml' }), InvalidArgumentError)
})

test('list, exists, getInfo, makeDir, rename and remove', async () => {
  assert.equal(await sbx.files.makeDir('tree/sub'), true)
  assert.equal(await sbx.files.makeDir('/home/user/tree/sub'), false)
  await sbx.files.write('tree/sub/f.txt', '12345')
  await sbx.files.write('tree/g.txt', 'g')
  const list = await sbx.files.list('/home/user/tree')
  assert.deepEqual(
    list.map((e) => [e.name, e.type, e.path]),
    [
      ['g.txt', 'file', '/home/user/tree/g.txt'],
      ['sub', 'dir', '/home/user/tree/sub'],
    ],
  )
  const g = list[0]
  assert.equal(g.size, 1)
  assert.match(g.permissions, /^-rw/)
  assert.ok(g.modifiedTime instanceof Date && Math.abs(g.modifiedTime - Date.now()) < 60_000)
  const deep = await sbx.files.list('tree', { depth: 2 })
  assert.deepEqual(
    deep.map((e) => e.path),
    ['/home/user/tree/g.txt', '/home/user/tree/sub', '/home/user/tree/sub/f.txt'],
  )
  assert.ok((await sbx.files.list('/home/user')).some((e) => e.name === 'tree'))
  assert.equal(await sbx.files.exists('tree/sub/f.txt'), true)
  assert.equal(await sbx.files.exists('tree/nope'), false)
  assert.equal(await sbx.files.exists('/home/user'), true)
  assert.equal((await sbx.files.getInfo('tree/sub/f.txt')).size, 5)
  await assert.rejects(sbx.files.getInfo('tree/nope'), FileNotFoundError)
  await assert.rejects(sbx.files.list('tree/nope'), NotFoundError)
  await assert.rejects(
    sbx.files.list('tree', { depth: 0 }),
    (e) => e instanceof InvalidArgumentError && /depth/.test(e.message),
  )
  const moved = await sbx.files.rename('tree/g.txt', '/home/user/tree/sub/h.txt')
  assert.deepEqual([moved.name, moved.type, moved.path], ['h.txt', 'file', '/home/user/tree/sub/h.txt'])
  assert.ok(fs.existsSync(path.join(ws, 'tree/sub/h.txt')) && !fs.existsSync(path.join(ws, 'tree/g.txt')))
  await assert.rejects(sbx.files.rename('tree/g.txt', 'x'), NotFoundError)
  await sbx.files.remove('tree/sub/h.txt')
  assert.equal(await sbx.files.exists('tree/sub/h.txt'), false)
  await sbx.files.remove('/home/user/tree')
  assert.ok(!fs.existsSync(path.join(ws, 'tree')))
  await sbx.files.remove('tree') // a missing path is fine, as in E2B
})

test('files anywhere in the box: /tmp is shared with commands; EntryInfo has owner, group, mode', async () => {
  const w = await sbx.files.write('/tmp/e2b-files/x.txt', 'in tmp')
  assert.deepEqual(w, { name: 'x.txt', type: 'file', path: '/tmp/e2b-files/x.txt' })
  assert.equal((await sbx.commands.run('cat /tmp/e2b-files/x.txt')).stdout, 'in tmp')
  await sbx.commands.run('mkdir -p /tmp/e2b-files/made && echo by-command > /tmp/e2b-files/made/c.txt')
  assert.equal(await sbx.files.read('/tmp/e2b-files/made/c.txt'), 'by-command\n')
  const info = await sbx.files.getInfo('/tmp/e2b-files/x.txt')
  assert.equal(info.type, FileType.FILE)
  assert.equal(typeof info.owner, 'string')
  assert.equal(typeof info.group, 'string')
  assert.equal(info.mode, info.mode & 0o7777, 'mode holds the permission bits only')
  assert.equal((await sbx.files.getInfo('/tmp')).type, FileType.DIR)
  assert.equal(await sbx.files.exists('/etc'), true)
  assert.equal(await sbx.files.exists('/no/such/dir'), false)
  assert.ok((await sbx.files.list('/')).some((e) => e.path === '/tmp' && e.type === 'dir'))
  for (const bad of ['', 'a\0b', 42, null]) {
    await assert.rejects(sbx.files.read(bad), (e) => e instanceof InvalidArgumentError && /path/.test(e.message))
  }
})

test('a symlink lists as symlink with its target; metadata written is listed; writeFiles', async () => {
  await sbx.commands.run('mkdir -p /tmp/e2b-links && ln -sfn /tmp/e2b-links/target /tmp/e2b-links/link')
  const [link] = (await sbx.files.list('/tmp/e2b-links')).filter((e) => e.name === 'link')
  assert.equal(link.type, FileType.SYMLINK)
  assert.equal(link.symlinkTarget, '/tmp/e2b-links/target')
  assert.match(link.permissions, /^l/)
  const w = await sbx.files.write('meta/a.txt', 'a', { metadata: { Owner: 'agent' } })
  assert.deepEqual(w.metadata, { owner: 'agent' })
  assert.deepEqual((await sbx.files.getInfo('meta/a.txt')).metadata, { owner: 'agent' })
  const moved = await sbx.files.rename('meta/a.txt', 'meta/b.txt')
  assert.deepEqual(moved.metadata, { owner: 'agent' })
  assert.equal((await sbx.files.list('meta')).find((e) => e.name === 'b.txt').metadata.owner, 'agent')
  await assert.rejects(sbx.files.write('meta/c.txt', 'c', { metadata: { n: 1 } }), InvalidArgumentError)
  const many = await sbx.files.writeFiles([
    { path: '/tmp/wf/1', data: '1' },
    { path: 'wf/2', data: '2' },
  ])
  assert.deepEqual(
    many.map((x) => x.path),
    ['/tmp/wf/1', '/home/user/wf/2'],
  )
  assert.equal(await sbx.files.read('/tmp/wf/1'), '1')
})

test('watchDir: events named relative to the directory, E2B types, recursive, stop() and onExit', async () => {
  await sbx.files.makeDir('/tmp/watched/deep')
  const events = []
  let exited = 0
  const h = await sbx.files.watchDir('/tmp/watched', (e) => events.push(e), {
    recursive: true,
    onExit: () => exited++,
  })
  await sbx.files.write('/tmp/watched/new.txt', 'x')
  await sbx.commands.run('echo y > /tmp/watched/deep/inner.txt')
  assert.ok(
    await waitFor(
      () => events.some((e) => e.name === 'new.txt') && events.some((e) => e.name === 'deep/inner.txt'),
      10_000,
    ),
    `events: ${JSON.stringify(events)}`,
  )
  await sbx.commands.run('mv /tmp/watched/new.txt /tmp/watched/moved.txt && chmod 600 /tmp/watched/moved.txt')
  const has = (type, name) => events.some((e) => e.type === type && e.name === name)
  assert.ok(
    await waitFor(() => has('rename', 'new.txt') && has('create', 'moved.txt') && has('chmod', 'moved.txt'), 10_000),
    `a move is rename + create, a chmod is chmod: ${JSON.stringify(events)}`,
  )
  const types = new Set(Object.values(FilesystemEventType))
  assert.ok(
    events.every((e) => types.has(e.type)),
    JSON.stringify(events),
  )
  assert.ok(events.some((e) => e.name === 'new.txt' && e.type === FilesystemEventType.CREATE))
  await h.stop()
  assert.equal(exited, 1)
  const seen = events.length
  await sbx.files.write('/tmp/watched/after.txt', 'z')
  await sbx.commands.run('true') // a round trip: an event would have arrived by now
  assert.equal(events.length, seen, 'no events after stop()')
  await assert.rejects(
    sbx.files.watchDir('/tmp/nowhere', () => {}),
    FileNotFoundError,
  )
  await assert.rejects(sbx.files.watchDir('/tmp/watched', 'not a function'), InvalidArgumentError)
})

test('watchDir includeEntry gives the entry; timeoutMs ends the watch with onExit(TimeoutError)', async () => {
  await sbx.files.makeDir('/tmp/watched2')
  const events = []
  let exit
  const ended = new Promise((resolve) => (exit = resolve))
  await sbx.files.watchDir('/tmp/watched2', (e) => events.push(e), {
    includeEntry: true,
    timeoutMs: 1500,
    onExit: exit,
  })
  await sbx.files.write('/tmp/watched2/f.txt', 'abc')
  assert.ok(await waitFor(() => events.some((e) => e.name === 'f.txt' && e.entry), 10_000), JSON.stringify(events))
  const e = events.find((x) => x.name === 'f.txt' && x.entry)
  assert.equal(e.entry.path, '/tmp/watched2/f.txt')
  const err = await ended
  assert.ok(err instanceof SandboxError && /timeoutMs/.test(err.message), String(err))
})

test('a symlink names a path in the box, never the host: nothing outside the box is read or removed', async () => {
  const outside = tmpDir()
  fs.writeFileSync(path.join(outside, 'secret'), 'top secret')
  await sbx.commands.run(`ln -s ${outside} /home/user/escape; ln -s ${outside}/secret /home/user/leaf`)
  await assert.rejects(sbx.files.read('escape/secret'), FileNotFoundError)
  await assert.rejects(sbx.files.read('leaf'), FileNotFoundError)
  assert.equal((await sbx.files.getInfo('leaf')).type, 'symlink')
  await sbx.files.remove('escape/secret')
  await sbx.files.remove('escape')
  await sbx.files.remove('leaf')
  assert.equal(fs.readFileSync(path.join(outside, 'secret'), 'utf8'), 'top secret')
  assert.ok(!fs.existsSync(path.join(ws, 'escape')) && !fs.existsSync(path.join(ws, 'leaf')))
})
