'use strict'
// Machine snapshots and forks (Machine#snapshot, Sandbox#snapshots, Sandbox#machine({ from }),
// Machine#fork): what a machine from a snapshot sees of the root filesystem and the workspace,
// that a snapshot and forks are copies (nothing written later crosses over), the store's list
// and delete, bad input, and that nothing is left in the store after a refused or deleted
// snapshot. On whichever kern the suite drives (the stand-in's root is a tmpfs with the host's
// system directories bound read-only, so a removed image file is tested on /root there).

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { kern, openSandbox, openMachine, tmpDir, sessionDirs, realKern, runNode, lastJson } = require('./helpers.js')

const { SandboxError, Machine } = kern

const BIN = path.join(__dirname, '..', 'bin', 'kern-sandbox.js')

const coded = (code) => (e) => e instanceof SandboxError && e.code === code

/** What the store holds: snapshot dirs and temp dirs (the baselines cache left out). */
function storeEntries(dir) {
  return fs.readdirSync(dir).filter((n) => n !== 'baselines')
}

async function session(t, opts = {}) {
  const store = tmpDir('kst-snap-')
  const sbx = await openSandbox(t, { snapshotDir: store, ...opts })
  return { sbx, store }
}

// A path the image has, removed in the machine: /etc/issue on a real image; the stand-in's image
// directories are read-only binds, and /root is the one image directory on its writable root.
const GONE = realKern ? '/etc/issue' : '/root'
const SITE = '/opt/venv/lib/python3/site-packages'

/** Root changes of every kind, and workspace files. */
async function populate(m) {
  const r = await m.exec(
    [
      'set -e',
      'mkdir -p /opt/x/deep/er',
      'printf one > /opt/x/f',
      'printf deep > /opt/x/deep/er/g',
      'chmod 750 /opt/x/deep',
      'chmod 640 /opt/x/f',
      'ln -s /opt/x/f /opt/link',
      `rm -r ${GONE}`,
      `mkdir -p ${SITE}/pkg ${SITE}/pkg-1.0.dist-info`,
      `printf 'X = 41 + 1\\n' > ${SITE}/pkg/__init__.py`,
      `printf 'def f():\\n    return "mod"\\n' > ${SITE}/pkg/mod.py`,
      `printf 'Name: pkg\\nVersion: 1.0\\n' > ${SITE}/pkg-1.0.dist-info/METADATA`,
      // Over 16 MiB: crosses the agent's socket in pieces both ways.
      'head -c 20000000 /dev/urandom > /opt/x/big',
      ': > /opt/x/empty',
      "printf odd > '/opt/x/a name with spaces, ünïcode'",
      'ln -s /nowhere /opt/dangling',
      'chmod 4755 /opt/x/empty',
      // Many entries: the restore takes several requests, directories before their files.
      'for d in $(seq 1 40); do mkdir -p /opt/many/$d; for f in $(seq 1 60); do echo $d-$f > /opt/many/$d/$f; done; done',
      'mkdir -p sub && printf ws > sub/w.txt && printf top > top.txt',
    ].join('\n'),
  )
  assert.equal(r.exitCode, 0, r.stderr)
  return (await m.exec('sha256sum /opt/x/big')).stdout
}

test('a machine from a snapshot sees its root changes and workspace files', async (t) => {
  const { sbx, store } = await session(t)
  const m = await openMachine(t, sbx)
  const bigSum = await populate(m)
  const snap = await m.snapshot({ name: 'populated' })
  assert.match(snap.id, /^snap-[0-9a-f]+$/)
  assert.equal(snap.name, 'populated')
  assert.equal(snap.image, 'python:3.12-slim')
  assert.ok(snap.createdAt instanceof Date && Math.abs(snap.createdAt - Date.now()) < 600_000)
  assert.ok(snap.sizeBytes >= 20_000_000, `sizeBytes ${snap.sizeBytes}`)
  assert.ok(fs.statSync(path.join(store, snap.id)).isDirectory())
  assert.equal(fs.statSync(store).mode & 0o777, 0o700)

  for (const from of [snap, snap.id, 'populated']) {
    const c = await openMachine(t, sbx, { from })
    assert.ok(c instanceof Machine)
    const r = await c.exec(
      [
        'cat /opt/x/f; echo',
        'cat /opt/x/deep/er/g; echo',
        'stat -c %a /opt/x/f /opt/x/deep',
        'readlink /opt/link',
        `test -e ${GONE} && echo present || echo gone`,
        `cat ${SITE}/pkg-1.0.dist-info/METADATA`,
        `python3 -c "import sys; sys.path.insert(0, '${SITE}'); import pkg, pkg.mod; print(pkg.X, pkg.mod.f())"`,
        'cat sub/w.txt top.txt; echo',
      ].join('\n'),
    )
    assert.equal(r.exitCode, 0, r.stderr)
    assert.equal(
      r.stdout,
      'one\ndeep\n640\n750\n/opt/x/f\ngone\nName: pkg\nVersion: 1.0\n42 mod\nwstop\n',
      `from ${typeof from === 'string' ? from : 'the object'}`,
    )
    assert.equal((await c.exec('sha256sum /opt/x/big')).stdout, bigSum)
    const odd = await c.exec(
      "cat '/opt/x/a name with spaces, ünïcode'; echo; stat -c '%a %s' /opt/x/empty; readlink /opt/dangling",
    )
    assert.equal(odd.stdout, 'odd\n4755 0\n/nowhere\n')
    const many = await c.exec('find /opt/many -type f | wc -l; cat /opt/many/40/60 /opt/many/1/1')
    assert.equal(many.stdout, '2400\n40-60\n1-1\n')
  }
})

test('a snapshot does not change when its machine goes on writing; a machine from it has its own workspace', async (t) => {
  const { sbx } = await session(t)
  const m = await openMachine(t, sbx)
  await m.exec('mkdir -p /opt/x && printf before > /opt/x/f && printf before > w.txt')
  const snap = await m.snapshot()
  assert.equal(snap.name, null)
  await m.exec('printf after > /opt/x/f && printf after > w.txt && printf new > /opt/x/new')
  const c = await openMachine(t, sbx, { from: snap })
  assert.equal(
    (await c.exec('cat /opt/x/f w.txt; test -e /opt/x/new || echo " no-new"')).stdout,
    'beforebefore no-new\n',
  )
  // Its workspace is its own: the session's (the parent's) is not written through it.
  await c.exec('printf mine > w.txt && printf only-here > fresh.txt')
  assert.equal((await sbx.readFile('w.txt')).toString(), 'after')
  assert.equal(fs.existsSync(path.join(sbx.workspacePath, 'fresh.txt')), false)
  assert.equal((await m.exec('cat w.txt')).stdout, 'after')
})

test('fork({ count: 3 }): three machines see the parent files and diverge independently', async (t) => {
  const { sbx, store } = await session(t)
  const m = await openMachine(t, sbx)
  await m.exec('mkdir -p /opt/shared && printf parent > /opt/shared/f && printf pws > shared.txt')
  const forks = await m.fork({ count: 3 })
  for (const f of forks) t.after(() => f.close())
  assert.equal(forks.length, 3)
  assert.equal(new Set(forks.map((f) => f.name)).size, 3)
  for (const [i, f] of forks.entries()) {
    assert.ok(f instanceof Machine && f.alive)
    assert.equal((await f.exec('cat /opt/shared/f shared.txt')).stdout, 'parentpws')
    await f.exec(`printf ${i} > /opt/shared/mine-${i} && printf ${i} > ws-${i}.txt && printf ${i} > /opt/shared/f`)
  }
  for (const [i, f] of forks.entries()) {
    const seen = (await f.exec('ls /opt/shared; ls')).stdout.split('\n').filter((n) => /^(mine|ws)-/.test(n))
    assert.deepEqual(seen.sort(), [`mine-${i}`, `ws-${i}.txt`], `fork ${i} sees only its own files`)
    assert.equal((await f.exec('cat /opt/shared/f')).stdout, String(i))
  }
  // The parent runs on, unchanged by its forks; a fork's copy is not kept in the store.
  assert.equal((await m.exec('cat /opt/shared/f; ls /opt/shared')).stdout, 'parentf\n')
  assert.deepEqual(await sbx.snapshots(), [])
  assert.deepEqual(storeEntries(store), [])
  assert.deepEqual((await m.fork()).length, 1)
})

test("a fork's and a snapshot machine's own workspaces go when they close", async (t) => {
  const { sbx } = await session(t)
  const m = await openMachine(t, sbx)
  await m.exec('printf x > a.txt')
  const before = new Set(wsDirs())
  const [f] = await m.fork()
  const snap = await m.snapshot()
  const c = await sbx.machine({ from: snap })
  assert.equal(wsDirs().filter((d) => !before.has(d)).length, 2)
  await f.close()
  await c.close()
  assert.deepEqual(
    wsDirs().filter((d) => !before.has(d)),
    [],
  )
})

/** The workspace dirs machines of this process's sessions own. */
function wsDirs() {
  const os = require('node:os')
  return sessionDirs().flatMap((s) => {
    try {
      return fs
        .readdirSync(path.join(os.tmpdir(), s))
        .filter((n) => n.startsWith('ws-'))
        .map((n) => `${s}/${n}`)
    } catch {
      return []
    }
  })
}

test('snapshots() lists, delete() removes; nothing is left in the store', async (t) => {
  const { sbx, store } = await session(t)
  const m = await openMachine(t, sbx)
  await m.exec('mkdir -p /opt/l && printf 1 > /opt/l/f')
  const a = await m.snapshot({ name: 'a' })
  const b = await m.snapshot({ name: 'b' })
  const listed = await sbx.snapshots()
  assert.deepEqual(
    listed.map((s) => [s.id, s.name, s.image, s.sizeBytes]),
    [a, b].map((s) => [s.id, s.name, s.image, s.sizeBytes]),
  )
  assert.deepEqual(JSON.parse(JSON.stringify(listed[0])).id, a.id)
  await listed[0].delete()
  assert.deepEqual(
    (await sbx.snapshots()).map((s) => s.id),
    [b.id],
  )
  await assert.rejects(a.delete(), coded('ERR_SNAPSHOT_NOT_FOUND'))
  await assert.rejects(sbx.machine({ from: a }), coded('ERR_SNAPSHOT_NOT_FOUND'))
  await b.delete()
  assert.deepEqual(await sbx.snapshots(), [])
  assert.deepEqual(storeEntries(store), [])
  // Another session on the same store sees what this one keeps.
  const c = await m.snapshot({ name: 'shared' })
  const other = await openSandbox(t, { snapshotDir: store })
  assert.deepEqual(
    (await other.snapshots()).map((s) => s.id),
    [c.id],
  )
  const o = await openMachine(t, other, { from: 'shared' })
  assert.equal((await o.exec('cat /opt/l/f')).stdout, '1')
})

test('bad input: names, counts, missing snapshots, closed machines; nothing is kept', async (t) => {
  const { sbx, store } = await session(t)
  const m = await openMachine(t, sbx)
  for (const name of ['a/b', 'a\0b', 'x'.repeat(65), '', 7, {}]) {
    await assert.rejects(m.snapshot({ name }), coded('ERR_INVALID_OPTION'), `name ${JSON.stringify(name)}`)
  }
  assert.ok((await m.snapshot({ name: 'y'.repeat(64) })).id)
  for (const count of [0, -1, 1.5, 65, 'two', Number.NaN]) {
    await assert.rejects(m.fork({ count }), coded('ERR_INVALID_OPTION'), `count ${String(count)}`)
  }
  await assert.rejects(sbx.machine({ from: 'no-such-snapshot' }), coded('ERR_SNAPSHOT_NOT_FOUND'))
  await assert.rejects(sbx.machine({ from: 'snap-0000' }), coded('ERR_SNAPSHOT_NOT_FOUND'))
  await assert.rejects(sbx.machine({ from: 42 }), coded('ERR_INVALID_OPTION'))
  await assert.rejects(sbx.machine({ from: 'x', image: 'python:3.12-slim' }), coded('ERR_INVALID_OPTION'))
  await m.close()
  await assert.rejects(m.snapshot(), coded('ERR_MACHINE_GONE'))
  await assert.rejects(m.fork({ count: 2 }), coded('ERR_MACHINE_GONE'))
  assert.equal((await sbx.snapshots()).length, 1)
  assert.equal(storeEntries(store).length, 1)
  assert.ok(!storeEntries(store).some((n) => n.startsWith('.')), 'no temp dir left')
})

test('a snapshot past snapshotMaxBytes is refused and nothing of it is kept', async (t) => {
  const { sbx, store } = await session(t, { snapshotMaxBytes: 1_000_000 })
  const m = await openMachine(t, sbx)
  await m.exec('mkdir -p /opt/b && head -c 600000 /dev/urandom > /opt/b/one')
  const first = await m.snapshot()
  await assert.rejects(m.snapshot(), coded('ERR_TOO_LARGE'))
  assert.deepEqual(
    (await sbx.snapshots()).map((s) => s.id),
    [first.id],
  )
  await m.exec('head -c 2000000 /dev/urandom > /opt/b/two')
  await first.delete()
  await assert.rejects(m.snapshot(), coded('ERR_TOO_LARGE'))
  assert.deepEqual(storeEntries(store), [])
  // A fork's copy is held to the cap too: the failed fork leaves no machine, copy or workspace.
  const before = new Set(wsDirs())
  await assert.rejects(m.fork({ count: 2 }), coded('ERR_TOO_LARGE'))
  assert.deepEqual(storeEntries(store), [])
  assert.deepEqual(
    wsDirs().filter((d) => !before.has(d)),
    [],
  )
  await assert.rejects(async () => new kern.Sandbox({ snapshotMaxBytes: -1 }).open(), coded('ERR_INVALID_OPTION'))
  await assert.rejects(
    async () => new kern.Sandbox({ snapshotDir: 'relative/dir' }).open(),
    coded('ERR_INVALID_OPTION'),
  )
})

test('kern-sandbox snapshots: list, rm and gc on the store', async (t) => {
  const { sbx, store } = await session(t)
  const m = await openMachine(t, sbx)
  const a = await m.snapshot({ name: 'cli-a' })
  const b = await m.snapshot()
  const cli = (...args) => {
    const r = spawnSync(process.execPath, [BIN, 'snapshots', ...args], {
      encoding: 'utf8',
      env: { ...process.env, KERN_SANDBOX_SNAPSHOT_DIR: store },
    })
    return { code: r.status, out: r.stdout, err: r.stderr }
  }
  const listed = cli('list', '--json')
  assert.equal(listed.code, 0, listed.err)
  assert.deepEqual(
    JSON.parse(listed.out).map((s) => [s.id, s.name, s.image, s.sizeBytes]),
    [a, b].map((s) => [s.id, s.name, s.image, s.sizeBytes]),
  )
  assert.match(cli().out, new RegExp(`^${a.id}  cli-a  python:3\\.12-slim  `, 'm'))
  assert.equal(cli('rm', a.id).code, 0)
  assert.deepEqual(
    (await sbx.snapshots()).map((s) => s.id),
    [b.id],
  )
  const missing = cli('rm', a.id)
  assert.equal(missing.code, 1)
  assert.match(missing.err, /no snapshot/)
  assert.equal(cli('gc').code, 2, 'gc needs --older-than')
  assert.equal(cli('gc', '--older-than', 'soon').code, 2)
  // Planted leftovers of an interrupted snapshot: as old as the snapshot, collected with it.
  fs.mkdirSync(path.join(store, '.tmp-deadbeef'))
  assert.equal(cli('gc', '--older-than', '1h').code, 0)
  assert.deepEqual(
    (await sbx.snapshots()).map((s) => s.id),
    [b.id],
    'younger than 1h: kept',
  )
  const gone = cli('gc', '--older-than', '0s', '--json')
  assert.equal(gone.code, 0, gone.err)
  assert.deepEqual(JSON.parse(gone.out).sort(), ['.tmp-deadbeef', b.id].sort())
  assert.deepEqual(storeEntries(store), [])
  assert.deepEqual(await sbx.snapshots(), [])
})

test('a paused machine is thawed for a snapshot or fork and paused again after it', async (t) => {
  const { sbx } = await session(t)
  const m = await openMachine(t, sbx)
  const sleeper = await m.spawn(['sleep', '300'])
  await m.exec('printf held > held.txt')
  await m.pause()
  const snap = await m.snapshot({ name: 'while-paused' })
  assert.equal(m.paused, true, 'paused again after the snapshot')
  const [f] = await m.fork()
  t.after(() => f.close())
  assert.equal(m.paused, true, 'paused again after the fork')
  assert.equal(f.paused, false)
  assert.equal((await f.exec('cat held.txt')).stdout, 'held')
  await assert.rejects(m.exec('true'), coded('ERR_MACHINE_PAUSED'))
  await m.resume()
  assert.ok(
    (await m.processes()).some((p) => p.pid === sleeper.pid),
    'the same process runs on after the resume',
  )
  const from = await sbx.machine({ from: snap })
  t.after(() => from.close())
  assert.equal((await from.exec('cat held.txt')).stdout, 'held')
  await snap.delete()
})

test('a fork of a machine with a policy of its own gets a copy of the policy in force', async (t) => {
  const { sbx } = await session(t)
  const m = await openMachine(t, sbx, { network: { allowOut: ['example.test'], denyOut: ['0.0.0.0/0'] } })
  await m.updateNetwork({ allowOut: ['other.test'], denyOut: ['0.0.0.0/0'] })
  const [f] = await m.fork()
  t.after(() => f.close())
  assert.deepEqual(f.network, { allowOut: ['other.test'], denyOut: ['0.0.0.0/0'] })
  // The fork has a proxy of its own (a machine on the session's network: false would refuse
  // updateNetwork with ERR_NETWORK_FIXED), so both can be changed apart.
  await f.updateNetwork({ denyOut: ['0.0.0.0/0'] })
  await m.updateNetwork({ allowOut: ['example.test'], denyOut: ['0.0.0.0/0'] })
})

test('close() stops machines and forks whose objects were collected without close()', async () => {
  const store = tmpDir('kst-snap-')
  const r = await runNode(
    `
    const fs = require('node:fs')
    const { Sandbox } = require(REPO)
    require('node:v8').setFlagsFromString('--expose-gc')
    const gc = require('node:vm').runInNewContext('gc')
    // kern processes of this Node that run a box.
    const boxes = () =>
      fs.readdirSync('/proc').filter((d) => {
        try {
          const stat = fs.readFileSync('/proc/' + d + '/stat', 'utf8')
          const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
          return ppid === process.pid && fs.readFileSync('/proc/' + d + '/cmdline', 'utf8').split('\\0').includes('box')
        } catch {
          return false
        }
      }).length
    ;(async () => {
      const sbx = new Sandbox({ snapshotDir: ${JSON.stringify(store)} })
      await sbx.open()
      const m = await sbx.machine()
      await (async () => {
        await m.fork({ count: 2 })
        await sbx.machine()
      })()
      const before = boxes()
      for (let i = 0; i < 3; i++) {
        gc()
        await new Promise((r) => setTimeout(r, 50))
      }
      await sbx.close()
      console.log(JSON.stringify({ before, after: boxes() }))
    })()
    `,
    { timeoutMs: 120_000 },
  )
  assert.equal(r.code, 0, r.stderr)
  const { before, after } = lastJson(r.stdout)
  assert.equal(before, 4, 'the machine, two forks and a second machine run')
  assert.equal(after, 0, 'close() stopped every box')
})
