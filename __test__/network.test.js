'use strict'
// The public network policy (issue 37): `network: { allowOut, denyOut, rules, hosts, upstreamCa }`
// on a Sandbox and a machine. Loopback only: an HTTPS and an HTTP server on 127.0.0.1 with a CA
// made here (openssl), reached as `api.test` through `hosts`, trusted upstream through
// `upstreamCa`. The secret the rules inject reaches the server and nothing in the box.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const http = require('node:http')
const https = require('node:https')
const { kern, tmpDir, openKernel, openMachine, nodeProxyGet } = require('./helpers.js')
const { makeCerts } = require('./certs')

const SECRET = 'Bearer wire-s3cret-7f3a9c'
const SECRET_PART = 'wire-s3cret-7f3a9c'

const listen = (server) => new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)))

let world
test.before(async () => {
  const certs = makeCerts(tmpDir('network-'), ['api.test'])
  const seen = []
  // The reply says whether the secret arrived, never the secret itself.
  const reply = (req, res) => {
    seen.push({ url: req.url, authorization: req.headers.authorization ?? null })
    res.end(`ok ${req.url} auth=${req.headers.authorization === SECRET ? 'injected' : 'missing'}`)
  }
  const tlsServer = await listen(https.createServer({ key: certs.key, cert: certs.cert }, reply))
  const plainServer = await listen(http.createServer(reply))
  world = {
    certs,
    seen,
    tp: tlsServer.address().port,
    hp: plainServer.address().port,
    close() {
      for (const s of [tlsServer, plainServer]) {
        s.closeAllConnections()
        s.close()
      }
    },
  }
})
test.after(() => world?.close())

/** The policy under test: api.test allowed with the secret injected, other.test pinned but not
 * allowed, deny.test allowed but its address denied. */
function policy(extra = {}) {
  return {
    allowOut: ['api.test', 'deny.test'],
    denyOut: ['127.0.0.2/32'],
    hosts: { 'api.test': '127.0.0.1', 'other.test': '127.0.0.1', 'deny.test': '127.0.0.2' },
    rules: { 'api.test': [{ transform: { headers: { Authorization: SECRET } } }] },
    upstreamCa: world.certs.ca,
    ...extra,
  }
}

async function session(t, opts = {}) {
  const sbx = new kern.Sandbox({ timeoutS: 60, ...opts })
  await sbx.open()
  t.after(() => sbx.close())
  return sbx
}

const pyGet = (url) =>
  `import urllib.request as u\nprint(u.urlopen(${JSON.stringify(url)}, timeout=20).read().decode())`

function curl(url) {
  return ['curl', '-sS', '--max-time', '20', url]
}

/** Waits for `pred` on the events, a bounded number of times. */
async function until(pred) {
  for (let i = 0; i < 200 && !pred(); i++) await new Promise((r) => setTimeout(r, 25))
  return pred()
}

test('a machine: curl, Python and Node reach api.test with the secret injected; none of it in the box', async (t) => {
  const events = []
  const sbx = await session(t)
  const m = await openMachine(t, sbx, { network: policy(), onRequest: (e) => events.push(e) })
  const { tp, hp } = world
  const before = world.seen.length

  const c = await m.exec(curl(`https://api.test:${tp}/curl`))
  assert.equal(c.stdout, 'ok /curl auth=injected', c.stderr)
  const py = await m.exec(['python3', '-c', pyGet(`https://api.test:${tp}/py`)])
  assert.equal(py.stdout, 'ok /py auth=injected\n', py.stderr)
  const node = await m.exec(['node', '-e', nodeProxyGet(tp, '/node')])
  assert.equal(node.stdout, 'ok /node auth=injected\n', node.stderr)
  const plain = await m.exec(curl(`http://api.test:${hp}/plain`))
  assert.equal(plain.stdout, 'ok /plain auth=injected', plain.stderr)
  const got = world.seen.slice(before)
  assert.deepEqual(
    got.map((s) => s.url),
    ['/curl', '/py', '/node', '/plain'],
  )
  assert.ok(got.every((s) => s.authorization === SECRET))

  // Refused with the reason: a host not allowed, and a denied CIDR (the 403 body over plain HTTP;
  // CONNECT is refused the same way, which curl reports as the status).
  const other = await m.exec(curl(`http://other.test:${hp}/`))
  assert.equal(other.stdout, `kern-sandbox egress: other.test:${hp} refused: not in allowOut\n`)
  const otherTls = await m.exec(curl(`https://other.test:${tp}/`))
  assert.notEqual(otherTls.exitCode, 0)
  assert.match(otherTls.stderr, /403/)
  const denied = await m.exec(curl(`http://deny.test:${hp}/`))
  assert.match(
    denied.stdout,
    new RegExp(`^kern-sandbox egress: deny\\.test:${hp} refused: 127\\.0\\.0\\.2 is in denyOut`),
  )
  const deniedPy = await m.exec(['python3', '-c', pyGet(`https://deny.test:${tp}/`)])
  assert.notEqual(deniedPy.exitCode, 0)
  assert.match(deniedPy.stderr, /403/)
  // A direct socket to the server: the box has no route out.
  const direct = await m.exec([
    'python3',
    '-c',
    `import socket\ntry:\n    socket.create_connection(("127.0.0.1", ${tp}), timeout=5)\n    print("connected")\n` +
      `except OSError as e:\n    print("refused", type(e).__name__)`,
  ])
  assert.match(direct.stdout, /^refused /)
  const noProxy = await m.exec(['curl', '-sS', '--max-time', '5', '--noproxy', '*', `http://127.0.0.1:${hp}/`])
  assert.notEqual(noProxy.exitCode, 0)

  // No trace of the secret: env, /proc/self/environ, the files a program can read, the outputs.
  const trace = await m.exec([
    'sh',
    '-c',
    `env; tr '\\0' '\\n' < /proc/self/environ; echo "found:$(grep -rlsaF --devices=skip '${SECRET_PART}' ` +
      '/workspace /proc/self/environ /proc/1/environ /proc/1/cmdline /.kern-sandbox /dev/shm /etc /tmp /root)"',
  ])
  assert.match(trace.stdout, /HTTPS_PROXY=http:\/\/127\.0\.0\.1:3128/)
  assert.match(trace.stdout, /found:\n$/, trace.stdout)
  for (const r of [c, py, node, plain, other, otherTls, denied, deniedPy, trace]) {
    assert.ok(!`${r.stdout}${r.stderr}`.includes(SECRET_PART))
  }

  // onRequest: every request, no header values.
  assert.ok(await until(() => events.some((e) => e.host === 'deny.test' && !e.allowed)))
  const ok = events.find((e) => e.host === 'api.test' && e.path === '/curl')
  assert.deepEqual(
    { ...ok, bytes: ok.bytes > 0 },
    { host: 'api.test', port: tp, method: 'GET', path: '/curl', allowed: true, reason: 'terminated', bytes: true },
  )
  const refused = events.find((e) => e.host === 'other.test' && e.method === 'GET')
  assert.equal(refused.allowed, false)
  assert.equal(refused.reason, 'not in allowOut')
  assert.ok(!JSON.stringify(events).includes(SECRET_PART))
  assert.deepEqual(m.network, policy())
})

test('updateNetwork flips a live machine both ways without restarting anything in it', async (t) => {
  const sbx = await session(t)
  const m = await openMachine(t, sbx, { network: policy() })
  const long = await m.spawn(['sleep', '600'])
  const get = () => m.exec(curl(`https://api.test:${world.tp}/flip`))
  assert.equal((await get()).stdout, 'ok /flip auth=injected')

  await m.updateNetwork(policy({ allowOut: ['nothing.test'] }))
  const off = await get()
  assert.notEqual(off.exitCode, 0)
  assert.match(off.stderr, /403/)
  const offPlain = await m.exec(curl(`http://api.test:${world.hp}/`))
  assert.equal(offPlain.stdout, `kern-sandbox egress: api.test:${world.hp} refused: not in allowOut\n`)
  assert.deepEqual(m.network.allowOut, ['nothing.test'])

  await m.updateNetwork(policy())
  assert.equal((await get()).stdout, 'ok /flip auth=injected')
  assert.equal(long.exitCode, null)
  assert.ok((await m.processes()).some((p) => p.pid === long.pid))

  // A bad policy changes nothing, and its message names the entry, never a header value.
  await assert.rejects(m.updateNetwork({ allowOut: ['a.*.com'] }), {
    code: 'ERR_BAD_NETWORK_POLICY',
    message: /^network\.allowOut\[0\]: "a\.\*\.com": /,
  })
  await assert.rejects(
    m.updateNetwork({ rules: { 'api.test': [{ transform: { headers: { 'X-Key': `${SECRET_PART}\r\nX: y` } } }] } }),
    (e) => e.code === 'ERR_BAD_NETWORK_POLICY' && /network\.rules/.test(e.message) && !e.message.includes(SECRET_PART),
  )
  await assert.rejects(m.updateNetwork(true), { code: 'ERR_BAD_NETWORK_POLICY' })
  assert.equal((await get()).stdout, 'ok /flip auth=injected')
  assert.deepEqual(m.network, policy())
})

test('bad input: ERR_BAD_NETWORK_POLICY at construction, ERR_INVALID_OPTION, ERR_NETWORK_FIXED', async (t) => {
  assert.throws(() => new kern.Sandbox({ network: { allowOut: ['ok.test', '*'] } }), {
    code: 'ERR_BAD_NETWORK_POLICY',
    message: /^network\.allowOut\[1\]: "\*": a bare \* is not allowed/,
  })
  assert.throws(() => new kern.Sandbox({ network: { denyOut: ['10.0.0.0/40'] } }), {
    code: 'ERR_BAD_NETWORK_POLICY',
    message: /^network\.denyOut\[0\]: /,
  })
  assert.throws(() => new kern.Sandbox({ network: { rules: { 'a.test': [{ transform: { headers: { A: 42 } } }] } } }), {
    code: 'ERR_BAD_NETWORK_POLICY',
  })
  assert.throws(() => new kern.Sandbox({ network: { allowOut: ['a.test'] }, egressAllow: ['a.test'] }), {
    code: 'ERR_INVALID_OPTION',
  })
  assert.throws(() => new kern.Sandbox({ network: 'yes' }), { code: 'ERR_INVALID_OPTION' })
  assert.throws(() => new kern.Sandbox({ network: ['a.test'] }), { code: 'ERR_INVALID_OPTION' })
  assert.throws(() => new kern.Sandbox({ onRequest: 'log' }), TypeError)

  const sbx = await session(t)
  assert.equal(sbx.network, false)
  await assert.rejects(sbx.machine({ network: { allowOut: ['a.*.com'] } }), { code: 'ERR_BAD_NETWORK_POLICY' })
  await assert.rejects(sbx.machine({ network: 3 }), { code: 'ERR_INVALID_OPTION' })
  const fixed = await openMachine(t, sbx, { network: false })
  assert.equal(fixed.network, false)
  await assert.rejects(fixed.updateNetwork(policy()), (e) => {
    assert.equal(e.code, 'ERR_NETWORK_FIXED')
    assert.match(e.message, /denyOut/)
    return true
  })
  const r = await fixed.exec(['sh', '-c', 'env | grep -ci proxy; true'])
  assert.equal(r.stdout, '0\n')
})

test('the session policy: one-shot runCode, a kernel cell, a machine with its own copy, onRequest', async (t) => {
  const events = []
  const sbx = await session(t, { network: policy(), onRequest: (e) => events.push(e) })
  assert.deepEqual(sbx.network, policy())
  const url = `https://api.test:${world.tp}/one-shot`
  const one = await sbx.runCode(pyGet(url))
  assert.equal(one.stdout, 'ok /one-shot auth=injected\n', one.stderr)
  const bash = await sbx.runCode(`curl -sS --max-time 20 http://other.test:${world.hp}/`, { language: 'bash' })
  assert.equal(bash.stdout, `kern-sandbox egress: other.test:${world.hp} refused: not in allowOut\n`)

  const k = await openKernel(t, sbx)
  const cell = await k.runCode(
    `import urllib.request as u\nu.urlopen("https://api.test:${world.tp}/cell", timeout=20).read().decode()`,
  )
  assert.equal(cell.results[0].text, "'ok /cell auth=injected'")

  // A machine without its own network gets a proxy of its own serving a copy: updating it leaves
  // the session's as it is.
  const m = await openMachine(t, sbx)
  assert.deepEqual(m.network, policy())
  await m.updateNetwork(policy({ allowOut: ['nothing.test'] }))
  const off = await m.exec(curl(`http://api.test:${world.hp}/`))
  assert.match(off.stdout, /refused: not in allowOut/)
  const still = await sbx.run(curl(`https://api.test:${world.tp}/still`))
  assert.equal(still.stdout, 'ok /still auth=injected')
  assert.ok(await until(() => events.some((e) => e.path === '/still')))
  assert.ok(events.some((e) => e.path === '/cell'))
  // The machine's refusals reach the session's onRequest (its default).
  assert.ok(await until(() => events.some((e) => e.host === 'api.test' && !e.allowed)))
  assert.ok(!JSON.stringify(events).includes(SECRET_PART))
})

test('ready boxes (prewarm) are attached to the session proxy', async (t) => {
  const sbx = await session(t, { network: policy(), prewarm: 1 })
  await sbx.run(['true'])
  assert.ok(await until(() => sbx.readyBoxes > 0), 'a ready box')
  const r = await sbx.runCode(pyGet(`https://api.test:${world.tp}/ready`))
  assert.equal(r.stdout, 'ok /ready auth=injected\n', r.stderr)
})

test('a callback that throws does not break anything', async (t) => {
  const sbx = await session(t, {
    network: policy(),
    onRequest: () => {
      throw new Error('audit log down')
    },
  })
  const r = await sbx.run(curl(`https://api.test:${world.tp}/throws`))
  assert.equal(r.stdout, 'ok /throws auth=injected')
  const m = await openMachine(t, sbx, { onRequest: async () => Promise.reject(new Error('no')) })
  assert.equal((await m.exec(curl(`https://api.test:${world.tp}/m`))).stdout, 'ok /m auth=injected')
})

test('top-level runCode(code, { network })', async () => {
  const r = await kern.runCode(pyGet(`https://api.test:${world.tp}/top`), { network: policy(), timeoutS: 60 })
  assert.equal(r.stdout, 'ok /top auth=injected\n', r.stderr)
})

test('after close() no proxy socket, directory or fd is left', async () => {
  const fds = () => fs.readdirSync('/proc/self/fd').length
  const round = async (withMachine) => {
    const sbx = new kern.Sandbox({ timeoutS: 60, network: policy() })
    await sbx.open()
    const privateDir = path.dirname(sbx.workspacePath)
    assert.ok(fs.existsSync(path.join(privateDir, 'proxy', 'sock')))
    assert.equal((await sbx.run(curl(`https://api.test:${world.tp}/fd`))).stdout, 'ok /fd auth=injected')
    const k = await sbx.kernel()
    await k.runCode('1')
    if (withMachine) {
      const m = await sbx.machine()
      assert.equal((await m.exec(curl(`https://api.test:${world.tp}/m`))).stdout, 'ok /m auth=injected')
      const proxies = fs.readdirSync(privateDir).filter((n) => n.startsWith('proxy'))
      assert.equal(proxies.length, 2, proxies.join())
      // The machine's own proxy closes with it, the session's stays.
      await m.close()
      assert.deepEqual(
        fs.readdirSync(privateDir).filter((n) => n.startsWith('proxy')),
        ['proxy'],
      )
      assert.equal((await sbx.run(curl(`https://api.test:${world.tp}/after`))).stdout, 'ok /after auth=injected')
    }
    await sbx.close()
    assert.ok(!fs.existsSync(privateDir))
  }
  // A machine's proxy goes with its session's private directory.
  await round(true)
  // One round first: the runtime's threads and the addon's own fds are there from then on.
  await round(false)
  const before = fds()
  for (let i = 0; i < 3; i++) await round(false)
  assert.ok(fds() <= before, `fds: ${before} before, ${fds()} after`)
})
