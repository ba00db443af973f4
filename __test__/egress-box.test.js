'use strict'
// The box side of egress (issue 37): a box attached to a host proxy socket reaches it through the
// relay on 127.0.0.1:3128 and nothing else. A test proxy (a unix socket, CONNECT and absolute-form
// HTTP) stands in for the real one; it maps `api.test` to loopback servers this file starts: an
// HTTPS one with a certificate from a CA made here (only the CA's certificate goes to the box),
// and a plain HTTP one. curl, Python (urllib) and Node reach them from a one-shot call, a kernel
// and a machine; a direct connection does not; exit codes and faults are what they are without
// egress. The attach is set through the internal test hook (KERN_SANDBOX_TEST_EGRESS_*), so the
// box side is tested apart from the real proxy; __test__/network.test.js tests the public option.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const net = require('node:net')
const http = require('node:http')
const https = require('node:https')
const { kern, repo, tmpDir, openKernel, openMachine, nodeProxyGet } = require('./helpers.js')
const { makeCerts } = require('./certs')

const PROXY_URL = 'http://127.0.0.1:3128'
const BUNDLE = '/dev/shm/kern-sandbox-ca-bundle.pem'
const CA_IN_BOX = '/.kern-sandbox/egress-ca.pem'

const listen = (server, ...at) => new Promise((resolve) => server.listen(...at, () => resolve(server)))

/** The loopback servers and the test proxy in front of them, for the whole file. */
async function startWorld() {
  const dir = tmpDir('egress-box-')
  const certs = makeCerts(dir, ['api.test'])
  const reply = (req, res) => res.end(`ok ${req.url} via=${req.headers['x-test-proxy'] ?? '-'}`)
  const tlsServer = await listen(https.createServer({ key: certs.key, cert: certs.cert }, reply), 0, '127.0.0.1')
  const plainServer = await listen(http.createServer(reply), 0, '127.0.0.1')
  const ports = { https: tlsServer.address().port, http: plainServer.address().port }
  const seen = []
  const sock = path.join(dir, 'proxy.sock')
  const proxy = net.createServer((c) => {
    let head = Buffer.alloc(0)
    const onData = (d) => {
      head = Buffer.concat([head, d])
      const end = head.indexOf('\r\n\r\n')
      if (end < 0) return
      c.off('data', onData)
      const lines = head.subarray(0, end).toString('latin1').split('\r\n')
      const rest = head.subarray(end + 4)
      const [method, target] = lines[0].split(' ')
      seen.push(`${method} ${target}`)
      const deny = () => c.end(`HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`)
      if (method === 'CONNECT') {
        if (target !== `api.test:${ports.https}`) return deny()
        const up = net.connect(ports.https, '127.0.0.1', () => {
          c.write('HTTP/1.1 200 Connection Established\r\n\r\n')
          up.write(rest)
          c.pipe(up).pipe(c)
        })
        up.on('error', () => c.destroy())
        c.on('error', () => up.destroy())
        return
      }
      const url = URL.canParse(target) ? new URL(target) : null
      if (!url || url.host !== `api.test:${ports.http}`) return deny()
      const up = net.connect(ports.http, '127.0.0.1', () => {
        const headers = lines.slice(1).filter((l) => !/^proxy-/i.test(l))
        up.write(
          [`${method} ${url.pathname}${url.search} HTTP/1.1`, ...headers, 'x-test-proxy: yes', '', ''].join('\r\n'),
        )
        up.write(rest)
        c.pipe(up).pipe(c)
      })
      up.on('error', () => c.destroy())
      c.on('error', () => up.destroy())
    }
    c.on('data', onData)
  })
  await listen(proxy, sock)
  return {
    certs,
    ports,
    seen,
    sock,
    close: () => {
      for (const s of [proxy, tlsServer, plainServer]) {
        s.closeAllConnections?.()
        s.close()
      }
    },
  }
}

let world
test.before(async () => {
  world = await startWorld()
})
test.after(() => world?.close())

/** A Sandbox whose boxes are attached to the test proxy (the hook is read by the constructor). */
async function attached(t, opts = {}) {
  const keys = ['KERN_SANDBOX_TEST_EGRESS_SOCK', 'KERN_SANDBOX_TEST_EGRESS_CA', 'KERN_SANDBOX_AGENT']
  const saved = keys.map((k) => process.env[k])
  process.env.KERN_SANDBOX_TEST_EGRESS_SOCK = world.sock
  process.env.KERN_SANDBOX_TEST_EGRESS_CA = world.certs.caFile
  process.env.KERN_SANDBOX_AGENT ??= path.join(repo, 'kern-sandbox-agent')
  let sbx
  try {
    sbx = new kern.Sandbox(opts)
  } finally {
    keys.forEach((k, i) => (saved[i] === undefined ? delete process.env[k] : (process.env[k] = saved[i])))
  }
  await sbx.open()
  t.after(() => sbx.close())
  return sbx
}

/** The commands each client runs, as argv. */
function clients() {
  const { https: tp, http: hp } = world.ports
  const py = `import urllib.request as u\nprint(u.urlopen("https://api.test:${tp}/py", timeout=20).read().decode())`
  const node = nodeProxyGet(tp, '/node')
  return {
    curlHttps: ['curl', '-sS', '--max-time', '20', `https://api.test:${tp}/curl`],
    curlHttp: ['curl', '-sS', '--max-time', '20', `http://api.test:${hp}/plain?x=1`],
    curlDenied: ['curl', '-sS', '--max-time', '20', 'https://denied.test/'],
    python: ['python3', '-c', py],
    node: ['node', '-e', node],
    // The host's server, straight: the box's loopback is its own, and it has no route out.
    direct: [
      'python3',
      '-c',
      `import socket\ntry:\n    socket.create_connection(("127.0.0.1", ${tp}), timeout=5)\n    print("connected")\n` +
        `except OSError as e:\n    print("refused", type(e).__name__)\n` +
        `print("routes", len(open("/proc/net/route").read().splitlines()) - 1)`,
    ],
    curlNoProxy: ['curl', '-sS', '--max-time', '5', '--noproxy', '*', `http://127.0.0.1:${hp}/`],
    env: [
      'sh',
      '-c',
      `env | grep -iE '^(https?_proxy|no_proxy|ssl_cert_file|requests_ca_bundle|curl_ca_bundle|git_ssl_cainfo|pip_cert|node_extra_ca_certs|node_use_env_proxy)=' | sort; cat "$SSL_CERT_FILE"; echo ===; cat "$NODE_EXTRA_CA_CERTS"`,
    ],
  }
}

/** Runs every client through `exec` (argv → { stdout, stderr, exitCode }) and checks them all. */
async function checkClients(exec) {
  const c = clients()
  const { https: tp, http: hp } = world.ports
  const before = world.seen.length

  const curl = await exec(c.curlHttps)
  assert.equal(curl.stdout, 'ok /curl via=-', curl.stderr)
  const plain = await exec(c.curlHttp)
  assert.equal(plain.stdout, 'ok /plain?x=1 via=yes', plain.stderr)
  const py = await exec(c.python)
  assert.equal(py.stdout, 'ok /py via=-\n', py.stderr)
  const node = await exec(c.node)
  assert.equal(node.stdout, 'ok /node via=-\n', node.stderr)
  const seen = world.seen.slice(before)
  assert.equal(seen.filter((s) => s === `CONNECT api.test:${tp}`).length, 3, seen.join('\n'))
  assert.ok(seen.includes(`GET http://api.test:${hp}/plain?x=1`), seen.join('\n'))

  const denied = await exec(c.curlDenied)
  assert.notEqual(denied.exitCode, 0)
  assert.match(denied.stderr, /403/)
  const direct = await exec(c.direct)
  assert.equal(direct.stdout, 'refused ConnectionRefusedError\nroutes 0\n')
  const noProxy = await exec(c.curlNoProxy)
  assert.notEqual(noProxy.exitCode, 0, 'a client that ignores the proxy gets no network')

  const env = await exec(c.env)
  const [vars, files] = env.stdout
    .split('\n')
    .reduce(([v, f], l) => (/^[A-Za-z_]+=/.test(l) && !f.length ? [[...v, l], f] : [v, [...f, l]]), [[], []])
  assert.deepEqual(vars, [
    `CURL_CA_BUNDLE=${BUNDLE}`,
    `GIT_SSL_CAINFO=${BUNDLE}`,
    `HTTPS_PROXY=${PROXY_URL}`,
    `HTTP_PROXY=${PROXY_URL}`,
    `NODE_EXTRA_CA_CERTS=${CA_IN_BOX}`,
    'NODE_USE_ENV_PROXY=1',
    'NO_PROXY=localhost,127.0.0.1,::1',
    `PIP_CERT=${BUNDLE}`,
    `REQUESTS_CA_BUNDLE=${BUNDLE}`,
    `SSL_CERT_FILE=${BUNDLE}`,
    `http_proxy=${PROXY_URL}`,
    `https_proxy=${PROXY_URL}`,
    'no_proxy=localhost,127.0.0.1,::1',
  ])
  const [bundle, ours] = files.join('\n').split('===\n')
  assert.ok(bundle.endsWith(world.certs.ca), 'the bundle ends with the proxy CA')
  assert.equal(ours, world.certs.ca)
  assert.doesNotMatch(env.stdout, /PRIVATE KEY/)
}

test('one-shot calls: curl, Python and Node reach the proxy and nothing else; exit codes and faults unchanged', async (t) => {
  const sbx = await attached(t, { timeoutS: 60 })
  await checkClients((argv) => sbx.run(argv))
  const code = await sbx.runCode('import sys; sys.exit(3)')
  assert.equal(code.exitCode, 3)
  assert.equal(code.fault, null)
  const bash = await sbx.runCode(`curl -sS --max-time 20 https://api.test:${world.ports.https}/bash`, {
    language: 'bash',
  })
  assert.equal(bash.stdout, 'ok /bash via=-')
  const slow = await sbx.runCode('import time; time.sleep(30)', { timeoutS: 1 })
  assert.equal(slow.fault?.type, 'timeout')
  // mount(2) is denied by kern's filter: the workload, PID 1 in the relay's place, dies of SIGSYS.
  const sys = await sbx.runCode('import ctypes\nctypes.CDLL(None).syscall(165, 0, 0, 0, 0, 0)\nprint("not blocked")')
  assert.equal(sys.exitCode, 159, sys.stderr)
  assert.equal(sys.fault?.type, 'escape_blocked')
})

test("kern's untrusted profile (seccomp allowlist, read-only root) leaves the relay working", async (t) => {
  const sbx = await attached(t, { timeoutS: 60, securityProfile: 'untrusted', prewarm: 0 })
  const r = await sbx.run(clients().curlHttps)
  assert.equal(r.stdout, 'ok /curl via=-', r.stderr)
  const code = await sbx.runCode('import sys; sys.exit(3)')
  assert.equal(code.exitCode, 3)
})

test('a kernel: cells and their subprocesses go through the proxy', async (t) => {
  const sbx = await attached(t, { timeoutS: 60 })
  const k = await openKernel(t, sbx)
  await checkClients(async (argv) => {
    const r = await k.runCode(
      `import subprocess\np = subprocess.run(${JSON.stringify(argv)}, capture_output=True, text=True)\n` +
        `print(p.stdout, end="")\nimport sys\nprint(p.stderr, end="", file=sys.stderr)\nrc = p.returncode`,
    )
    assert.equal(r.error, null)
    const rc = await k.runCode('rc')
    return { stdout: r.stdout, stderr: r.stderr, exitCode: Number(rc.results[0].text) }
  })
  const cell = await k.runCode(
    `import urllib.request as u\nu.urlopen("https://api.test:${world.ports.https}/cell", timeout=20).read().decode()`,
  )
  assert.equal(cell.results[0].text, "'ok /cell via=-'")
})

test('a machine: exec reaches the proxy through the agent; exit codes unchanged', async (t) => {
  const sbx = await attached(t, { timeoutS: 60 })
  const m = await openMachine(t, sbx)
  await checkClients((argv) => m.exec(argv))
  const r = await m.exec(['python3', '-c', 'import sys; sys.exit(3)'])
  assert.equal(r.exitCode, 3)
  const slow = await m.exec(['sleep', '30'], { timeoutS: 1 })
  assert.equal(slow.fault?.type, 'timeout')
})

test('a box not attached sees none of it', async (t) => {
  const sbx = new kern.Sandbox()
  await sbx.open()
  t.after(() => sbx.close())
  const r = await sbx.run(['sh', '-c', 'env | grep -ci proxy; ls /.kern-sandbox 2>&1; true'])
  assert.match(r.stdout, /^0\n.*No such file/s)
})
