'use strict'
// Worker side (run in a fresh `node benchmark/worker.js` process): the host-side egress proxy
// (issue 37) on loopback only. The servers run in a child process of their own, so the client's
// event loop here does not share a thread with them; the proxy is the binding's NativeEgress on a
// Unix socket, reached the way a box's relay reaches it (CONNECT, or HTTP in absolute form).

const fs = require('fs')
const os = require('os')
const path = require('path')
const net = require('net')
const tls = require('tls')
const http = require('http')
const https = require('https')
const { spawn } = require('child_process')
const { now } = require('../lib/probe')
const { opensslMissing, makeCerts } = require('../../__test__/certs')

const MiB = 1024 * 1024
const TUNNEL = 'tunnel.test'
const TERM = 'term.test'

/** The child process's program: an HTTPS server answering 1 MiB and an HTTP server answering
 * two bytes, both keep-alive, on 127.0.0.1; prints their ports as one JSON line. */
const SERVERS = `
const http = require('http'), https = require('https')
const { key, cert } = JSON.parse(process.env.PROXY_BENCH_TLS)
const big = Buffer.alloc(${MiB}, 120)
const s = https.createServer({ key, cert }, (req, res) => {
  res.writeHead(200, { 'content-length': big.length }); res.end(big)
})
const h = http.createServer((req, res) => { res.writeHead(200, { 'content-length': 2 }); res.end('ok') })
h.keepAliveTimeout = 60000
s.keepAliveTimeout = 60000
s.listen(0, '127.0.0.1', () => h.listen(0, '127.0.0.1', () =>
  process.stdout.write(JSON.stringify({ https: s.address().port, http: h.address().port }) + '\\n')))
`

function startServers(tlsFiles) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', SERVERS], {
      env: { ...process.env, PROXY_BENCH_TLS: JSON.stringify(tlsFiles) },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    let out = ''
    child.on('error', reject)
    child.on('exit', (code) => reject(new Error(`the server process exited ${code}`)))
    child.stdout.on('data', (d) => {
      out += d
      if (out.includes('\n')) resolve({ child, ports: JSON.parse(out) })
    })
  })
}

/** CONNECT host:port on a new stream of the proxy's socket; resolves to the tunnel's socket. */
function connectVia(sock, target) {
  return new Promise((resolve, reject) => {
    const s = net.createConnection(sock)
    let buf = Buffer.alloc(0)
    s.on('error', reject)
    const onData = (d) => {
      buf = Buffer.concat([buf, d])
      const end = buf.indexOf('\r\n\r\n')
      if (end < 0) return
      s.off('data', onData)
      s.off('error', reject)
      if (buf.toString('latin1', 9, 12) !== '200') return reject(new Error(buf.toString('utf8').trim()))
      s.pause()
      resolve(s)
    }
    s.on('data', onData)
    s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`)
  })
}

/** One GET of the 1 MiB body over a TLS connection made for it; resolves to the bytes read. */
async function download(tlsOpts) {
  const socket = tls.connect({ ...tlsOpts, ALPNProtocols: ['http/1.1'] })
  await new Promise((resolve, reject) => socket.once('secureConnect', resolve).once('error', reject))
  try {
    return await new Promise((resolve, reject) => {
      const req = https.request({ host: tlsOpts.servername, path: '/big', createConnection: () => socket }, (res) => {
        let n = 0
        res.on('data', (d) => (n += d.length))
        res.on('end', () => resolve(n))
        res.on('error', reject)
      })
      req.on('error', reject)
      req.end()
    })
  } finally {
    socket.destroy()
  }
}

/** `total` GETs of two bytes over `conns` keep-alive connections, `conns` at a time; requests/s. */
async function rps(agent, opts, conns, total) {
  let next = 0
  let failed = 0
  const one = () =>
    new Promise((resolve) => {
      const req = http.request({ ...opts, agent }, (res) => {
        if (res.statusCode !== 200) failed++
        res.resume()
        res.on('end', resolve)
      })
      req.on('error', () => {
        failed++
        resolve()
      })
      req.end()
    })
  const t = now()
  await Promise.all(
    Array.from({ length: conns }, async () => {
      while (next++ < total) await one()
    }),
  )
  const ms = now() - t
  return { rps: (total / ms) * 1000, failed }
}

module.exports = {
  /** 1 MiB HTTPS downloads, direct / tunnelled / terminated taking turns; then requests per second
   * of plain HTTP on `conns` keep-alive connections, direct and through the proxy. */
  async proxy(spec) {
    const missing = opensslMissing()
    if (missing) return { skipped: missing }
    const native = require(path.join(spec.module, 'lib', 'native.js'))
    const { callNative } = require(path.join(spec.module, 'lib', 'errors.js'))
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kst-proxy-bench-'))
    fs.chmodSync(dir, 0o700)
    const certs = makeCerts(dir, [TUNNEL, TERM])
    const { child, ports } = await startServers({ key: certs.key, cert: certs.cert })
    const sock = path.join(dir, 'egress.sock')
    const proxy = await callNative(() =>
      native.NativeEgress.start(sock, {
        allowOut: [TUNNEL, TERM],
        hosts: { [TUNNEL]: '127.0.0.1', [TERM]: '127.0.0.1' },
        rules: { [TERM]: [{ transform: { headers: { 'X-Bench': 'header-value' } } }] },
        upstreamCa: certs.ca,
      }),
    )
    try {
      const kinds = {
        direct: async () => ({ host: '127.0.0.1', port: ports.https, servername: TUNNEL, ca: certs.ca }),
        tunnel: async () => ({
          socket: await connectVia(sock, `${TUNNEL}:${ports.https}`),
          servername: TUNNEL,
          ca: certs.ca,
        }),
        term: async () => ({
          socket: await connectVia(sock, `${TERM}:${ports.https}`),
          servername: TERM,
          ca: proxy.caPem,
        }),
      }
      const dl = { direct: [], tunnel: [], term: [] }
      const names = Object.keys(kinds)
      let failed = 0
      for (let i = 0; i < spec.warmup + spec.n; i++) {
        for (let j = 0; j < names.length; j++) {
          const k = names[(i + j) % names.length]
          const t = now()
          const bytes = await download(await kinds[k]())
          const ms = now() - t
          if (bytes !== MiB) failed++
          if (i >= spec.warmup) dl[k].push(ms)
        }
      }
      const direct = new http.Agent({ keepAlive: true, maxSockets: spec.conns })
      const viaProxy = new http.Agent({ keepAlive: true, maxSockets: spec.conns })
      viaProxy.createConnection = () => net.createConnection(sock)
      const directOpts = { host: '127.0.0.1', port: ports.http, path: '/' }
      // Absolute form, as a client configured with HTTP_PROXY sends it; one pool for all.
      const proxyOpts = {
        host: 'egress-proxy',
        port: 1,
        path: `http://${TUNNEL}:${ports.http}/`,
        headers: { host: `${TUNNEL}:${ports.http}` },
      }
      const warm = spec.conns * 4
      await rps(direct, directOpts, spec.conns, warm)
      await rps(viaProxy, proxyOpts, spec.conns, warm)
      const a = await rps(direct, directOpts, spec.conns, spec.requests)
      const b = await rps(viaProxy, proxyOpts, spec.conns, spec.requests)
      direct.destroy()
      viaProxy.destroy()
      return { dl, rpsDirect: a.rps, rpsProxy: b.rps, failed: failed + a.failed + b.failed }
    } finally {
      await proxy.close()
      child.kill()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  },
}
