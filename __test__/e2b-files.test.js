'use strict'
// kern-sandbox/e2b's sandbox.files: E2B's filesystem API on the workspace, which cells see at
// /home/user. Paths outside /home/user are refused, and nothing outside the workspace is touched,
// whatever links the box planted.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { Blob } = require('node:buffer')
const { tmpDir } = require('./helpers')
const { Sandbox, InvalidArgumentError, NotFoundError, SandboxError } = require('kern-sandbox/e2b')

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
  await assert.rejects(sbx.files.read('nope.txt'), NotFoundError)
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
  await assert.rejects(sbx.files.getInfo('tree/nope'), NotFoundError)
  await assert.rejects(sbx.files.list('tree/nope'), NotFoundError)
  const moved = await sbx.files.rename('tree/g.txt', '/home/user/tree/sub/h.txt')
  assert.deepEqual([moved.name, moved.type, moved.path], ['h.txt', 'file', '/home/user/tree/sub/h.txt'])
  assert.ok(fs.existsSync(path.join(ws, 'tree/sub/h.txt')) && !fs.existsSync(path.join(ws, 'tree/g.txt')))
  await assert.rejects(sbx.files.rename('tree/g.txt', 'x'), NotFoundError)
  await sbx.files.remove('tree/sub/h.txt')
  assert.equal(await sbx.files.exists('tree/sub/h.txt'), false)
  await sbx.files.remove('/home/user/tree')
  assert.ok(!fs.existsSync(path.join(ws, 'tree')))
  await assert.rejects(sbx.files.remove('tree'), NotFoundError)
})

test('paths outside /home/user are refused before anything is touched', async () => {
  for (const p of ['/etc/passwd', '/home/user/../etc/passwd', '../x', '/home/username', '/', '/tmp/x', '']) {
    for (const call of [
      () => sbx.files.read(p),
      () => sbx.files.write(p, 'x'),
      () => sbx.files.list(p),
      () => sbx.files.exists(p),
      () => sbx.files.remove(p),
      () => sbx.files.makeDir(p),
      () => sbx.files.rename(p, 'ok.txt'),
    ]) {
      await assert.rejects(call(), InvalidArgumentError, `${call.toString()} ${JSON.stringify(p)}`)
    }
  }
  await assert.rejects(sbx.files.remove('/home/user'), InvalidArgumentError)
  await assert.rejects(sbx.files.write('/home/user', 'x'), InvalidArgumentError)
})

test('links the box planted are never followed: nothing outside the workspace is read, listed, moved or removed', async () => {
  const outside = tmpDir()
  fs.writeFileSync(path.join(outside, 'secret'), 'top secret')
  fs.mkdirSync(path.join(outside, 'd'))
  await sbx.runCode(
    `import os\nos.symlink(${JSON.stringify(outside)}, "escape")\nos.symlink(${JSON.stringify(outside + '/secret')}, "leaf")`,
  )
  await assert.rejects(sbx.files.read('escape/secret'), SandboxError)
  await assert.rejects(sbx.files.read('leaf'), SandboxError)
  await assert.rejects(sbx.files.list('escape'), SandboxError)
  await assert.rejects(sbx.files.write('escape/new', 'x'), SandboxError)
  await assert.rejects(sbx.files.makeDir('escape/newdir'), SandboxError)
  await assert.rejects(sbx.files.remove('escape/secret'), SandboxError)
  await assert.rejects(sbx.files.rename('escape/secret', 'stolen'), SandboxError)
  await assert.rejects(sbx.files.rename('leaf', 'escape/moved'), SandboxError)
  const leaf = await sbx.files.getInfo('leaf')
  assert.equal(leaf.type, 'file')
  assert.equal(leaf.symlinkTarget, path.join(outside, 'secret'))
  await assert.rejects(sbx.files.exists('escape/secret'), /symlink in the path is refused/)
  await sbx.files.remove('escape')
  await sbx.files.remove('leaf')
  assert.deepEqual(fs.readdirSync(outside).sort(), ['d', 'secret'])
  assert.equal(fs.readFileSync(path.join(outside, 'secret'), 'utf8'), 'top secret')
  assert.ok(!fs.existsSync(path.join(ws, 'escape')) && !fs.existsSync(path.join(ws, 'leaf')))
})
