'use strict'
// kern-sandbox/mastra: Mastra's own workspace tools (createWorkspaceTools on a Workspace of a
// KernSandbox and a KernFilesystem) drive the adapter; then the sandbox and filesystem contracts.

const test = require('node:test')
const assert = require('node:assert/strict')
const { eachMachine, freePort, fetchWhenUp } = require('./harness.js')
const {
  Workspace,
  createWorkspaceTools,
  WORKSPACE_TOOLS,
  FileNotFoundError,
  FileExistsError,
  IsDirectoryError,
  DirectoryNotFoundError,
  DirectoryNotEmptyError,
  NotDirectoryError,
  StaleFileError,
  supportsNetworking,
} = require('@mastra/core/workspace')
const { KernSandbox, KernFilesystem } = require('../../lib/mastra/entry.js')

const T = { ...WORKSPACE_TOOLS.FILESYSTEM, ...WORKSPACE_TOOLS.SANDBOX }

eachMachine('mastra: the workspace tools drive KernSandbox and KernFilesystem', () => {
  let ws
  let sandbox
  let tools
  const call = (name, input) => tools[name].execute(input, { workspace: ws })
  test.before(async () => {
    sandbox = new KernSandbox({ env: { GREETING: 'hello' } })
    ws = new Workspace({ sandbox, filesystem: new KernFilesystem({ sandbox }) })
    await ws.init()
    tools = await createWorkspaceTools(ws)
  })
  test.after(() => ws?.destroy())

  test.it('every workspace tool is offered', () => {
    for (const name of Object.values(T)) {
      if (name === T.AST_EDIT) continue
      assert.ok(tools[name], `${name} missing`)
    }
  })

  test.it('writes a file, runs a command, serves it on an exposed port, reads it back', async () => {
    assert.match(
      await call(T.WRITE_FILE, { path: '/site/index.html', content: 'hello from mastra\n' }),
      /Wrote 18 bytes/,
    )
    const ran = await call(T.EXECUTE_COMMAND, { command: 'echo "$GREETING"; cat site/index.html; pwd' })
    assert.match(String(ran), /hello\nhello from mastra\n\/workspace/)
    const port = await freePort()
    const started = await call(T.EXECUTE_COMMAND, {
      command: `cd site && exec python3 -u -m http.server ${port} --bind 127.0.0.1`,
      background: true,
    })
    const pid = /(\d+)/.exec(String(started))?.[1]
    assert.ok(pid, String(started))
    assert.ok(supportsNetworking(sandbox))
    const url = await sandbox.networking.getPortUrl(port)
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/)
    const res = await fetchWhenUp(`${url}/index.html`)
    assert.equal(await res.text(), 'hello from mastra\n')
    // The server logs the request after answering it: poll its output until the line is there.
    let log = ''
    for (let i = 0; i < 100 && !/GET \/index\.html/.test(log); i++) {
      log = String(await call(T.GET_PROCESS_OUTPUT, { pid }))
      await new Promise((r) => setTimeout(r, 50))
    }
    assert.match(log, /GET \/index\.html/)
    assert.match(String(await call(T.KILL_PROCESS, { pid })), /kill|terminat|stop/i)
    const read = await call(T.READ_FILE, { path: '/site/index.html' })
    assert.match(String(read), /hello from mastra/)
  })

  test.it('edit, list, stat, grep, mkdir and delete go through the filesystem', async () => {
    await call(T.WRITE_FILE, { path: '/src/app.py', content: 'x = 1\nprint("x is", x)\n' })
    await call(T.READ_FILE, { path: '/src/app.py' })
    assert.match(
      String(await call(T.EDIT_FILE, { path: '/src/app.py', old_string: 'x = 1', new_string: 'x = 2' })),
      /Replaced|edit/i,
    )
    assert.match(String(await call(T.EXECUTE_COMMAND, { command: 'python3 src/app.py' })), /x is 2/)
    assert.match(String(await call(T.LIST_FILES, { path: '/', maxDepth: 3 })), /app\.py/)
    assert.match(JSON.stringify(await call(T.FILE_STAT, { path: '/src/app.py' })), /file/)
    assert.match(String(await call(T.GREP, { pattern: 'print', path: '/' })), /app\.py/)
    await call(T.MKDIR, { path: '/made/here' })
    assert.equal(await ws.filesystem.exists('/made/here'), true)
    await call(T.DELETE, { path: '/src/app.py' })
    assert.equal(await ws.filesystem.exists('/src/app.py'), false)
  })
})

eachMachine('mastra: KernSandbox', () => {
  test.it('lifecycle, executeCommand options and result, processes, writeFiles, info', async () => {
    const sandbox = new KernSandbox({ env: { A: 'overlay' } })
    assert.equal(sandbox.provider, 'kern')
    assert.equal(await sandbox.networking.getPortUrl(8000), null, 'not running: null')
    try {
      const r = await sandbox.executeCommand('printf', ['%s|', 'two words', "it's"], { cwd: '/tmp', env: { B: 'b' } })
      assert.equal(sandbox.status, 'running', 'started lazily')
      assert.equal(r.success, true)
      assert.equal(r.stdout, "two words|it's|")
      assert.equal(r.exitCode, 0)
      assert.equal(typeof r.executionTimeMs, 'number')
      const env = await sandbox.executeCommand('echo "$A $B"; pwd', [], { env: { B: 'call' } })
      assert.equal(env.stdout, `overlay call\n${sandbox.workingDirectory}\n`)
      const chunks = []
      const fail = await sandbox.executeCommand('echo out; echo err >&2; exit 3', [], {
        onStdout: (d) => chunks.push(d),
      })
      assert.deepEqual([fail.success, fail.exitCode, fail.stdout, fail.stderr], [false, 3, 'out\n', 'err\n'])
      assert.equal(chunks.join(''), 'out\n')
      const slow = await sandbox.executeCommand('sleep 30', [], { timeout: 300 })
      assert.equal(slow.timedOut, true)
      assert.equal(slow.exitCode, 124)
      const ac = new AbortController()
      setTimeout(() => ac.abort(), 200)
      const aborted = await sandbox.executeCommand('sleep 30', [], { abortSignal: ac.signal })
      assert.notEqual(aborted.exitCode, 0)
      const capped = await sandbox.executeCommand('head -c 5000 /dev/zero | tr "\\0" a', [], { maxRetainedBytes: 100 })
      assert.equal(capped.stdout.length, 100)
      assert.equal(capped.stdoutTruncated, true)

      const h = await sandbox.processes.spawn('cat')
      await h.sendStdin('piped\n')
      await h.closeStdin()
      const done = await h.wait()
      assert.equal(done.stdout, 'piped\n')
      const bg = await sandbox.processes.spawn('sleep 30')
      assert.ok((await sandbox.processes.list()).some((p) => p.pid === bg.pid && p.running))
      assert.equal(await sandbox.processes.kill(bg.pid), true)
      assert.equal(await sandbox.processes.get(bg.pid), undefined)
      const ignored = await sandbox.processes.spawn('cat', { stdinMode: 'ignore' })
      assert.equal((await ignored.wait()).exitCode, 0, 'stdin at EOF')
      await assert.rejects(ignored.sendStdin('x'))

      await sandbox.writeFiles([
        { path: 'w/a.sh', content: 'echo ran', mode: 0o755 },
        { path: '/tmp/b.bin', content: Buffer.from([1, 2, 3]) },
      ])
      assert.equal((await sandbox.executeCommand('./w/a.sh')).stdout, 'ran\n')
      await assert.rejects(sandbox.writeFiles([{ path: 'x', content: '', mode: 0o4755 }]))
      const info = await sandbox.getInfo()
      assert.equal(info.provider, 'kern')
      assert.equal(info.status, 'running')
      assert.match(sandbox.getInstructions(), /kern machine/)
      await sandbox._stop()
      assert.equal(sandbox.status, 'stopped')
      assert.equal((await sandbox.executeCommand('echo again')).stdout, 'again\n', 'starts again')
    } finally {
      await sandbox._destroy()
    }
    assert.equal(sandbox.status, 'destroyed')
  })
})

eachMachine('mastra: KernFilesystem', () => {
  let sandbox
  let fs
  test.before(async () => {
    sandbox = new KernSandbox()
    fs = new KernFilesystem({ sandbox })
    await fs._init()
  })
  test.after(() => sandbox?._destroy())

  test.it('read, write, append, copy, move, delete with their errors', async () => {
    await assert.rejects(fs.readFile('/none'), FileNotFoundError)
    await fs.writeFile('/d/a.txt', 'one')
    assert.equal(await fs.readFile('/d/a.txt', { encoding: 'utf8' }), 'one')
    assert.ok(Buffer.isBuffer(await fs.readFile('/d/a.txt')))
    await assert.rejects(fs.writeFile('/d/a.txt', 'x', { overwrite: false }), FileExistsError)
    await assert.rejects(fs.writeFile('/nodir/a.txt', 'x', { recursive: false }), DirectoryNotFoundError)
    await assert.rejects(fs.writeFile('/d', 'x'), IsDirectoryError)
    await assert.rejects(fs.readFile('/d'), IsDirectoryError)
    const st = await fs.stat('/d/a.txt')
    await assert.rejects(
      fs.writeFile('/d/a.txt', 'x', { expectedMtime: new Date(st.modifiedAt.getTime() - 5000) }),
      StaleFileError,
    )
    await fs.writeFile('/d/a.txt', 'one!', { expectedMtime: st.modifiedAt })
    await fs.appendFile('/d/a.txt', ' two')
    assert.equal(await fs.readFile('/d/a.txt', { encoding: 'utf8' }), 'one! two')
    await fs.copyFile('/d/a.txt', '/e/b.txt')
    await assert.rejects(fs.copyFile('/d/a.txt', '/e/b.txt', { overwrite: false }), FileExistsError)
    await assert.rejects(fs.copyFile('/d', '/f'), IsDirectoryError)
    await fs.copyFile('/d', '/f', { recursive: true })
    assert.equal(await fs.readFile('/f/a.txt', { encoding: 'utf8' }), 'one! two')
    await fs.moveFile('/e/b.txt', '/g/c.txt')
    assert.equal(await fs.exists('/e/b.txt'), false)
    assert.equal(await fs.readFile('/g/c.txt', { encoding: 'utf8' }), 'one! two')
    await assert.rejects(fs.deleteFile('/g'), IsDirectoryError)
    await assert.rejects(fs.deleteFile('/g/none'), FileNotFoundError)
    await fs.deleteFile('/g/none', { force: true })
    await fs.deleteFile('/g/c.txt')
    assert.equal(await fs.exists('/g/c.txt'), false)
  })

  test.it('mkdir, rmdir, readdir, stat; the namespace is the working directory, .. stays in it', async () => {
    await fs.mkdir('/m/n/o')
    await fs.mkdir('/m/n/o')
    await fs.writeFile('/m/file.ts', 'let a = 1')
    await fs.writeFile('/m/n/deep.py', 'pass')
    await assert.rejects(fs.mkdir('/m/file.ts'), FileExistsError)
    await assert.rejects(fs.mkdir('/p/q', { recursive: false }), DirectoryNotFoundError)
    const flat = await fs.readdir('/m')
    assert.deepEqual(flat.map((e) => [e.name, e.type]).sort(), [
      ['file.ts', 'file'],
      ['n', 'directory'],
    ])
    const deep = await fs.readdir('/m', { recursive: true })
    assert.ok(deep.some((e) => e.name === 'n/deep.py' && e.type === 'file'))
    assert.deepEqual(
      (await fs.readdir('/m', { recursive: true, extension: '.py' }))
        .filter((e) => e.type === 'file')
        .map((e) => e.name),
      ['n/deep.py'],
    )
    await assert.rejects(fs.readdir('/m/file.ts'), NotDirectoryError)
    await assert.rejects(fs.readdir('/none'), DirectoryNotFoundError)
    const st = await fs.stat('/m/file.ts')
    assert.deepEqual(
      [st.name, st.path, st.type, st.size, st.mimeType],
      ['file.ts', '/m/file.ts', 'file', 9, 'text/typescript'],
    )
    assert.equal((await fs.stat('/m')).type, 'directory')
    await assert.rejects(fs.rmdir('/m'), DirectoryNotEmptyError)
    await assert.rejects(fs.rmdir('/m/file.ts'), NotDirectoryError)
    await fs.rmdir('/m', { recursive: true })
    assert.equal(await fs.exists('/m'), false)
    await fs.writeFile('/../../escape.txt', 'kept inside')
    const where = await sandbox.executeCommand('cat escape.txt; ls /escape.txt 2>&1 || true')
    assert.match(where.stdout, /^kept inside/)
    assert.match(where.stdout, /No such file/)
  })

  test.it('readOnly refuses writes', async () => {
    const ro = new KernFilesystem({ sandbox, readOnly: true })
    await assert.rejects(ro.writeFile('/x', 'y'), /read-only|readonly|read only/i)
    assert.equal(await ro.exists('/'), true)
  })
})

test('KernFilesystem needs a KernSandbox', () => {
  assert.throws(() => new KernFilesystem({ sandbox: {} }), /KernSandbox/)
})
