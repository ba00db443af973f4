'use strict'
// Machines (Sandbox#machine): one persistent box, its processes, stdin, signals, deadlines, files
// and ports, on whichever kern the suite drives.

const test = require('node:test')
const assert = require('node:assert/strict')
const net = require('node:net')
const http = require('node:http')
const fs = require('node:fs')
const path = require('node:path')
const { kern, openSandbox, openMachine, waitFor, runNode, realKern, tmpDir } = require('./helpers.js')

const { SandboxError, Machine } = kern

async function machine(t, sbxOpts = {}, opts = {}) {
  const sbx = await openSandbox(t, sbxOpts)
  return { sbx, m: await openMachine(t, sbx, opts) }
}

const coded = (code) => (e) => e instanceof SandboxError && e.code === code

test('a machine runs commands in one persistent box: state, /tmp and processes are shared', async (t) => {
  const { m } = await machine(t)
  assert.ok(m instanceof Machine)
  assert.equal(m.alive, true)
  assert.equal(m.workdir, '/workspace')
  const r = await m.exec('echo hi; pwd')
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'hi\n/workspace\n')
  assert.equal(r.fault, null)
  await m.exec(['sh', '-c', 'echo kept > /tmp/state'])
  assert.equal((await m.exec('cat /tmp/state')).stdout, 'kept\n')
  const bg = await m.spawn(['sleep', '30'])
  const ps = await m.exec('ps -o pid= -p ' + bg.pid + ' 2>/dev/null || ls /proc/' + bg.pid)
  assert.equal(ps.exitCode, 0, 'the spawned process is visible to a later exec')
})

test('exec: argv runs without a shell; exit codes, stderr, cwd, env and stdin', async (t) => {
  const { m } = await machine(t, { env: { FROM_SESSION: 's' } })
  const literal = await m.exec(['echo', '$HOME', '*'])
  assert.equal(literal.stdout, '$HOME *\n')
  const r = await m.exec('echo out; echo err >&2; exit 3')
  assert.deepEqual([r.stdout, r.stderr, r.exitCode], ['out\n', 'err\n', 3])
  await m.mkdir('/tmp/here')
  assert.equal((await m.exec('pwd', { cwd: '/tmp/here' })).stdout, '/tmp/here\n')
  const env = await m.exec('echo $FROM_SESSION $EXTRA', { env: { EXTRA: 'x y' } })
  assert.equal(env.stdout, 's x y\n')
  assert.equal((await m.exec(['cat'], { stdin: 'piped\n' })).stdout, 'piped\n')
  assert.equal((await m.exec(['cat'])).stdout, '', 'stdin is at EOF by default')
  const big = Buffer.alloc(3 << 20, 'z')
  assert.equal((await m.exec(['wc', '-c'], { stdin: big })).stdout.trim(), String(big.length))
})

test('exec: a missing program or cwd rejects with a coded SandboxError', async (t) => {
  const { m } = await machine(t)
  await assert.rejects(m.exec(['/no/such/program']), coded('ERR_NOT_FOUND'))
  await assert.rejects(m.exec('true', { cwd: '/no/such/dir' }), coded('ERR_NOT_FOUND'))
  await assert.rejects(m.exec([]), coded('ERR_INVALID_OPTION'))
  await assert.rejects(m.exec(['echo', 1]), coded('ERR_INVALID_OPTION'))
})

test('exec: a deadline kills the process group (fault timeout); the machine lives on', async (t) => {
  const { m } = await machine(t)
  const r = await m.exec('sleep 60 & sleep 60; echo never', { timeoutS: 1 })
  assert.equal(r.fault && r.fault.type, 'timeout')
  assert.notEqual(r.exitCode, 0)
  assert.equal(r.stdout, '')
  const after = await m.exec('pgrep -x sleep || ls /proc | grep -c "^[0-9]"')
  assert.doesNotMatch(after.stdout, /^\d+\n\d+/, 'both sleeps are gone')
  assert.equal((await m.exec('echo alive')).stdout, 'alive\n')
})

test('exec: a background child does not hold the result', async (t) => {
  const { m } = await machine(t)
  const r = await m.exec('sleep 30 & echo started', { timeoutS: 20 })
  assert.equal(r.stdout, 'started\n')
  assert.equal(r.fault, null)
})

test('exec: an AbortSignal stops the process and rejects with its reason', async (t) => {
  const { m } = await machine(t)
  const ac = new AbortController()
  const p = m.exec(['sleep', '60'], { signal: ac.signal })
  setTimeout(() => ac.abort(new Error('stop it')), 300)
  await assert.rejects(p, /stop it/)
  assert.equal((await m.exec('echo ok')).stdout, 'ok\n')
})

test('exec: live output reaches onStdout/onStderr before the result; maxOutputBytes caps capture', async (t) => {
  const { m } = await machine(t)
  const out = []
  const err = []
  const r = await m.exec('echo a; echo b >&2; echo c', {
    onStdout: (c) => out.push(c.toString()),
    onStderr: (c) => err.push(c.toString()),
  })
  assert.equal(out.join(''), 'a\nc\n')
  assert.equal(err.join(''), 'b\n')
  assert.equal(r.stdout, 'a\nc\n')
  const capped = await m.exec('head -c 100000 /dev/zero', { maxOutputBytes: 1000 })
  assert.equal(capped.stdout.length, 1000)
  assert.equal(capped.truncated, true)
})

test('spawn: stdin stays open for write()/end(); wait() gives the result; exitCode follows', async (t) => {
  const { m } = await machine(t)
  const chunks = []
  const p = await m.spawn(['cat'], { stdin: true, onStdout: (c) => chunks.push(c.toString()) })
  assert.ok(p.pid > 1)
  assert.equal(p.exitCode, null)
  await p.write('one\n')
  await waitFor(() => chunks.join('') === 'one\n', 10_000)
  await p.write(Buffer.from('two\n'))
  await p.end()
  const r = await p.wait()
  assert.equal(r.stdout, 'one\ntwo\n')
  assert.equal(r.exitCode, 0)
  assert.equal(p.exitCode, 0)
  await assert.rejects(p.write('late'), coded('ERR_PROCESS_EXITED'))
  // A program that read what it needed and exited before the close: end() still resolves.
  const one = await m.spawn(['head', '-n', '1'], { stdin: true })
  await one.write('only\n')
  assert.equal((await one.wait()).stdout, 'only\n')
  await one.end()
  const closed = await m.spawn(['sleep', '5'])
  await assert.rejects(closed.write('x'), coded('ERR_STDIN_CLOSED'))
  await closed.kill()
})

test('spawn: kill() signals the process group, then reports false once it exited', async (t) => {
  const { m } = await machine(t)
  const p = await m.spawn('sleep 60 & sleep 60')
  assert.equal(await p.kill('SIGTERM'), true)
  const r = await p.wait()
  assert.equal(r.exitCode, 143)
  assert.equal(await p.kill(), false)
  const left = await m.exec('ps -eo comm= 2>/dev/null | grep -c "^sleep$" || true')
  assert.equal(left.stdout.trim(), '0')
})

test('spawn: a deadline given to a process kills it with fault timeout', async (t) => {
  const { m } = await machine(t)
  const p = await m.spawn(['sleep', '60'], { timeoutS: 0.5 })
  const r = await p.wait()
  assert.equal(r.fault && r.fault.type, 'timeout')
  assert.equal(r.exitCode, 137)
})

test('processes() lists running processes; attach() follows one from now on', async (t) => {
  const { m } = await machine(t)
  const p = await m.spawn('while true; do echo tick; sleep 0.1; done', { cwd: '/tmp' })
  const list = await m.processes()
  const mine = list.find((x) => x.pid === p.pid)
  assert.deepEqual(mine, {
    pid: p.pid,
    command: '/bin/sh',
    args: ['-c', 'while true; do echo tick; sleep 0.1; done'],
    cwd: '/tmp',
    pty: false,
  })
  const seen = []
  const a = await m.attach(p.pid, { onStdout: (c) => seen.push(c.toString()) })
  await waitFor(() => seen.join('').includes('tick'), 10_000)
  a.detach()
  await p.kill()
  await p.wait()
  assert.equal(
    (await m.processes()).some((x) => x.pid === p.pid),
    false,
  )
  await assert.rejects(m.attach(999999), coded('ERR_PROCESS_NOT_FOUND'))
})

test('pty: a process on a terminal sees a tty of the given size, takes input and resizes', async (t) => {
  const { m } = await machine(t)
  let screen = ''
  const p = await m.spawn(['sh'], { pty: { cols: 100, rows: 30 }, onData: (d) => (screen += d.toString()) })
  await p.write('tty; stty size\n')
  await waitFor(() => /\/dev\/pts\/\d+/.test(screen) && /30 100/.test(screen), 10_000)
  await p.resize({ cols: 120, rows: 40 })
  await p.write('stty size\n')
  await waitFor(() => /40 120/.test(screen), 10_000)
  await p.write('exit 7\n')
  const r = await p.wait()
  assert.equal(r.exitCode, 7)
  assert.match(r.stdout, /40 120/)
  const plain = await m.spawn(['sleep', '5'])
  await assert.rejects(plain.resize({ cols: 10, rows: 10 }), coded('ERR_INVALID_OPTION'))
  await plain.kill()
})

test('files: write, read, stat, list, mkdir, rename and remove anywhere in the machine', async (t) => {
  const { sbx, m } = await machine(t)
  await m.writeFile('/opt/app/deep/a.txt', 'hello')
  assert.equal((await m.readFile('/opt/app/deep/a.txt')).toString(), 'hello')
  assert.equal((await m.exec('cat /opt/app/deep/a.txt')).stdout, 'hello')
  await m.writeFile('rel.txt', 'in the workspace')
  assert.equal((await sbx.readFile('rel.txt')).toString(), 'in the workspace')
  await m.writeFile('/tmp/x.sh', '#!/bin/sh\necho run\n', { mode: 0o755 })
  assert.equal((await m.exec('/tmp/x.sh')).stdout, 'run\n')
  const st = await m.stat('/tmp/x.sh')
  assert.equal(st.type, 'file')
  assert.equal(st.mode & 0o777, 0o755)
  assert.equal(st.size, 19)
  assert.equal(st.path, '/tmp/x.sh')
  assert.equal(st.owner, 'root')
  await m.exec('ln -s /tmp/x.sh /tmp/link')
  const link = await m.stat('/tmp/link')
  assert.equal(link.type, 'symlink')
  assert.equal(link.symlinkTarget, '/tmp/x.sh')
  assert.equal(await m.mkdir('/tmp/d/e'), true)
  assert.equal(await m.mkdir('/tmp/d/e'), false)
  const names = (await m.list('/opt/app', { depth: 2 })).map((e) => `${e.type}:${e.path}`).sort()
  assert.deepEqual(names, ['dir:/opt/app/deep', 'file:/opt/app/deep/a.txt'])
  await m.rename('/opt/app/deep/a.txt', '/opt/b.txt')
  assert.equal((await m.readFile('/opt/b.txt')).toString(), 'hello')
  await m.remove('/opt/app')
  await assert.rejects(m.stat('/opt/app'), coded('ERR_NOT_FOUND'))
  await assert.rejects(m.remove('/opt/app'), coded('ERR_NOT_FOUND'))
  await assert.rejects(m.readFile('/tmp'), coded('ERR_IS_A_DIRECTORY'))
  await assert.rejects(m.list('/tmp/x.sh'), coded('ERR_NOT_A_DIRECTORY'))
  await m.writeFile('/tmp/big', Buffer.alloc(5000))
  await assert.rejects(m.readFile('/tmp/big', { maxBytes: 100 }), coded('ERR_TOO_LARGE'))
})

test('files: writeFile sets and clears user.* extended attributes; entries report them; owner', async (t) => {
  const { m } = await machine(t)
  await m.writeFile('/tmp/x/a.txt', 'a', { xattrs: { 'user.e2b.k': 'v', 'user.other': 'o' } })
  assert.deepEqual((await m.stat('/tmp/x/a.txt')).xattrs, { 'user.e2b.k': 'v', 'user.other': 'o' })
  assert.deepEqual((await m.stat('/tmp/x')).xattrs, {})
  // Set in the box by a program: reported too.
  await m.exec(['python3', '-c', "import os; os.setxattr('/tmp/x/a.txt', 'user.e2b.by', b'prog')"])
  const [listed] = await m.list('/tmp/x')
  assert.equal(listed.xattrs['user.e2b.by'], 'prog')
  // clearXattrs removes that prefix only, before the new ones are set; a rename keeps them.
  await m.writeFile('/tmp/x/a.txt', 'b', { clearXattrs: 'user.e2b.', xattrs: { 'user.e2b.n': '1' } })
  await m.rename('/tmp/x/a.txt', '/tmp/x/b.txt')
  assert.deepEqual((await m.stat('/tmp/x/b.txt')).xattrs, { 'user.e2b.n': '1', 'user.other': 'o' })
  await m.writeFile('/tmp/x/b.txt', 'c')
  assert.deepEqual((await m.stat('/tmp/x/b.txt')).xattrs, { 'user.e2b.n': '1', 'user.other': 'o' })
  for (const bad of [{ xattrs: { 'trusted.k': 'v' } }, { xattrs: { 'user.': 'v' } }, { clearXattrs: 'security.' }]) {
    await assert.rejects(m.writeFile('/tmp/x/c.txt', 'c', bad), coded('ERR_INVALID_OPTION'))
  }
  await assert.rejects(m.writeFile('/tmp/x/c.txt', 'c', { xattrs: { 'user.k': 1 } }), TypeError)
  // owner: a user of the box owns what the call creates (root here: the one uid every box maps).
  await m.writeFile('/tmp/o/p/f.txt', 'f', { owner: 'root' })
  assert.equal((await m.stat('/tmp/o/p/f.txt')).owner, 'root')
  assert.equal(await m.mkdir('/tmp/o/q', { owner: '0' }), true)
  await assert.rejects(m.writeFile('/tmp/o/g.txt', 'g', { owner: 'no-such-user' }), coded('ERR_INVALID_OPTION'))
  await assert.rejects(m.mkdir('/tmp/o/r', { owner: 'no-such-user' }), coded('ERR_INVALID_OPTION'))
  assert.equal((await m.exec('ls /tmp/o')).stdout, 'p\nq\n', 'a refused call creates nothing')
  await assert.rejects(m.mkdir('/tmp/o/r', { owner: 7 }), TypeError)
})

test('files: a symlink planted in the machine resolves inside the machine, never on the host', async (t) => {
  const { m } = await machine(t)
  await m.exec('ln -s /etc/hostname /tmp/h')
  const inBox = (await m.exec('cat /etc/hostname')).stdout
  assert.equal((await m.readFile('/tmp/h')).toString(), inBox)
  await m.exec('ln -sfn / /workspace/root-link')
  assert.equal((await m.readFile('/workspace/root-link/etc/hostname')).toString(), inBox)
})

test('watch: creates, writes, renames and removes below a directory are reported', async (t) => {
  const { m } = await machine(t)
  await m.mkdir('/tmp/w')
  const events = []
  const w = await m.watch('/tmp/w', (e) => events.push(`${e.type}:${e.path}`), { recursive: true })
  await m.exec(
    'echo 1 > /tmp/w/a; mkdir /tmp/w/sub; sleep 0.2; echo 2 > /tmp/w/sub/b; mv /tmp/w/a /tmp/w/c; rm /tmp/w/c',
  )
  await waitFor(() => events.includes('remove:/tmp/w/c') && events.includes('create:/tmp/w/sub/b'), 10_000)
  assert.ok(events.includes('create:/tmp/w/a'), events.join(' '))
  assert.ok(events.includes('write:/tmp/w/a'), events.join(' '))
  assert.ok(events.includes('rename:/tmp/w/a'), events.join(' '))
  await w.close()
  const n = events.length
  await m.exec('echo 3 > /tmp/w/after')
  await new Promise((r) => setTimeout(r, 300))
  assert.equal(events.length, n, 'no event after close()')
  await assert.rejects(
    m.watch('/no/such', () => {}),
    coded('ERR_NOT_FOUND'),
  )
})

test('exposePort: a server in the machine answers on 127.0.0.1 of the host, network off', async (t) => {
  const { m } = await machine(t, { network: false })
  await m.writeFile(
    '/tmp/srv.py',
    [
      'import http.server, socketserver',
      'class H(http.server.BaseHTTPRequestHandler):',
      '    def do_GET(self):',
      '        b = ("path=" + self.path).encode()',
      '        self.send_response(200); self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)',
      '    def log_message(self, *a): pass',
      'socketserver.TCPServer.allow_reuse_address = True',
      'socketserver.TCPServer(("127.0.0.1", 8000), H).serve_forever()',
    ].join('\n'),
  )
  await m.spawn(['python3', '/tmp/srv.py'])
  const ep = await m.exposePort(8000)
  assert.equal(ep.host, '127.0.0.1')
  assert.equal(ep.machinePort, 8000)
  assert.equal(ep.url, `http://127.0.0.1:${ep.port}`)
  assert.deepEqual(await m.exposePort(8000), ep, 'the same port twice is the same address')
  const get = () =>
    new Promise((resolve, reject) => {
      http
        .get(`${ep.url}/hello`, (res) => {
          let b = ''
          res.on('data', (c) => (b += c))
          res.on('end', () => resolve(b))
        })
        .on('error', reject)
    })
  await waitFor(async () => (await get().catch(() => '')) === 'path=/hello', 15_000)
  const bodies = await Promise.all(Array.from({ length: 5 }, get))
  assert.deepEqual(bodies, Array(5).fill('path=/hello'))
  const closed = await m.exposePort(8001)
  const reset = await new Promise((resolve) => {
    const s = net.connect(closed.port, '127.0.0.1')
    s.on('error', () => resolve(true))
    s.on('close', () => resolve(true))
    s.on('data', () => resolve(false))
  })
  assert.equal(reset, true, 'nothing listening in the machine: the connection ends')
})

test('metrics() reports memory, pids and CPU', async (t) => {
  const { m } = await machine(t)
  const x = await m.metrics()
  assert.ok(x.memoryBytes > 0)
  assert.ok(x.pids >= 1)
  assert.ok(x.cpuPercent >= 0)
  assert.ok(x.memoryLimitBytes === null || x.memoryLimitBytes > 0)
})

test('close() ends the processes and the box; calls after it reject ERR_MACHINE_GONE', async (t) => {
  const sbx = await openSandbox(t)
  const m = await sbx.machine()
  const p = await m.spawn(['sleep', '60'])
  await m.close()
  assert.equal(m.alive, false)
  const r = await p.wait()
  assert.notEqual(r.exitCode, 0)
  await assert.rejects(m.exec('true'), coded('ERR_MACHINE_GONE'))
  await m.close()
})

test('sandbox.close() closes its machines', async (t) => {
  const sbx = await openSandbox(t)
  const m = await sbx.machine()
  await m.spawn(['sleep', '60'])
  await sbx.close()
  assert.equal(m.alive, false)
  await assert.rejects(m.exec('true'), coded('ERR_MACHINE_GONE'))
})

test('a machine with a process running does not keep Node alive, and does not outlive it', async () => {
  // kern's scratch for the box goes where the child's XDG_RUNTIME_DIR says: it must be gone too.
  const runtime = tmpDir('kst-xdg-')
  const r = await runNode(
    `
    const { Sandbox } = require(${JSON.stringify(require.resolve('..'))})
    ;(async () => {
      const sbx = await new Sandbox().open()
      const m = await sbx.machine()
      const p = await m.spawn(['sleep', '300'])
      console.log(JSON.stringify({ name: m.name }))
    })()
  `,
    { timeoutMs: 60_000, env: { XDG_RUNTIME_DIR: runtime } },
  )
  assert.equal(r.code, 0, r.stderr)
  const { name } = JSON.parse(r.stdout.trim().split('\n').pop())
  await waitFor(() => !require('node:child_process').execSync('ps -eo args').toString().includes(name), 10_000)
  const scratch = path.join(runtime, 'kern', 'scratch')
  const left = fs.existsSync(scratch) ? fs.readdirSync(scratch) : []
  assert.deepEqual(left, [], "kern's scratch of the machine's box was left behind")
})

test('machine options: its own image is checked; bad options reject before a box starts', async (t) => {
  const sbx = await openSandbox(t)
  await assert.rejects(sbx.machine({ image: '--evil' }), SandboxError)
  await assert.rejects(sbx.machine({ ports: 'x' }), coded('ERR_INVALID_OPTION'))
  await assert.rejects(sbx.machine({ timeoutS: -1 }), coded('ERR_INVALID_OPTION'))
  if (realKern) {
    const m = await openMachine(t, sbx, { image: 'node:20-slim' })
    assert.match((await m.exec('node -e "console.log(1+1)"')).stdout, /2/)
  }
})

test('kernel(): a warm Python kernel inside the machine sees its files and processes', async (t) => {
  const { m } = await machine(t)
  await m.writeFile('/tmp/data.txt', 'from the machine')
  const k = await m.kernel()
  t.after(() => k.close())
  assert.deepEqual(await m.processes(), [], "a kernel's driver is not one of the listed processes")
  const r = await k.runCode('x = open("/tmp/data.txt").read()\nx')
  assert.equal(r.exitCode, 0, r.stderr)
  assert.equal(r.results[0].text, "'from the machine'")
  assert.equal((await k.runCode('x.upper()')).results[0].text, "'FROM THE MACHINE'")
  await k.runCode('open("/tmp/from-kernel", "w").write("k")')
  assert.equal((await m.exec('cat /tmp/from-kernel')).stdout, 'k')
  const slow = await k.runCode('import time\ntime.sleep(30)', { timeoutS: 1 })
  assert.equal(slow.fault && slow.fault.type, 'timeout')
  assert.equal((await m.exec('echo machine lives')).stdout, 'machine lives\n')
})

test('kernel(): an aborted JavaScript cell is interrupted and the kernel keeps its state', async (t) => {
  const { m } = await machine(t)
  const k = await m.kernel({ language: 'javascript' })
  t.after(() => k.close())
  await k.runCode('globalThis.kept = 41')
  const ac = new AbortController()
  const p = k.runCode('await new Promise((r) => setTimeout(r, 30000))', { signal: ac.signal })
  setTimeout(() => ac.abort(new Error('enough')), 300)
  await assert.rejects(p, /enough/)
  assert.equal((await k.runCode('kept + 1')).results[0].text, '42')
  const fs = await k.runCode('require("node:fs").readdirSync("/tmp").length >= 0')
  assert.equal(fs.results[0].text, 'true')
})
