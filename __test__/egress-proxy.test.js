'use strict'
// The host-side egress proxy (issue 37) through its native surface, on loopback only: HTTPS and
// HTTP servers on 127.0.0.1 with a CA this test makes (openssl CLI), reached through the proxy's
// Unix socket as a box's relay would (CONNECT, absolute-form), names pinned by `hosts`.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const net = require('node:net')
const tls = require('node:tls')
const http = require('node:http')
const https = require('node:https')
const cp = require('node:child_process')

const native = require('../lib/native.js')
const { callNative, SandboxError } = require('../lib/errors.js')
const { makeCerts } = require('./certs')

const SECRET = 'Bearer s3cret-egress-value'
const NO_OPENSSL = cp.spawnSync('openssl', ['version']).status === 0 ? false : 'the openssl CLI is not installed'

/** Answers every request with what it saw: method, url, headers, body length. */
function echo(req, res) {
  let n = 0
  req.on('data', (c) => (n += c.length))
  req.on('end', () => {
    const body = JSON.stringify({ method: req.method, url: req.url, headers: req.headers, bodyBytes: n })
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
    res.end(body)
  })
}

function listen(server) {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)))
}

function fdCount() {
  return fs.readdirSync('/proc/self/fd').length
}

/** Sends CONNECT on a new stream of the proxy's socket: { status, text } and, on 200, the socket. */
function connectVia(sock, target) {
  return new Promise((resolve, reject) => {
    const s = net.createConnection(sock)
    let buf = Buffer.alloc(0)
    s.on('error', reject)
    s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`)
    const onData = (d) => {
      buf = Buffer.concat([buf, d])
      const end = buf.indexOf('\r\n\r\n')
      if (end < 0) return
      const status = Number(buf.toString('latin1', 9, 12))
      if (status === 200) {
        s.off('data', onData)
        s.pause()
        assert.equal(buf.length, end + 4, 'nothing after the 200 head')
        resolve({ status, socket: s })
        return
      }
      s.off('data', onData)
      s.on('data', (d2) => (buf = Buffer.concat([buf, d2])))
      s.on('end', () => resolve({ status, text: buf.toString('utf8') }))
    }
    s.on('data', onData)
  })
}

/** A GET over TLS through a CONNECT: { status, body, issuer } (the certificate's issuer CN). */
async function httpsVia(sock, host, port, ca, headers = {}) {
  const c = await connectVia(sock, `${host}:${port}`)
  if (c.status !== 200) return c
  const socket = tls.connect({ socket: c.socket, servername: host, ca, ALPNProtocols: ['http/1.1'] })
  await new Promise((resolve, reject) => socket.once('secureConnect', resolve).once('error', reject))
  const issuer = socket.getPeerCertificate().issuer.CN
  const res = await new Promise((resolve, reject) => {
    const req = https.request({ host, port, path: '/v1/models', headers, createConnection: () => socket }, (res) => {
      const chunks = []
      res.on('data', (d) => chunks.push(d))
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString('utf8') }))
    })
    req.on('error', reject)
    req.end()
  })
  socket.destroy()
  return { ...res, issuer }
}

/** A plain HTTP request in absolute form on a new stream of the proxy's socket. */
function httpVia(sock, url, { method = 'GET', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const u = new URL(url)
    const req = http.request(
      { method, path: url, headers: { host: u.host, ...headers }, createConnection: () => net.createConnection(sock) },
      (res) => {
        const chunks = []
        res.on('data', (d) => chunks.push(d))
        res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString('utf8') }))
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

/** Waits (turns of the event loop, not a clock) until `pred()` holds or tries run out. */
async function until(pred, tries = 500) {
  for (let i = 0; i < tries && !pred(); i++) await new Promise((r) => setTimeout(r, 5))
  return pred()
}

function start(sock, policy, onRequest) {
  return callNative(() => native.NativeEgress.start(sock, policy, onRequest))
}

test('egress proxy: rules, tunnels, refusals, updates, events, close', { skip: NO_OPENSSL }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kst-egress-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  const certs = makeCerts(dir, ['api.test', 'plain.test'])
  const httpsServer = https.createServer({ key: certs.key, cert: certs.cert }, echo)
  const httpServer = http.createServer(echo)
  const httpsPort = await listen(httpsServer)
  const httpPort = await listen(httpServer)
  t.after(() => {
    httpsServer.close()
    httpServer.close()
  })

  // Warm up whatever the runtime opens once (its threads, epoll), so the fd count compares.
  const warm = await start(path.join(dir, 'warm.sock'), {})
  await warm.close()
  const fdsBefore = fdCount()

  const sock = path.join(dir, 'egress.sock')
  const events = []
  const policy = {
    allowOut: ['api.test', 'plain.test'],
    hosts: { 'api.test': '127.0.0.1', 'plain.test': '127.0.0.1', 'denied.test': '127.0.0.1' },
    rules: { 'api.test': [{ transform: { headers: { Authorization: SECRET } } }] },
    upstreamCa: certs.ca,
  }
  const proxy = await start(sock, policy, (ev) => events.push(ev))
  assert.match(proxy.caPem, /^-----BEGIN CERTIFICATE-----/)
  assert.equal(proxy.socketPath, sock)
  assert.equal(fs.statSync(sock).mode & 0o777, 0o600)

  // A host with a rule: terminated, the header set (replacing the client's), the proxy's CA.
  const ruled = await httpsVia(sock, 'api.test', httpsPort, proxy.caPem, { Authorization: 'Bearer fake' })
  assert.equal(ruled.status, 200)
  assert.equal(JSON.parse(ruled.body).headers.authorization, SECRET)
  assert.equal(ruled.issuer, 'kern-sandbox egress CA')

  // No rule: tunnelled untouched, the server's own certificate, no header added.
  const tunnelled = await httpsVia(sock, 'plain.test', httpsPort, certs.ca)
  assert.equal(tunnelled.status, 200)
  assert.equal(JSON.parse(tunnelled.body).headers.authorization, undefined)
  assert.equal(tunnelled.issuer, 'kern-sandbox test CA')
  // The proxy's CA does not stand in for a tunnelled host.
  await assert.rejects(httpsVia(sock, 'plain.test', httpsPort, proxy.caPem))

  // Plain HTTP in absolute form: the rule applies too; a body goes through.
  const plainRuled = await httpVia(sock, `http://api.test:${httpPort}/p?q=1`, { method: 'POST', body: 'hello' })
  assert.equal(plainRuled.status, 200)
  const seen = JSON.parse(plainRuled.body)
  assert.deepEqual([seen.method, seen.url, seen.headers.authorization, seen.bodyBytes], ['POST', '/p?q=1', SECRET, 5])

  // Refusals: 403 and one line naming the host and the rule, for CONNECT and plain HTTP alike.
  const notAllowed = await connectVia(sock, 'api.evil.test:443')
  assert.equal(notAllowed.status, 403)
  assert.match(notAllowed.text, /\r\n\r\nkern-sandbox egress: api\.evil\.test:443 refused: not in allowOut\n$/)
  const plainRefused = await httpVia(sock, 'http://api.evil.test/x')
  assert.equal(plainRefused.status, 403)
  assert.equal(plainRefused.body, 'kern-sandbox egress: api.evil.test:80 refused: not in allowOut\n')
  // An IP literal is refused unless listed, loopback above all.
  const literal = await connectVia(sock, `127.0.0.1:${httpsPort}`)
  assert.equal(literal.status, 403)
  assert.match(literal.text, /refused: an IP address not listed in allowOut/)

  // A bad update throws, names the entry, never echoes a header value, and changes nothing.
  const badHeader = {
    ...policy,
    rules: { 'api.test': [{ transform: { headers: { Authorization: `${SECRET}\r\nX: 1` } } }] },
  }
  assert.throws(
    () => callNative(() => proxy.update(badHeader)),
    (e) =>
      e instanceof SandboxError &&
      e.code === 'ERR_BAD_NETWORK_POLICY' &&
      e.message.startsWith('network.rules["api.test"][0].transform.headers["Authorization"]:') &&
      !e.message.includes('s3cret'),
  )
  assert.throws(() => callNative(() => proxy.update({ allowOut: ['ok.test', 'a.*.com'] })), {
    code: 'ERR_BAD_NETWORK_POLICY',
    message: 'network.allowOut[1]: "a.*.com": a wildcard may only lead (as in *.example.com)',
  })
  assert.equal((await httpsVia(sock, 'plain.test', httpsPort, certs.ca)).status, 200)

  // update flips a host off, then on again.
  proxy.update({ ...policy, allowOut: ['api.test'] })
  const off = await connectVia(sock, `plain.test:${httpsPort}`)
  assert.equal(off.status, 403)
  assert.match(off.text, new RegExp(`plain\\.test:${httpsPort} refused: not in allowOut`))
  proxy.update(policy)
  assert.equal((await httpsVia(sock, 'plain.test', httpsPort, certs.ca)).status, 200)

  // A denied CIDR wins over allowOut and a hosts pin.
  proxy.update({ ...policy, allowOut: [...policy.allowOut, 'denied.test'], denyOut: ['127.0.0.0/8'] })
  const denied = await connectVia(sock, `denied.test:${httpsPort}`)
  assert.equal(denied.status, 403)
  assert.match(denied.text, /refused: 127\.0\.0\.1 is in denyOut "127\.0\.0\.0\/8"/)

  // A name the host resolves to loopback is refused unless the policy names the address.
  proxy.update({ allowOut: ['localhost'] })
  const local = await connectVia(sock, `localhost:${httpsPort}`)
  if (local.status === 502) assert.match(local.text, /does not resolve/)
  else {
    assert.equal(local.status, 403)
    assert.match(
      local.text,
      /refused: (127\.0\.0\.1 is a loopback|::1 is the loopback) address, not named in allowOut or hosts/,
    )
  }
  proxy.update(policy)

  // Events: every request, no header values.
  assert.ok(
    await until(() => events.some((e) => e.reason.includes('denyOut') && e.host === 'denied.test')),
    'events arrive',
  )
  assert.ok(!JSON.stringify(events).includes('s3cret'))
  const terminated = events.find((e) => e.reason === 'terminated')
  assert.deepEqual(
    { ...terminated, bytes: terminated.bytes > 0 },
    {
      host: 'api.test',
      port: httpsPort,
      method: 'GET',
      path: '/v1/models',
      allowed: true,
      reason: 'terminated',
      bytes: true,
    },
  )
  const tunnel = events.find((e) => e.reason === 'tunnelled')
  assert.equal(tunnel.method, 'CONNECT')
  assert.equal(tunnel.path, undefined)
  assert.ok(tunnel.bytes > 0)
  const { path: noPath, ...refused } = events.find((e) => e.host === 'api.evil.test' && e.method === 'CONNECT')
  assert.equal(noPath, undefined)
  assert.deepEqual(refused, {
    host: 'api.evil.test',
    port: 443,
    method: 'CONNECT',
    allowed: false,
    reason: 'not in allowOut',
    bytes: 0,
  })
  assert.ok(events.some((e) => e.method === 'POST' && e.path === '/p?q=1' && e.reason === 'forwarded'))

  // close(): an open stream ends, the socket file goes, no fd is left behind.
  const open = net.createConnection(sock)
  // The proxy may end it with a reset as well as a FIN: either way it ends.
  open.on('error', () => {})
  await new Promise((r) => open.once('connect', r))
  const ended = new Promise((r) => open.once('close', r))
  await proxy.close()
  await ended
  assert.equal(fs.existsSync(sock), false)
  assert.equal(proxy.activeConnections, 0)
  await proxy.close()
  assert.ok(await until(() => fdCount() <= fdsBefore), `fds: ${fdsBefore} before, ${fdCount()} after`)
})

test('egress proxy: a bad policy fails at start, nothing listens', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kst-egress-'))
  try {
    const sock = path.join(dir, 'bad.sock')
    for (const [policy, message] of [
      [{ allowOut: ['*'] }, /^network\.allowOut\[0\]: "\*": a bare \* is not allowed/],
      [{ denyOut: ['10.0.0.0/40'] }, /^network\.denyOut\[0\]: "10\.0\.0\.0\/40": CIDR prefix out of range \(0-32\)$/],
      [{ allowOut: ['a.test:70000'] }, /port out of range/],
      [{ rules: { 'a.test': [{ transform: { headers: { 'Bad Name': 'v' } } }] } }, /not a valid header name/],
      [{ rules: { 'a.test': [{ transform: { headers: { 'X-Key': 5 } } }] } }, /the value must be a string/],
      [{ hosts: { 'a.test': 'not-an-ip' } }, /^network\.hosts\["a\.test"\]: "not-an-ip": not an IP address$/],
      [{ upstreamCa: 'not pem' }, /^network\.upstreamCa: /],
    ]) {
      await assert.rejects(
        async () => start(sock, policy),
        (e) => {
          assert.ok(e instanceof SandboxError, String(e))
          assert.equal(e.code, 'ERR_BAD_NETWORK_POLICY')
          assert.match(e.message, message)
          return true
        },
      )
      assert.equal(fs.existsSync(sock), false)
    }
    // A path already taken is refused.
    fs.writeFileSync(sock, '')
    await assert.rejects(
      async () => start(sock, {}),
      (e) => e instanceof SandboxError && /could not listen/.test(e.message),
    )
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

/** The pids of kern-sandbox-egress processes serving `sock` (their command line names it). */
function proxiesFor(sock) {
  const pids = []
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    let argv
    try {
      argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
    } catch {
      continue // gone meanwhile
    }
    if (path.basename(argv[0]) === 'kern-sandbox-egress' && argv.includes(sock)) pids.push(Number(pid))
  }
  return pids
}

test('egress proxy: the proxy process ends with the Node that started it, closed or not', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kst-egress-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  // A Node that starts a proxy and then exits without close(): normally, or killed outright.
  const script = `
    const native = require(${JSON.stringify(path.join(__dirname, '..', 'lib', 'native.js'))})
    native.NativeEgress.start(process.argv[1], { allowOut: ['a.test'] }).then(() => {
      process.stdout.write('listening\\n')
      // Exits (without close()) once the parent has looked at the proxy, or waits to be killed.
      if (process.argv[2] === 'kill') setInterval(() => {}, 1000)
      else process.stdin.once('data', () => process.exit(0))
    })
  `
  for (const how of ['exit', 'kill']) {
    const sock = path.join(dir, `${how}.sock`)
    const child = cp.spawn(process.execPath, ['-e', script, sock, how], { stdio: ['pipe', 'pipe', 'inherit'] })
    const exited = new Promise((r) => child.once('exit', r))
    await new Promise((r) => child.stdout.once('data', r))
    assert.equal(proxiesFor(sock).length, 1, 'the proxy process runs while its Node does')
    assert.ok(fs.existsSync(sock))
    if (how === 'kill') child.kill('SIGKILL')
    else child.stdin.write('go\n')
    await exited
    assert.ok(await until(() => proxiesFor(sock).length === 0), `${how}: a proxy process outlived its Node`)
    assert.ok(await until(() => !fs.existsSync(sock)), `${how}: the socket was left behind`)
  }
})
