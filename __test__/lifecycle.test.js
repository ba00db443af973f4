'use strict'
// Session lifecycle: open/close, withSandbox, user workspaces, asyncDispose; and what must not
// outlive the Node process (defect 5): temp dirs and boxes on normal exit, process.exit(), SIGKILL,
// and a long call that must survive tokio's idle-thread retirement (PDEATHSIG follows the thread).

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const {
  kern,
  openSandbox,
  tmpDir,
  rand,
  runNode,
  lastJson,
  sessionDirs,
  procsMatching,
  waitFor,
  sleep,
} = require('./helpers')

const { Sandbox, SandboxError, MountRefused, withSandbox } = kern

test('a temp workspace lives in a kern-sbx-<pid>-* dir that close() removes', async () => {
  const before = new Set(sessionDirs())
  const sbx = await new Sandbox().open()
  const ws = sbx.workspacePath
  assert.ok(fs.statSync(ws).isDirectory())
  const added = sessionDirs().filter((d) => !before.has(d))
  assert.equal(added.length, 1)
  assert.ok(ws.startsWith(fs.realpathSync(os.tmpdir())) || ws.startsWith(os.tmpdir()))
  await sbx.close()
  assert.ok(!fs.existsSync(ws), 'workspace removed')
  assert.ok(!fs.existsSync(path.join(os.tmpdir(), added[0])), 'session dir removed')
})

test('close() is idempotent, also before open()', async () => {
  const closed = async (s) => {
    assert.equal(s.workspacePath, null, 'closed: no workspace')
    await assert.rejects(
      s.runCode('print(1)'),
      (e) => e instanceof SandboxError && /open the Sandbox first/.test(e.message),
    )
    await assert.rejects(s.readFile('keep.txt'), SandboxError)
    await assert.rejects(s.writeFile('new.txt', 'x'), SandboxError)
    assert.throws(() => s.snapshot(path.join(tmpDir(), 's.tgz')), SandboxError)
  }
  const dirs = sessionDirs().length

  const never = new Sandbox()
  assert.equal(await never.close(), undefined)
  assert.equal(await never.close(), undefined)
  await closed(never)
  await never.open() // closing before open() leaves it openable
  assert.equal((await never.runCode('print("opened")')).stdout, 'opened\n')
  await never.close()

  // A user-owned workspace survives every close(), the later ones included.
  const ws = path.join(tmpDir('kst-close-'), 'ws')
  const mine = await new Sandbox({ workspace: ws }).open()
  await mine.writeFile('keep.txt', 'kept')
  for (let i = 0; i < 3; i++) assert.equal(await mine.close(), undefined, `close() #${i + 1}`)
  const both = await Promise.allSettled([mine.close(), mine.close()])
  assert.deepEqual(
    both.map((r) => r.status),
    ['fulfilled', 'fulfilled'],
  )
  assert.equal(fs.readFileSync(path.join(ws, 'keep.txt'), 'utf8'), 'kept')
  await closed(mine)

  // A temp workspace is gone after the first close(); the next ones change nothing.
  const temp = await new Sandbox().open()
  const tempWs = temp.workspacePath
  await temp.close()
  assert.ok(!fs.existsSync(tempWs))
  assert.equal(await temp.close(), undefined)
  assert.ok(!fs.existsSync(tempWs))
  await closed(temp)
  assert.equal(sessionDirs().length, dirs, 'no session directory left behind')
})

test('open() twice is fine and runs setup once', async () => {
  const sbx = new Sandbox({ setup: 'echo ran >> /workspace/setup-count' })
  await sbx.open()
  const ws = sbx.workspacePath
  await sbx.open()
  try {
    assert.equal(sbx.workspacePath, ws)
    assert.equal((await sbx.readFile('setup-count')).toString(), 'ran\n')
  } finally {
    await sbx.close()
  }
})

test('concurrent open() calls open once and run setup once', async () => {
  const sbx = new Sandbox({ setup: 'echo ran >> /workspace/setup-count' })
  const [a, b] = await Promise.all([sbx.open(), sbx.open()])
  try {
    assert.equal(a, sbx)
    assert.equal(b, sbx)
    assert.equal((await sbx.readFile('setup-count')).toString(), 'ran\n')
  } finally {
    await sbx.close()
  }
})

test('a session can be reopened after close()', async () => {
  const sbx = await new Sandbox().open()
  await sbx.close()
  await sbx.open()
  try {
    const r = await sbx.runCode('print("again")')
    assert.equal(r.stdout, 'again\n')
  } finally {
    await sbx.close()
  }
})

test("withSandbox returns fn's value and closes; opts are optional", async () => {
  let ws
  const v = await withSandbox(async (s) => {
    ws = s.workspacePath
    return (await s.runCode('print(6 * 7)')).stdout
  })
  assert.equal(v, '42\n')
  assert.ok(!fs.existsSync(ws))
  const w = await withSandbox({ timeoutS: 5 }, async (s) => s.timeoutS)
  assert.equal(w, 5)
})

test('withSandbox closes and deletes the temp workspace when fn throws', async () => {
  let ws
  const boom = new Error('user code threw')
  await assert.rejects(
    withSandbox({}, async (s) => {
      ws = s.workspacePath
      await s.writeFile('f.txt', 'x')
      throw boom
    }),
    (e) => e === boom,
  )
  assert.ok(ws)
  assert.ok(!fs.existsSync(ws), 'temp workspace deleted')
})

test('a caller-provided workspace is created if missing and never deleted by close()', async () => {
  const ws = path.join(tmpDir('kst-userws-'), 'nested', 'ws')
  const sbx = await new Sandbox({ workspace: ws }).open()
  try {
    assert.equal(sbx.workspacePath, fs.realpathSync(ws))
    await sbx.writeFile('keep.txt', 'kept')
    await sbx.runCode('open("by-box.txt", "w").write("box")')
  } finally {
    await sbx.close()
  }
  assert.equal(fs.readFileSync(path.join(ws, 'keep.txt'), 'utf8'), 'kept')
  assert.equal(fs.readFileSync(path.join(ws, 'by-box.txt'), 'utf8'), 'box')
  // reopening the same workspace sees the files
  await withSandbox({ workspace: ws }, async (s) => {
    assert.equal((await s.readFile('keep.txt')).toString(), 'kept')
  })
  assert.ok(fs.existsSync(path.join(ws, 'keep.txt')))
})

test('a sensitive or relative workspace is refused at open()', async () => {
  const link = path.join(tmpDir(), 'innocent')
  fs.symlinkSync('/etc', link)
  for (const ws of ['/etc', '/', '/proc', 'relative/ws', link]) {
    const s = new Sandbox({ workspace: ws })
    await assert.rejects(s.open(), (e) => e instanceof MountRefused, ws)
  }
  assert.ok(!fs.existsSync(path.join(process.cwd(), 'relative')), 'a relative workspace was not created')
})

test('$HOME as the workspace is refused', async () => {
  const home = tmpDir('kst-home-')
  const r = await runNode(
    `
const kern = require(REPO)
new kern.Sandbox({ workspace: process.env.HOME }).open()
  .then(() => console.log(JSON.stringify({ opened: true })), (e) => console.log(JSON.stringify({ name: e.name, mr: e instanceof kern.MountRefused })))
`,
    { env: { HOME: home } },
  )
  assert.equal(r.code, 0, r.stderr)
  assert.deepEqual(lastJson(r.stdout), { name: 'MountRefused', mr: true })
})

test('Symbol.asyncDispose closes the sandbox and deletes its temp workspace', async () => {
  assert.equal(typeof Symbol.asyncDispose, 'symbol')
  const sbx = await new Sandbox().open()
  const ws = sbx.workspacePath
  assert.equal(typeof sbx[Symbol.asyncDispose], 'function')
  await sbx[Symbol.asyncDispose]()
  assert.ok(!fs.existsSync(ws))
  await assert.rejects(sbx.runCode('print(1)'), SandboxError)
})

test('close() while a call runs ends the call and its box', async () => {
  const marker = `kst-closing-${rand()}`
  const sbx = await new Sandbox({ timeoutS: 60 }).open()
  const call = sbx.runCode(`# ${marker}\nimport time\ntime.sleep(60)`)
  call.catch(() => {})
  assert.ok(await waitFor(() => procsMatching(marker).length > 0, 10_000), 'the box started')
  const t0 = Date.now()
  await sbx.close()
  const outcome = await call.then(
    (r) => ({ resolved: r }),
    (e) => ({ rejected: e }),
  )
  assert.ok(Date.now() - t0 < 10_000)
  if (outcome.rejected) assert.ok(outcome.rejected instanceof SandboxError, String(outcome.rejected))
  else assert.notEqual(outcome.resolved.exitCode, 0)
  assert.ok(await waitFor(() => procsMatching(marker).length === 0, 3000), JSON.stringify(procsMatching(marker)))
})

// --- defect 5: nothing outlives the Node process ----------------------------------------------

test('normal exit of a process with an unclosed temp workspace leaves no kern-sbx dir', async () => {
  const r = await runNode(
    `
const kern = require(REPO)
new kern.Sandbox().open().then(async (s) => {
  const r = await s.runCode('open("f.txt", "w").write("x")')
  console.log(JSON.stringify({ ws: s.workspacePath, code: r.exitCode }))
  // no close(): the process just ends
})
`,
    { timeoutMs: 30_000 },
  )
  assert.equal(r.code, 0, r.stderr)
  const j = lastJson(r.stdout)
  assert.equal(j.code, 0)
  assert.deepEqual(sessionDirs(r.pid), [])
  assert.ok(!fs.existsSync(j.ws))
})

test('process.exit() mid-call leaves no kern-sbx dir and no running box', async () => {
  const marker = `kst-exit-${rand()}`
  const r = await runNode(
    `
const kern = require(REPO)
const marker = ${JSON.stringify(marker)}
new kern.Sandbox({ timeoutS: 60 }).open().then(async (s) => {
  s.run(['python3', '-c', '# ' + marker + '\\nimport time\\ntime.sleep(60)']).catch(() => {})
  const fs = require('fs')
  const seen = () => fs.readdirSync('/proc').some((p) => { try { return /^\\d+$/.test(p) && fs.readFileSync('/proc/' + p + '/cmdline', 'latin1').includes(marker) } catch { return false } })
  const t0 = Date.now()
  while (!seen() && Date.now() - t0 < 10000) await new Promise((r) => setTimeout(r, 50))
  console.log(JSON.stringify({ ws: s.workspacePath, running: seen() }))
  process.exit(0)
})
`,
    { timeoutMs: 30_000 },
  )
  assert.equal(r.code, 0, r.stderr)
  const j = lastJson(r.stdout)
  assert.equal(j.running, true, 'precondition: the box was running at exit')
  assert.ok(
    await waitFor(() => procsMatching(marker).length === 0, 3000),
    `box left running: ${JSON.stringify(procsMatching(marker))}`,
  )
  assert.deepEqual(sessionDirs(r.pid), [])
  assert.ok(!fs.existsSync(j.ws))
})

test('a SIGKILLed Node takes its box along; the next open() elsewhere reclaims its session dir', async () => {
  const marker = `kst-sigkill-${rand()}`
  let child
  const done = runNode(
    `
const kern = require(REPO)
const marker = ${JSON.stringify(marker)}
new kern.Sandbox({ timeoutS: 60 }).open().then(async (s) => {
  console.log(JSON.stringify({ ws: s.workspacePath }))
  await s.runCode('# ' + marker + '\\nimport time\\ntime.sleep(60)')
})
`,
    { timeoutMs: 60_000, onSpawn: (c) => (child = c) },
  )
  assert.ok(await waitFor(() => procsMatching(marker).length > 0, 15_000), 'the box started')
  const childPid = child.pid
  assert.equal(sessionDirs(childPid).length, 1, 'the child has its session dir')
  child.kill('SIGKILL')
  const r = await done
  assert.equal(r.signal, 'SIGKILL')
  assert.ok(
    await waitFor(() => procsMatching(marker).length === 0, 5000),
    `box survived its Node process: ${JSON.stringify(procsMatching(marker))}`,
  )
  // The dead process's session dir stays until some process opens a sandbox (which may already
  // have happened if other kern-sandbox users run on this machine right now).
  const other = await runNode(
    `const kern = require(REPO); new kern.Sandbox().open().then((s) => s.close()).then(() => console.log('{"ok":true}'))`,
    { timeoutMs: 30_000 },
  )
  assert.equal(other.code, 0, other.stderr)
  assert.deepEqual(sessionDirs(childPid), [], 'reclaimed by the next open() in another process')
})

test('Ctrl-C (SIGINT) on a Node process mid-call takes its box along', async () => {
  const marker = `kst-sigint-${rand()}`
  let child
  const done = runNode(
    `
const kern = require(REPO)
new kern.Sandbox({ timeoutS: 60 }).open().then((s) => s.runCode(${JSON.stringify(`# ${marker}
import time
time.sleep(60)`)}))
`,
    { timeoutMs: 60_000, onSpawn: (c) => (child = c) },
  )
  assert.ok(await waitFor(() => procsMatching(marker).length > 0, 15_000), 'the box started')
  child.kill('SIGINT')
  const r = await done
  assert.equal(r.signal, 'SIGINT')
  assert.ok(
    await waitFor(() => procsMatching(marker).length === 0, 5000),
    `box survived its Node process: ${JSON.stringify(procsMatching(marker))}`,
  )
})

test("a terminated worker thread takes its boxes and temp workspace along; the main thread's session is untouched", async () => {
  const marker = `kst-worker-${rand()}`
  const workerSource = [
    "const { parentPort } = require('worker_threads')",
    `const kern = require(${JSON.stringify(require('./helpers').repo)})`,
    'new kern.Sandbox({ timeoutS: 60 }).open().then((s) => {',
    '  parentPort.postMessage(s.workspacePath)',
    `  s.run(['python3', '-c', ${JSON.stringify(`# ${marker}\nimport time\ntime.sleep(60)`)}]).catch(() => {})`,
    '})',
  ].join('\n')
  const r = await runNode(
    `
const { Worker } = require('worker_threads')
const fs = require('fs')
const kern = require(REPO)
const marker = ${JSON.stringify(marker)}
const seen = () => fs.readdirSync('/proc').some((p) => { try { return fs.readFileSync('/proc/' + p + '/cmdline', 'latin1').includes(marker) } catch { return false } })
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
async function main() {
  const mine = await new kern.Sandbox().open()
  const w = new Worker(${JSON.stringify(workerSource)}, { eval: true })
  const ws = await new Promise((res) => w.once('message', res))
  for (let i = 0; i < 200 && !seen(); i++) await sleep(50)
  const wasRunning = seen()
  await w.terminate()
  let gone = false
  for (let i = 0; i < 60 && !gone; i++) { gone = !seen(); if (!gone) await sleep(50) }
  const after = await mine.runCode('print("main ok")')
  console.log(JSON.stringify({ wasRunning, gone, workerWs: fs.existsSync(ws), mainWs: fs.existsSync(mine.workspacePath), main: after.stdout }))
  await mine.close()
}
main()
`,
    { timeoutMs: 60_000 },
  )
  assert.equal(r.code, 0, r.stderr)
  assert.deepEqual(lastJson(r.stdout), {
    wasRunning: true,
    gone: true,
    workerWs: false,
    mainWs: true,
    main: 'main ok\n',
  })
})

test('open() does not reclaim the session dir of a live process', async (t) => {
  const live = await openSandbox(t)
  const r = await runNode(
    `const kern = require(REPO); new kern.Sandbox().open().then((s) => s.close()).then(() => console.log('{"ok":true}'))`,
    { timeoutMs: 30_000 },
  )
  assert.equal(r.code, 0, r.stderr)
  assert.ok(fs.existsSync(live.workspacePath), 'a live session is left alone')
})

test('a call running past 15 s of otherwise idle runtime completes; a call after 12 s idle still runs', async (t) => {
  // PDEATHSIG follows the thread that forked kern: if that thread is one tokio retires after ~10 s
  // idle, a healthy box dies mid-run. Both halves run at once to keep the suite short.
  const long = await openSandbox(t, { timeoutS: 60 })
  const idle = await openSandbox(t, { timeoutS: 30 })
  const t0 = Date.now()
  const longCall = long.runCode('import time\ntime.sleep(16)\nprint("survived")')
  const idleCall = (async () => {
    await idle.runCode('print(1)')
    await sleep(12_000)
    return idle.runCode('import time\ntime.sleep(1)\nprint("ok")')
  })()
  const [r, i] = await Promise.all([longCall, idleCall])
  assert.equal(r.fault, null, JSON.stringify(r.fault))
  assert.equal(r.exitCode, 0, r.stderr)
  assert.equal(r.stdout, 'survived\n')
  assert.ok(Date.now() - t0 >= 15_500)
  assert.equal(i.fault, null, JSON.stringify(i.fault))
  assert.equal(i.stdout, 'ok\n', i.stderr)
})
