'use strict'
// The host-side egress proxy (issue 37), loopback only: requests pushed through one proxy, half of
// them refused (403, plain HTTP and CONNECT), the allowed ones with a header rule, on keep-alive
// connections; every answer and every event checked. The proxy is the binding's NativeEgress on a
// Unix socket, reached as a box's relay reaches it.
//
// It runs in a child process of its own (`node --expose-gc soak/proxy.js N MARKER DIR`), with its
// own warm-up and baseline, so its figures (fds, threads, RSS after a full collection) are the
// proxy's alone and its allocations do not blur the other scenarios' RSS check. soak.js reads its
// one JSON line; the child's exit is the soak's processes check.

const fs = require('node:fs')
const net = require('node:net')
const http = require('node:http')
const path = require('node:path')
const { runChild, childMain } = require('./child')

const ROOT = path.resolve(__dirname, '..', '..')
const CONNS = 32
let runs = 0

/** Plain HTTP in absolute form on a pooled connection to the proxy: resolves to { status, body }. */
function get(agent, url) {
  return new Promise((resolve) => {
    const u = new URL(url)
    const req = http.request({ host: 'egress-proxy', port: 1, path: url, headers: { host: u.host }, agent }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (d) => (body += d))
      res.on('end', () => resolve({ status: res.statusCode, body }))
    })
    req.on('error', (e) => resolve({ status: 0, body: e.message }))
    req.end()
  })
}

/** A CONNECT to a host not allowed, on a fresh stream: resolves to the status line's code. */
function refusedConnect(sock, target) {
  return new Promise((resolve) => {
    const s = net.createConnection(sock)
    let buf = ''
    s.setEncoding('utf8')
    s.on('data', (d) => (buf += d))
    s.on('error', () => resolve(0))
    s.on('close', () => resolve(Number(buf.slice(9, 12)) || 0))
    s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`)
  })
}

/** `n` requests through one proxy, `CONNS` at a time, every other one refused. `phase` names the
 * tallies; returns how many were done. */
async function run(n, phase, { MARKER, SOAK_DIR, tally, problems }) {
  const native = require(path.join(ROOT, 'lib', 'native.js'))
  const { callNative } = require(path.join(ROOT, 'lib', 'errors.js'))
  const server = http.createServer((req, res) => {
    const ok = req.headers['x-soak'] === MARKER
    res.writeHead(ok ? 200 : 500, { 'content-length': 2 })
    res.end(ok ? 'ok' : 'no')
  })
  await new Promise((r) => server.listen(0, '127.0.0.1', r))
  const port = server.address().port
  const sock = path.join(SOAK_DIR, `egress-${++runs}.sock`)
  let events = 0
  let refusedEvents = 0
  const proxy = await callNative(() =>
    native.NativeEgress.start(
      sock,
      {
        allowOut: ['ok.test'],
        hosts: { 'ok.test': '127.0.0.1', 'no.test': '127.0.0.1' },
        rules: { 'ok.test': [{ transform: { headers: { 'X-Soak': MARKER } } }] },
      },
      (ev) => {
        events++
        if (!ev.allowed) refusedEvents++
      },
    ),
  )
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONNS })
  agent.createConnection = () => net.createConnection(sock)
  const allowed = (tally[`${phase}:allowed`] = { n: 0, bad: 0, ms: 0 })
  const refused = (tally[`${phase}:refused`] = { n: 0, bad: 0, ms: 0 })
  const t0 = Date.now()
  let next = 0
  const bad = (t, what) => {
    t.bad++
    if (problems.length < 50) problems.push(`${phase}: ${what}`)
  }
  await Promise.all(
    Array.from({ length: CONNS }, async () => {
      for (let i = next++; i < n; i = next++) {
        const t = Date.now()
        if (i % 2 === 0) {
          const r = await get(agent, `http://ok.test:${port}/x${i}`)
          if (r.status !== 200 || r.body !== 'ok') bad(allowed, `request ${i}: ${r.status} ${r.body.slice(0, 100)}`)
          allowed.n++
          allowed.ms += Date.now() - t
        } else if (i % 10 === 1) {
          const status = await refusedConnect(sock, `no.test:${port}`)
          if (status !== 403) bad(refused, `CONNECT ${i}: ${status}, not 403`)
          refused.n++
          refused.ms += Date.now() - t
        } else {
          const r = await get(agent, `http://no.test:${port}/x${i}`)
          const why = `kern-sandbox egress: no.test:${port} refused: not in allowOut\n`
          if (r.status !== 403 || r.body !== why) bad(refused, `request ${i}: ${r.status} ${r.body.slice(0, 100)}`)
          refused.n++
          refused.ms += Date.now() - t
        }
      }
    }),
  )
  const ms = Date.now() - t0
  agent.destroy()
  // Events are delivered on the event loop after the answers; give them turns, not a clock.
  for (let i = 0; i < 200 && events < n; i++) await new Promise((r) => setTimeout(r, 10))
  if (events !== n) problems.push(`${phase}: ${events} events for ${n} requests`)
  if (refusedEvents !== refused.n) problems.push(`${phase}: ${refusedEvents} refusal events for ${refused.n} refused`)
  await proxy.close()
  if (proxy.activeConnections !== 0) problems.push(`${phase}: ${proxy.activeConnections} connections after close()`)
  if (fs.existsSync(sock)) problems.push(`${phase}: the socket file is left after close()`)
  await new Promise((r) => server.close(r))
  return { done: allowed.n + refused.n, ms }
}

function figures() {
  const status = fs.readFileSync('/proc/self/status', 'utf8')
  const kb = (f) => Number(new RegExp(`^${f}:\\s+(\\d+) kB`, 'm').exec(status)[1])
  const threads = Number(/^Threads:\s+(\d+)/m.exec(status)[1])
  return { fds: fs.readdirSync('/proc/self/fd').length, rssKb: kb('VmRSS'), threads }
}

async function settle() {
  for (let i = 0; i < 3; i++) {
    global.gc()
    await new Promise((r) => setTimeout(r, 100))
  }
}

/** The child: two warm-up runs as long as the run (up to 10,000 each: the runtime, the allocator's
 * arenas; measured, RSS climbs by ~10 MiB over the first 10,000-20,000 requests and stays flat
 * from there, 30,000 requests after two runs of 5,000 ending where 10,000 did), the baseline, the
 * run. */
async function child([n, marker, dir]) {
  const shared = { MARKER: marker, SOAK_DIR: dir, tally: {}, problems: [] }
  for (let i = 0; i < 2; i++) await run(Math.min(Number(n), 10000), 'warm-up:proxy', shared)
  await settle()
  const before = figures()
  shared.problems.length = 0
  const { done, ms } = await run(Number(n), 'proxy', shared)
  await settle()
  const after = figures()
  const { tally, problems } = shared
  process.stdout.write(`${JSON.stringify({ done, ms, before, after, tally, problems })}\n`)
}

/** soak.js's side: runs the child, adds its tallies and problems; resolves to { done, ms, check }. */
function proxyPhase(n) {
  const { MARKER, SOAK_DIR, tally, problems } = require('./context')
  const none = { done: 0, ms: 0, check: null }
  if (!n) return Promise.resolve(none)
  return runChild('proxy', __filename, [String(n), MARKER, SOAK_DIR], { timeout: 300_000 }).then((r) => {
    if (!r) return none
    Object.assign(tally, r.tally)
    for (const k of Object.keys(tally)) if (k.startsWith('warm-up:')) delete tally[k]
    problems.push(...r.problems)
    const { before: b, after: a } = r
    const allowedKb = Math.max(b.rssKb * 0.1, 8 * 1024)
    const mib = (kb) => `${(kb / 1024).toFixed(1)} MiB`
    const check = {
      name: 'proxy',
      pass: a.fds <= b.fds && a.threads <= b.threads && a.rssKb - b.rssKb <= allowedKb,
      figure: `its own process: fds ${b.fds} -> ${a.fds}, threads ${b.threads} -> ${a.threads}, RSS ${mib(b.rssKb)} -> ${mib(a.rssKb)} (limit +${mib(allowedKb)})`,
    }
    return { done: r.done, ms: r.ms, check }
  })
}

childMain(module, child)

module.exports = { proxyPhase }
