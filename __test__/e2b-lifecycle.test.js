'use strict'
// kern-sandbox/e2b's pause, connect (resume), lifecycle, fork and snapshots, on the core's
// machine pause/resume, fork and snapshot store: E2B's SDK tests' cases, and their edges.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
require('./helpers') // KERN_BIN: a real kern, or the stand-in
const { Sandbox, InvalidArgumentError, SandboxNotFoundError, SandboxError } = require('kern-sandbox/e2b')

// A store of this file's own, so nothing here sees or leaves snapshots elsewhere.
const store = fs.mkdtempSync(path.join(os.tmpdir(), 'e2b-snapshots-'))
const kern = { snapshotDir: store }
test.after(() => fs.rmSync(store, { recursive: true, force: true }))

test('pause: not running, state paused, calls refused; connect resumes the same processes', async () => {
  const sbx = await Sandbox.create({ kern })
  try {
    const bg = await sbx.commands.run('sleep 300', { background: true })
    assert.equal(await sbx.pause(), true)
    assert.equal(await sbx.pause(), false, 'a second pause changes nothing')
    assert.equal(await sbx.isRunning(), false)
    assert.equal((await sbx.getInfo()).state, 'paused')
    await assert.rejects(sbx.commands.run('true'), (e) => e instanceof SandboxError && /paused/.test(e.message))
    const again = await Sandbox.connect(sbx.sandboxId)
    assert.equal(again, sbx)
    assert.equal(await sbx.isRunning(), true)
    assert.equal((await sbx.getInfo()).state, 'running')
    const ps = await sbx.commands.list()
    assert.ok(
      ps.some((p) => p.pid === bg.pid),
      'the background command lives on',
    )
    assert.equal((await sbx.commands.run('echo ok')).stdout, 'ok\n')
  } finally {
    await sbx.kill()
  }
})

test('lifecycle: onTimeout pause pauses at the end of the lifetime; connect wakes it with a new one', async () => {
  const sbx = await Sandbox.create({ kern, timeoutMs: 500, lifecycle: { onTimeout: 'pause', autoResume: false } })
  try {
    assert.deepEqual((await sbx.getInfo()).lifecycle, { onTimeout: 'pause', autoResume: false })
    for (let i = 0; i < 100 && (await sbx.isRunning()); i++) await new Promise((r) => setTimeout(r, 100))
    assert.equal((await sbx.getInfo()).state, 'paused')
    await sbx.connect({ timeoutMs: 60_000 })
    assert.equal(await sbx.isRunning(), true)
    assert.ok((await sbx.getInfo()).endAt.getTime() > Date.now() + 30_000)
  } finally {
    await sbx.kill()
  }
})

test('lifecycle: autoResume wakes a paused sandbox on the next call', async () => {
  const sbx = await Sandbox.create({ kern, lifecycle: { onTimeout: 'pause', autoResume: true } })
  try {
    await sbx.pause()
    assert.equal((await sbx.commands.run('echo woke')).stdout, 'woke\n')
    assert.equal(await sbx.isRunning(), true)
  } finally {
    await sbx.kill()
  }
})

test("lifecycle: E2B's client-side refusals", async () => {
  const bad = [
    { onTimeout: { action: 'pause', keepMemory: false }, autoResume: true },
    { onTimeout: { action: 'kill', keepMemory: false } },
    { autoResume: true },
    { onTimeout: 'kill', autoResume: true },
    { onTimeout: 'sleep' },
    'pause',
  ]
  for (const lifecycle of bad) {
    await assert.rejects(Sandbox.create({ kern, lifecycle }), InvalidArgumentError, JSON.stringify(lifecycle))
  }
})

test('fork: copies of the filesystem now, independent of each other and of the parent, which runs on', async () => {
  const sbx = await Sandbox.create({ kern })
  const forks = []
  try {
    await sbx.files.write('/home/user/state.txt', 'state before fork')
    await sbx.commands.run('mkdir -p /opt && echo root-side > /opt/marker', { user: 'root' })
    forks.push(...(await sbx.fork({ count: 2, timeoutMs: 60_000 })))
    assert.equal(forks.length, 2)
    const ids = new Set([sbx.sandboxId, ...forks.map((f) => f.sandboxId)])
    assert.equal(ids.size, 3)
    assert.equal(await sbx.isRunning(), true)
    for (const [i, f] of forks.entries()) {
      assert.ok(f instanceof Sandbox)
      assert.equal(await f.files.read('/home/user/state.txt'), 'state before fork')
      assert.equal((await f.commands.run('cat /opt/marker')).stdout, 'root-side\n')
      await f.files.write('/home/user/state.txt', `fork ${i}`)
    }
    assert.equal(await sbx.files.read('/home/user/state.txt'), 'state before fork')
    assert.equal(await forks[0].files.read('/home/user/state.txt'), 'fork 0')
    assert.equal(await forks[1].files.read('/home/user/state.txt'), 'fork 1')
    // A fork outlives its parent: they share nothing the parent's kill takes away.
    await sbx.kill()
    assert.equal((await forks[0].commands.run('echo alive')).stdout, 'alive\n')
    const [viaStatic] = await Sandbox.fork(forks[1].sandboxId)
    forks.push(viaStatic)
    assert.equal(await viaStatic.files.read('/home/user/state.txt'), 'fork 1')
  } finally {
    await sbx.kill()
    await Promise.all(forks.map((f) => f.kill()))
  }
})

test('fork: a bad count before anything else, a killed sandbox is not found', async () => {
  for (const count of [0, -1, 1.5, '2']) {
    await assert.rejects(Sandbox.fork('no-such-sandbox', { count }), InvalidArgumentError)
  }
  await assert.rejects(Sandbox.fork('no-such-sandbox'), SandboxNotFoundError)
  const sbx = await Sandbox.create({ kern })
  await sbx.kill()
  await assert.rejects(sbx.fork(), SandboxNotFoundError)
  await assert.rejects(sbx.pause(), SandboxNotFoundError)
  await assert.rejects(sbx.createSnapshot(), SandboxNotFoundError)
})

test('snapshots: create, list (all, by sandbox, by name), a sandbox from one, delete', async () => {
  const sbx = await Sandbox.create({ kern })
  try {
    await sbx.files.makeDir('/home/user/app')
    await sbx.files.write('/home/user/app/config.json', '{"env": "test"}')
    const plain = await sbx.createSnapshot()
    assert.match(plain.snapshotId, /\S/)
    assert.deepEqual(plain.names, [])
    const named = await sbx.createSnapshot({ name: 'my-snap' })
    assert.deepEqual(named.names, ['my-snap'])
    const all = await Sandbox.listSnapshots({ kern }).nextItems()
    assert.deepEqual(all.map((s) => s.snapshotId).sort(), [plain.snapshotId, named.snapshotId].sort())
    const mine = await sbx.listSnapshots().nextItems()
    assert.equal(mine.length, 2)
    const byName = await Sandbox.listSnapshots({ kern, name: 'my-snap' }).nextItems()
    assert.deepEqual(
      byName.map((s) => s.snapshotId),
      [named.snapshotId],
    )
    assert.deepEqual(await Sandbox.listSnapshots({ kern, name: 'none' }).nextItems(), [])

    await sbx.files.write('/home/user/app/config.json', 'changed after the snapshot')
    for (const from of [plain.snapshotId, 'my-snap']) {
      const child = await Sandbox.create(from, { kern })
      try {
        assert.equal(await child.files.read('/home/user/app/config.json'), '{"env": "test"}')
      } finally {
        await child.kill()
      }
    }
    assert.equal(await Sandbox.deleteSnapshot(plain.snapshotId, { kern }), true)
    assert.equal(await Sandbox.deleteSnapshot(plain.snapshotId, { kern }), false)
    assert.equal(await Sandbox.deleteSnapshot(named.snapshotId, { kern }), true)
    assert.deepEqual(await Sandbox.listSnapshots({ kern }).nextItems(), [])
  } finally {
    await sbx.kill()
  }
})
