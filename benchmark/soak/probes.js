'use strict'
// What the soak's checks look at: this process's fds, RSS and threads, its children and marked
// processes, the session directories, and the boxes in `kern ps`.

const fs = require('node:fs')
const os = require('node:os')
const cp = require('node:child_process')
const { KERN, MARKER, sleep } = require('./context')

function fdList() {
  const out = []
  for (const n of fs.readdirSync('/proc/self/fd')) {
    let target = '?'
    try {
      target = fs.readlinkSync(`/proc/self/fd/${n}`)
    } catch {
      continue // the fd readdir itself used, closed by now
    }
    out.push(`${n} -> ${target}`)
  }
  return out
}

function statusKb(field) {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync('/proc/self/status', 'utf8'))
  return m ? Number(m[1]) : NaN
}

/** Every process on the host: pid, ppid, state, cmdline. */
function processes() {
  const out = []
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue
    try {
      const stat = fs.readFileSync(`/proc/${e}/stat`, 'latin1')
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      const cmd = fs.readFileSync(`/proc/${e}/cmdline`, 'latin1').replace(/\0/g, ' ').trim()
      out.push({
        pid: Number(e),
        state: rest[0],
        ppid: Number(rest[1]),
        cmd: cmd || stat.slice(stat.indexOf('('), stat.lastIndexOf(')') + 1),
      })
    } catch {
      /* gone */
    }
  }
  return out
}

/** Children of this process (zombies included) and processes carrying the marker. */
function strays() {
  const all = processes()
  const children = all.filter((p) => p.ppid === process.pid)
  const marked = all.filter((p) => p.pid !== process.pid && p.cmd.includes(MARKER))
  const seen = new Set()
  const out = []
  for (const p of [...children, ...marked]) {
    if (seen.has(p.pid)) continue
    seen.add(p.pid)
    out.push(p)
  }
  return out
}

function sessionDirs() {
  const prefix = `kern-sbx-${process.pid}-`
  return fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith(prefix))
}

/** `kern ps --json`: { all, ours } (ours = boxes whose command carries the marker). Async so the
 * event loop keeps running; the child is reaped before this resolves. Spawned through node's
 * child_process on purpose, as any host app would: libuv then owns SIGCHLD from the baseline on,
 * which is the situation the binding's own helpers (`kern stop`, `kern ps`) must survive. */
function kernPs() {
  return new Promise((resolve) => {
    cp.execFile(KERN, ['ps', '--json'], { timeout: 20_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err)
        return resolve({ error: `${err.message.split('\n')[0]} ${String(stderr).trim()}`.trim(), all: [], ours: [] })
      let list
      try {
        list = JSON.parse(stdout || '[]')
      } catch (e) {
        return resolve({ error: `unparsable output: ${String(stdout).slice(0, 200)}`, all: [], ours: [] })
      }
      const arr = Array.isArray(list) ? list : []
      resolve({ all: arr, ours: arr.filter((b) => JSON.stringify(b).includes(MARKER)) })
    })
  })
}

function threads() {
  return Number(/^Threads:\s+(\d+)/m.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1])
}

/** Waits (up to 20 s) for idle pool threads to exit: a live thread's stack counts in RSS. tokio's
 * blocking threads linger 10 s after their last task. */
async function threadsSettle() {
  const end = Date.now() + 20_000
  let last = threads()
  let stableSince = Date.now()
  while (Date.now() < end) {
    await sleep(250)
    const n = threads()
    if (n !== last) {
      last = n
      stableSince = Date.now()
    } else if (Date.now() - stableSince >= 2_000 && n <= 16) break
  }
  return last
}

async function settleGc() {
  for (let i = 0; i < 4; i++) {
    global.gc()
    await sleep(150)
  }
}

async function snapshotFigures() {
  const nThreads = await threadsSettle()
  await settleGc()
  const ps = await kernPs()
  await sleep(100) // the ps child's pipes are closed on the next turns
  return {
    fds: fdList(),
    rssKb: statusKb('VmRSS'),
    mem: process.memoryUsage(),
    threads: nThreads,
    strays: strays(),
    tmpdirs: sessionDirs(),
    boxes: ps,
  }
}

module.exports = {
  fdList,
  statusKb,
  processes,
  strays,
  sessionDirs,
  kernPs,
  threads,
  threadsSettle,
  settleGc,
  snapshotFigures,
}
