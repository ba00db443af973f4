'use strict'
// Egress through one machine (issue 37's soak), loopback only: a machine whose network is a
// policy runs one small Python client (soak/box-egress.py) that pushes the requests through the
// in-box relay (127.0.0.1:3128) -> the bind-mounted socket -> the host proxy -> loopback servers
// this file starts, reached by `hosts`: half allowed (forwarded plain HTTP and terminated HTTPS,
// both with the rule's header, and plain HTTP in a tunnel), half refused (a host not allowed,
// over plain HTTP and CONNECT, and a denied address). Every answer and every onRequest event is
// checked.
//
// The client stops at three marks, after a warm-up, at half and at the end, in the same state
// each time (alive, idle, its keep-alive connections open); at each, this process measures its own
// fds and RSS (it holds the session and the machine), the proxy processes' (kern-sandbox-egress)
// fds, RSS and open streams, the upstream connections the servers hold, and the box's process
// count (kern's `metrics().pids` and the client's own count of /proc, with the agent's fds: the
// relay is a thread of it). None of
// them may grow from start to middle or end (RSS: within the rss check's bound). After the client
// exits, the proxy must hold no stream of it and the box as many processes as before it started.
//
// It runs in a child process of its own (`node --expose-gc soak/box-egress.js N MARKER DIR`), as
// soak/proxy.js does, so its figures are the scenario's alone; soak.js reads its one JSON line.

const fs = require('node:fs')
const http = require('node:http')
const https = require('node:https')
const path = require('node:path')
const { runChild, childMain } = require('./child')

const ROOT = path.resolve(__dirname, '..', '..')
const CLIENT = fs.readFileSync(path.join(__dirname, 'box-egress.py'), 'utf8')
/** Client threads, each with one keep-alive connection per allowed kind. */
const THREADS = 4
/** Requests before the start mark: the connections, the proxy's leaf certificate, the
 * allocator's arenas. Measured on a real kern: the host's RSS climbs by 7-8 MiB over the first
 * ~20,000 requests (2,000 were too few under load: +7.3 MiB from start to middle, +0.5 MiB from
 * middle to end), then stays flat (+0.6 MiB over 100,000 more). What step remains in some runs
 * (4-6 MiB, once) is V8 keeping a larger heap after its collections (heapTotal 9.5 -> 14.0 MiB
 * in such a run, none in the next), so the figure shows the JS heap beside the RSS. */
const WARM = 20000
/** How long one stretch between marks may take before the run is called hung. */
const STRETCH_MS = 300_000

function statusOf() {
  const status = fs.readFileSync('/proc/self/status', 'utf8')
  return {
    rssKb: Number(/^VmRSS:\s+(\d+) kB/m.exec(status)[1]),
    threads: Number(/^Threads:\s+(\d+)/m.exec(status)[1]),
  }
}

/** The egress proxy processes (kern-sandbox-egress) this process started: the session's and the
 * machine's. */
function proxyPids() {
  const pids = []
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue
    try {
      const stat = fs.readFileSync(`/proc/${e}/stat`, 'latin1')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      const argv0 = fs.readFileSync(`/proc/${e}/cmdline`, 'latin1').split('\0')[0]
      if (ppid === process.pid && path.basename(argv0) === 'kern-sandbox-egress') pids.push(e)
    } catch {
      /* gone */
    }
  }
  return pids
}

/** The proxy processes' fds and RSS, summed. */
function proxyFigures() {
  let fds = 0
  let rssKb = 0
  for (const pid of proxyPids()) {
    try {
      fds += fs.readdirSync(`/proc/${pid}/fd`).length
      rssKb += Number(/^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1])
    } catch {
      /* gone */
    }
  }
  return { proxyFds: fds, proxyRssKb: rssKb }
}

/** The proxy's streams: sockets the proxy processes hold that no table of their network namespace
 * lists. A stream the in-box relay opens on the bind-mounted proxy socket is accepted into the
 * connecting side's namespace, the box's, so the proxy's ends of those streams are exactly the
 * sockets there that /proc/<pid>/net does not know. */
function proxyStreams() {
  let n = 0
  for (const pid of proxyPids()) n += unlistedSockets(pid)
  return n
}

function unlistedSockets(pid) {
  const known = new Set()
  // The inode column of each table.
  const tables = { unix: 6, tcp: 9, tcp6: 9, udp: 9, udp6: 9, raw: 9, raw6: 9, netlink: 9, packet: 8 }
  for (const [t, col] of Object.entries(tables)) {
    let text
    try {
      text = fs.readFileSync(`/proc/${pid}/net/${t}`, 'utf8')
    } catch {
      continue // a protocol this kernel does not have
    }
    for (const line of text.split('\n').slice(1)) {
      const inode = line.trim().split(/\s+/)[col]
      if (inode) known.add(inode)
    }
  }
  let n = 0
  let fds
  try {
    fds = fs.readdirSync(`/proc/${pid}/fd`)
  } catch {
    return 0 // gone
  }
  for (const fd of fds) {
    let target
    try {
      target = fs.readlinkSync(`/proc/${pid}/fd/${fd}`)
    } catch {
      continue // the fd readdir itself used
    }
    const m = /^socket:\[(\d+)\]$/.exec(target)
    if (m && !known.has(m[1])) n++
  }
  return n
}

const connections = (server) => new Promise((r) => server.getConnections((e, n) => r(e ? -1 : n)))

async function settle() {
  for (let i = 0; i < 3; i++) {
    global.gc()
    await new Promise((r) => setTimeout(r, 100))
  }
}

/** The child: servers, a session, one machine with the policy, the client, the marks. */
async function child([n, marker, dir]) {
  const kern = require(ROOT)
  const { makeCerts } = require(path.join(ROOT, '__test__', 'certs.js'))
  n = Number(n)
  const problems = []
  const certs = makeCerts(fs.mkdtempSync(path.join(dir, 'box-egress-')), ['api.test'])
  // The reply says whether the rule's header arrived: `ok <path>`, or `ok <path> plain` without it.
  const reply = (req, res) => {
    const body = `ok ${req.url.slice(1)}${req.headers['x-soak'] === marker ? '' : ' plain'}`
    res.writeHead(200, { 'content-length': Buffer.byteLength(body) })
    res.end(body)
  }
  const plain = http.createServer(reply)
  const tls = https.createServer({ key: certs.key, cert: certs.cert }, reply)
  for (const s of [plain, tls]) {
    s.keepAliveTimeout = 0 // idle keep-alive connections stay while the host measures
    await new Promise((r) => s.listen(0, '127.0.0.1', r))
  }
  const hp = plain.address().port
  const tp = tls.address().port

  const events = { forwarded: 0, terminated: 0, tunnelled: 0, refused: 0, other: 0 }
  const sbx = new kern.Sandbox({ timeoutS: 60, prewarm: 0 })
  await sbx.open()
  const m = await sbx.machine({
    network: {
      allowOut: ['ok.test', 'api.test', 'tun.test', 'deny.test'],
      denyOut: ['127.0.0.2/32'],
      hosts: {
        'ok.test': '127.0.0.1',
        'api.test': '127.0.0.1',
        'tun.test': '127.0.0.1',
        'no.test': '127.0.0.1',
        'deny.test': '127.0.0.2',
      },
      rules: {
        'ok.test': [{ transform: { headers: { 'X-Soak': marker } } }],
        'api.test': [{ transform: { headers: { 'X-Soak': marker } } }],
      },
      upstreamCa: certs.ca,
    },
    onRequest: (e) => {
      if (!e.allowed) events.refused++
      else if (e.reason in events) events[e.reason]++
      else events.other++
    },
  })

  const figures = async (client) => {
    await settle()
    const metrics = await m.metrics()
    return {
      fds: fs.readdirSync('/proc/self/fd').length,
      ...statusOf(),
      heapKb: Math.round(process.memoryUsage().heapTotal / 1024),
      proxyStreams: proxyStreams(),
      ...proxyFigures(),
      upstream: (await connections(plain)) + (await connections(tls)),
      pids: metrics.pids,
      boxMemoryKb: Math.round(metrics.memoryBytes / 1024),
      box: client ? client.box : null,
    }
  }

  const idle = await figures(null)
  // The client's lines, one per mark; `next()` resolves to the next one (null: it ended first).
  const lines = []
  const waiting = []
  let partial = ''
  let stderr = ''
  const deliver = (v) => (waiting.length ? waiting.shift()(v) : lines.push(v))
  const p = await m.spawn(
    ['python3', '-c', CLIENT, String(hp), String(tp), String(WARM), String(n), String(THREADS), marker],
    {
      stdin: true,
      onStdout: (chunk) => {
        partial += chunk.toString()
        let i
        while ((i = partial.indexOf('\n')) >= 0) {
          const line = partial.slice(0, i)
          partial = partial.slice(i + 1)
          try {
            deliver(JSON.parse(line))
          } catch {
            problems.push(`box-egress: the client printed ${line.slice(0, 200)}`)
          }
        }
      },
      onStderr: (chunk) => {
        if (stderr.length < 4000) stderr += chunk.toString()
      },
    },
  )
  const exited = p.wait().then((r) => {
    deliver(null)
    return r
  })
  const next = () =>
    lines.length
      ? Promise.resolve(lines.shift())
      : new Promise((resolve) => {
          const t = setTimeout(() => resolve(null), STRETCH_MS)
          waiting.push((v) => {
            clearTimeout(t)
            resolve(v)
          })
        })

  const marks = {}
  let last = null
  let first = null
  for (const name of ['start', 'middle', 'end', 'closed']) {
    const line = await next()
    if (!line || line.mark !== name) {
      problems.push(
        `box-egress: expected the client's ${name} mark, got ${line ? line.mark : 'nothing'}: ${stderr.slice(-600)}`,
      )
      await p.kill('SIGKILL').catch(() => {})
      break
    }
    last = line
    if (name === 'start') {
      first = line
      marks.start = await figures(line)
    } else if (name === 'closed') {
      break
    } else {
      marks[name] = await figures(line)
    }
    await p.write('go\n')
  }
  const result = await exited
  if (result.exitCode !== 0) problems.push(`box-egress: the client exited ${result.exitCode}: ${stderr.slice(-600)}`)

  // The client's tallies from the start mark on (its warm-up left out); its problems over the
  // whole run.
  const tally = {}
  let done = 0
  const ms = first && last ? Math.round(last.busyMs - first.busyMs) : 0
  if (last) {
    for (const [kind, s] of Object.entries(last.stats)) {
      const s0 = first ? first.stats[kind] : { n: 0, bad: 0, us: 0 }
      const nn = s.n - s0.n
      tally[`box:${kind}`] = { n: nn, bad: s.bad - s0.bad, ms: (s.us - s0.us) / 1000 }
      done += nn
    }
    for (const p of last.problems) problems.push(`box-egress: ${p}`)
  }

  // Events come on the event loop after the answers, tunnels when they close: give them turns.
  const want = last
    ? {
        forwarded: last.stats.forwarded.n,
        terminated: last.stats.terminated.n,
        tunnelled: last.opened.tunnelled,
        refused: last.stats['refused-http'].n + last.stats['refused-connect'].n + last.stats['refused-deny'].n,
        other: 0,
      }
    : null
  const same = () => want && Object.keys(want).every((k) => events[k] === want[k])
  for (let i = 0; i < 300 && (!same() || proxyStreams() > idle.proxyStreams); i++)
    await new Promise((r) => setTimeout(r, 10))
  if (want && !same()) problems.push(`box-egress: events ${JSON.stringify(events)}, expected ${JSON.stringify(want)}`)

  // After the client: no stream left on the proxy, the box back to its process count before it.
  let after = await figures(null)
  for (let i = 0; i < 50 && after.pids > idle.pids; i++) {
    await new Promise((r) => setTimeout(r, 100))
    after = await figures(null)
  }
  await m.close()
  await sbx.close()
  for (const s of [plain, tls]) {
    s.closeAllConnections()
    await new Promise((r) => s.close(r))
  }
  const out = { done, ms, idle, marks, after, tally, problems, events, opened: last ? last.opened : null }
  process.stdout.write(`${JSON.stringify(out)}\n`)
}

/** soak.js's side: runs the child, adds its tallies and problems; resolves to { done, ms, check }. */
function boxEgressPhase(n) {
  const { MARKER, SOAK_DIR, tally, problems } = require('./context')
  const none = { done: 0, ms: 0, check: null }
  if (!n) return Promise.resolve(none)
  return runChild('box-egress', __filename, [String(n), MARKER, SOAK_DIR], { timeout: 4 * STRETCH_MS }).then((r) => {
    if (!r) return none
    Object.assign(tally, r.tally)
    problems.push(...r.problems)
    return { done: r.done, ms: r.ms, check: check(r), result: r }
  })
}

/** The box-egress check: nothing grows from the start mark to the middle and end ones. */
function check(r) {
  const { start, middle, end } = r.marks
  if (!start || !middle || !end)
    return { name: 'box-egress', pass: false, figure: 'the client did not reach its marks' }
  const mib = (kb) => `${(kb / 1024).toFixed(1)} MiB`
  const allowedKb = Math.max(start.rssKb * 0.1, 8 * 1024)
  const rows = [
    ['host fds', (f) => f.fds],
    ['host RSS', (f) => f.rssKb, allowedKb, mib],
    // Less any the proxies held before the client started.
    ['proxy streams', (f) => f.proxyStreams - r.idle.proxyStreams],
    ['proxy fds', (f) => f.proxyFds],
    ['proxy RSS', (f) => f.proxyRssKb, Math.max(start.proxyRssKb * 0.1, 8 * 1024), mib],
    ['upstream conns', (f) => f.upstream],
    ['box pids', (f) => f.pids],
    ['box procs', (f) => f.box.procs],
    ['agent fds', (f) => f.box.agent.fds],
  ]
  let pass = true
  const lines = []
  for (const [name, get, slack = 0, fmt = String] of rows) {
    const [a, b, c] = [start, middle, end].map(get)
    if (a === null || a === undefined) {
      lines.push(`${name}: not readable`)
      continue
    }
    const ok = b - a <= slack && c - a <= slack
    pass &&= ok
    lines.push(`${name} ${fmt(a)} / ${fmt(b)} / ${fmt(c)}${ok ? '' : ' GREW'}`)
  }
  const agentRss = [start, middle, end].map((f) => f.box.agent.rssKb)
  if (agentRss[0] !== null) lines.push(`agent RSS ${agentRss.map(mib).join(' / ')}`)
  lines.push(`host JS heap ${[start, middle, end].map((f) => mib(f.heapKb)).join(' / ')}`)
  lines.push(`box tasks ${[start, middle, end].map((f) => f.box.tasks).join(' / ')}`)
  lines.push(`box memory ${[start, middle, end].map((f) => mib(f.boxMemoryKb)).join(' / ')}`)
  const closedOk = r.after.proxyStreams <= r.idle.proxyStreams && r.after.pids <= r.idle.pids
  pass &&= closedOk
  lines.push(
    `after the client: proxy streams ${r.after.proxyStreams - r.idle.proxyStreams}, box pids ${r.after.pids} (${r.idle.pids} before it)${closedOk ? '' : ' LEFT'}`,
  )
  return { name: 'box-egress', pass, figure: `start / middle / end${lines.map((l) => `\n      ${l}`).join('')}` }
}

childMain(module, child)

module.exports = { boxEgressPhase }
