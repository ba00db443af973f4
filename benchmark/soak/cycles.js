'use strict'
// Pause/resume/fork/snapshot cycles on one machine (issue 33's soak): a machine runs a small
// process tree (a python http.server, reached through an exposed port, and a counter loop writing
// its pid and count into the workspace). Each cycle pauses and resumes it and checks the tree is
// the same one (the same pids in the box, the counter moving on from where it stopped, the server
// answering); every `every` cycles it also forks it ({ count: 2 }: each fork sees a root file and
// a workspace file of the parent, writes its own, and is closed) and snapshots it (one machine
// started from the snapshot, checked and closed, the snapshot deleted).
//
// Measured at three marks (after two warm-up cycles, at half, at the end), with the machine
// running and no fork open: this process's fds and RSS (it holds the session and the machine),
// the session's live boxes (its `kern box` children named after the soak's machines: the real
// kern's `kern ps` does not list a machine's box), the host processes under this one (all, and
// those running kern), the snapshot store's entries (a store of the
// scenario's own, `snapshotDir`) and the machines' workspace copies in the session's dir. None may
// grow from start to middle or end (RSS: within the rss check's bound); the store must be back to
// what it held before the first snapshot.
//
// It runs in a child process of its own (`node --expose-gc soak/cycles.js N EVERY MARKER DIR KERN`),
// as soak/box-egress.js does, so its figures are the scenario's alone; soak.js reads its one line.

const fs = require('node:fs')
const os = require('node:os')
const http = require('node:http')
const path = require('node:path')
const { runChild, childMain } = require('./child')

const ROOT = path.resolve(__dirname, '..', '..')
/** Cycles before the start mark, each with a fork and a snapshot round: the agent channels, the
 * snapshot and fork machinery, the blocking pool's threads. */
const WARM = 3
/** How long the whole scenario may take before it is called hung. */
const LIMIT_MS = 30 * 60_000

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

const COUNTER = (file, marker) => `
import os, time
# ${marker}
i = 0
while True:
    i += 1
    with open(${JSON.stringify(file)} + '.tmp', 'w') as f:
        f.write('%d %d' % (os.getpid(), i))
    os.replace(${JSON.stringify(file)} + '.tmp', ${JSON.stringify(file)})
    time.sleep(0.02)
`

/** GET `url`: the status code, or a word saying why none came within `ms`. */
function get(url, ms) {
  return new Promise((resolve) => {
    const req = http.get(url, { timeout: ms, agent: false }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode))
    })
    req.on('timeout', () => {
      req.destroy()
      resolve('no answer')
    })
    req.on('error', (e) => resolve(`error ${e.code}`))
  })
}

/** Host processes descending from this one: { all, kern, boxes } (kern: those running the kern
 * binary; boxes: the session's live boxes, its `kern box NAME` children named after a machine of
 * the soak's, which both kerns start as direct children of the binding's process). */
function hostProcesses(kernBin, names) {
  const byParent = new Map()
  const info = new Map()
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue
    try {
      const stat = fs.readFileSync(`/proc/${e}/stat`, 'latin1')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      let exe = ''
      try {
        exe = fs.readlinkSync(`/proc/${e}/exe`)
      } catch {
        /* not ours to read, or a zombie */
      }
      const argv = fs.readFileSync(`/proc/${e}/cmdline`, 'latin1').split('\0')
      info.set(Number(e), { exe, argv })
      if (!byParent.has(ppid)) byParent.set(ppid, [])
      byParent.get(ppid).push(Number(e))
    } catch {
      /* gone */
    }
  }
  let kernReal = kernBin
  try {
    kernReal = fs.realpathSync(kernBin)
  } catch {
    /* as given */
  }
  const children = byParent.get(process.pid) || []
  const out = []
  const todo = [...children]
  while (todo.length) {
    const p = todo.pop()
    out.push(p)
    todo.push(...(byParent.get(p) || []))
  }
  const isKern = (p) => info.get(p) && info.get(p).exe === kernReal
  const boxes = children.filter((p) => isKern(p) && info.get(p).argv[1] === 'box' && names.has(info.get(p).argv[2]))
  return { all: out.length, kern: out.filter(isKern).length, boxes: boxes.length }
}

/** The workspace copies machines of this process's sessions hold (`<session dir>/ws-*`). */
function wsDirs() {
  const prefix = `kern-sbx-${process.pid}-`
  return fs
    .readdirSync(os.tmpdir())
    .filter((n) => n.startsWith(prefix))
    .flatMap((s) => {
      try {
        return fs.readdirSync(path.join(os.tmpdir(), s)).filter((n) => n.startsWith('ws-'))
      } catch {
        return []
      }
    })
}

/** The store's entries, the baselines cache left out (as the snapshot tests count them). */
const storeEntries = (store) => fs.readdirSync(store).filter((n) => n !== 'baselines')

async function settle() {
  for (let i = 0; i < 3; i++) {
    global.gc()
    await sleep(100)
  }
}

/** The child: one session with its own store, one machine, the cycles, the marks. */
async function child([n, every, marker, dir, kernBin]) {
  const kern = require(ROOT)
  n = Number(n)
  every = Math.max(1, Number(every))
  const problems = []
  const bad = (what) => {
    if (problems.length < 50) problems.push(`cycles: ${what}`)
  }
  const store = fs.mkdtempSync(path.join(dir, 'snapstore-'))
  const sbx = new kern.Sandbox({ timeoutS: 60, prewarm: 0, snapshotDir: store })
  await sbx.open()
  const m = await sbx.machine()
  const names = new Set([m.name])
  const ok = await m.exec(`mkdir -p /opt/soak && printf parent > /opt/soak/root.txt && printf pws > parent.txt`)
  if (ok.exitCode !== 0) throw new Error(`populating the machine failed: ${ok.stderr}`)
  const storeAtStart = storeEntries(store)

  const countFile = path.join(sbx.workspacePath, 'count')
  const readCount = () => {
    try {
      const [pid, c] = fs.readFileSync(countFile, 'utf8').split(' ').map(Number)
      return Number.isFinite(c) ? { pid, n: c } : null
    } catch {
      return null
    }
  }
  const server = await m.spawn(['python3', '-m', 'http.server', '8000', '--bind', '127.0.0.1', '-d', '/tmp'])
  const counter = await m.spawn(['python3', '-c', COUNTER(`${m.workdir}/count`, marker), marker])
  const { url } = await m.exposePort(8000)
  const until = async (fn, ms) => {
    const end = Date.now() + ms
    while (Date.now() < end) {
      if (await fn()) return true
      await sleep(20)
    }
    return false
  }
  if (!(await until(async () => (await get(url, 2000)) === 200, 30_000))) throw new Error('the server never answered')
  if (!(await until(() => (readCount() || { n: 0 }).n > 3, 30_000))) throw new Error('the counter never counted')
  const tree = [server.pid, counter.pid].sort((a, b) => a - b)
  const first = readCount()

  const stats = { cycles: 0, forks: 0, snapshots: 0, pauseMs: 0, resumeMs: 0, forkMs: 0, snapshotMs: 0, fromMs: 0 }

  /** One fork({ count: 2 }): each fork sees the parent's files, writes its own, and is closed. */
  const forkRound = async (i) => {
    const t = Date.now()
    const forks = await m.fork({ count: 2 })
    stats.forkMs += Date.now() - t
    stats.forks += forks.length
    for (const f of forks) names.add(f.name)
    try {
      if (forks.length !== 2) bad(`cycle ${i}: fork({ count: 2 }) gave ${forks.length} machines`)
      for (const [k, f] of forks.entries()) {
        const r = await f.exec(`cat /opt/soak/root.txt parent.txt && printf ${i}-${k} > own.txt && cat own.txt`)
        if (r.exitCode !== 0 || r.stdout !== `parentpws${i}-${k}`)
          bad(
            `cycle ${i}: fork ${k} gave ${r.exitCode} ${JSON.stringify(r.stdout.slice(0, 200))} ${r.stderr.slice(0, 200)}`,
          )
      }
    } finally {
      for (const f of forks) await f.close()
    }
  }

  /** One snapshot: made, one machine started from it (checked, closed), deleted. */
  const snapshotRound = async (i) => {
    let t = Date.now()
    const snap = await m.snapshot({ name: `soak-${i}` })
    stats.snapshotMs += Date.now() - t
    stats.snapshots++
    try {
      t = Date.now()
      const c = await sbx.machine({ from: snap })
      stats.fromMs += Date.now() - t
      names.add(c.name)
      try {
        const r = await c.exec(`cat /opt/soak/root.txt parent.txt && printf mine > own.txt && cat own.txt`)
        if (r.exitCode !== 0 || r.stdout !== 'parentpwsmine')
          bad(`cycle ${i}: the machine from the snapshot gave ${r.exitCode} ${JSON.stringify(r.stdout.slice(0, 200))}`)
      } finally {
        await c.close()
      }
    } finally {
      await snap.delete()
    }
    const left = (await sbx.snapshots()).length
    if (left !== 0) bad(`cycle ${i}: ${left} snapshots listed after delete()`)
  }

  /** One cycle: pause, resume, the same tree moving on; a fork round and a snapshot round every
   * `every` cycles. */
  const cycle = async (i) => {
    let t = Date.now()
    await m.pause()
    stats.pauseMs += Date.now() - t
    const frozen = readCount()
    const listed = (await m.processes()).map((p) => p.pid).sort((a, b) => a - b)
    if (JSON.stringify(listed) !== JSON.stringify(tree)) bad(`cycle ${i}: paused, processes ${listed}, not ${tree}`)
    t = Date.now()
    await m.resume()
    stats.resumeMs += Date.now() - t
    if (!(await until(() => (readCount() || { n: 0 }).n > (frozen ? frozen.n : 0), 15_000)))
      bad(`cycle ${i}: the counter did not move on after resume (${JSON.stringify(frozen)})`)
    const now = readCount()
    if (!now || now.pid !== first.pid) bad(`cycle ${i}: the counter's pid is ${now && now.pid}, not ${first.pid}`)
    const again = (await m.processes()).map((p) => p.pid).sort((a, b) => a - b)
    if (JSON.stringify(again) !== JSON.stringify(tree)) bad(`cycle ${i}: resumed, processes ${again}, not ${tree}`)
    const status = await get(url, 5000)
    if (status !== 200) bad(`cycle ${i}: the server answered ${status} after resume`)
    if (counter.exitCode !== null || server.exitCode !== null) bad(`cycle ${i}: a process of the tree ended`)
    if (i % every === every - 1) {
      await forkRound(i)
      await snapshotRound(i)
    }
    stats.cycles++
  }

  const figures = async () => {
    await settle()
    const status = fs.readFileSync('/proc/self/status', 'utf8')
    const procs = hostProcesses(kernBin, names)
    return {
      fds: fs.readdirSync('/proc/self/fd').length,
      rssKb: Number(/^VmRSS:\s+(\d+) kB/m.exec(status)[1]),
      threads: Number(/^Threads:\s+(\d+)/m.exec(status)[1]),
      heapKb: Math.round(process.memoryUsage().heapTotal / 1024),
      boxes: procs.boxes,
      hostProcs: procs.all,
      kernProcs: procs.kern,
      store: storeEntries(store).length,
      wsDirs: wsDirs().length,
    }
  }

  // Warm-up: a fork round and a snapshot round among them, so the machinery exists before the start.
  for (let i = 0; i < WARM; i++) await cycle(every - 1)
  for (const k of Object.keys(stats)) stats[k] = 0
  const marks = { start: await figures() }
  const t0 = Date.now()
  for (let i = 0; i < n; i++) {
    await cycle(i)
    if (i === Math.floor(n / 2) - 1) marks.middle = await figures()
  }
  const ms = Date.now() - t0
  marks.end = await figures()
  if (!marks.middle) marks.middle = marks.end

  await m.close()
  await sbx.close()
  const after = {
    store: storeEntries(store),
    storeAtStart,
    wsDirs: wsDirs().length,
    boxes: hostProcesses(kernBin, names).boxes,
    hostProcs: hostProcesses(kernBin, names).all,
  }
  fs.rmSync(store, { recursive: true, force: true })
  process.stdout.write(`${JSON.stringify({ done: stats.cycles, ms, stats, marks, after, problems })}\n`)
}

/** soak.js's side: runs the child, adds its tallies and problems; resolves to { done, ms, check }. */
function cyclesPhase(n, every) {
  const { MARKER, SOAK_DIR, KERN, tally, problems } = require('./context')
  const none = { done: 0, ms: 0, check: null }
  if (!n) return Promise.resolve(none)
  const args = [String(n), String(every), MARKER, SOAK_DIR, KERN]
  // One malloc arena: measured on a real kern with glibc's default (an arena per thread, up to
  // 8 per core), the child's RSS climbs in ~6 MiB steps as the blocking pool's threads each
  // come to hold an arena of freed memory (91 -> 121 MiB over 200 cycles, still stepping after
  // 35 fork rounds); with one arena it is flat (71 -> 76 MiB after the first round, 75-76 MiB
  // for 40 more), so what this check sees growing is kept memory, not arenas.
  const env = { ...process.env, MALLOC_ARENA_MAX: '1' }
  return runChild('cycles', __filename, args, { timeout: LIMIT_MS, env }).then((r) => {
    if (!r) return { ...none, check: { name: 'cycles', pass: false, figure: 'the scenario did not finish' } }
    const s = r.stats
    const per = (v, k) => (k ? v / k : 0)
    tally['cycles:pause+resume'] = { n: s.cycles, bad: 0, ms: s.pauseMs + s.resumeMs }
    tally['cycles:fork'] = { n: s.forks / 2, bad: 0, ms: s.forkMs }
    tally['cycles:snapshot'] = { n: s.snapshots, bad: 0, ms: s.snapshotMs }
    tally['cycles:from-snapshot'] = { n: s.snapshots, bad: 0, ms: s.fromMs }
    problems.push(...r.problems)
    r.perCycleMs = {
      pause: per(s.pauseMs, s.cycles),
      resume: per(s.resumeMs, s.cycles),
      fork2: per(s.forkMs, s.forks / 2),
      snapshot: per(s.snapshotMs, s.snapshots),
      from: per(s.fromMs, s.snapshots),
    }
    return { done: r.done, ms: r.ms, check: check(r), result: r }
  })
}

/** The cycles check: nothing grows from the start mark to the middle and end ones; the store and
 * the session's dir are back to what they were once the machines are closed. */
function check(r) {
  const { start, middle, end } = r.marks
  const mib = (kb) => `${(kb / 1024).toFixed(1)} MiB`
  const allowedKb = Math.max(start.rssKb * 0.1, 8 * 1024)
  const rows = [
    ['host fds', (f) => f.fds],
    ['host RSS', (f) => f.rssKb, allowedKb, mib],
    ['live boxes', (f) => f.boxes],
    ['host procs', (f) => f.hostProcs],
    ['kern procs', (f) => f.kernProcs],
    ['store entries', (f) => f.store],
    ['workspace copies', (f) => f.wsDirs],
  ]
  let pass = true
  const lines = []
  for (const [name, get, slack = 0, fmt = String] of rows) {
    const [a, b, c] = [start, middle, end].map(get)
    if (a === null || b === null || c === null) {
      pass = false
      lines.push(`${name}: not readable`)
      continue
    }
    const ok = b - a <= slack && c - a <= slack
    pass &&= ok
    lines.push(`${name} ${fmt(a)} / ${fmt(b)} / ${fmt(c)}${ok ? '' : ' GREW'}`)
  }
  lines.push(`host threads ${[start, middle, end].map((f) => f.threads).join(' / ')}`)
  lines.push(`host JS heap ${[start, middle, end].map((f) => mib(f.heapKb)).join(' / ')}`)
  const p = r.perCycleMs
  lines.push(
    `mean ms: pause ${p.pause.toFixed(1)}, resume ${p.resume.toFixed(1)}, fork x2 ${p.fork2.toFixed(0)}, snapshot ${p.snapshot.toFixed(0)}, machine from it ${p.from.toFixed(0)}`,
  )
  const a = r.after
  const storeBack = a.store.length === a.storeAtStart.length && a.store.every((e) => a.storeAtStart.includes(e))
  const closedOk = storeBack && a.wsDirs === 0 && a.boxes === 0
  pass &&= closedOk
  lines.push(
    `after close: store entries ${a.store.length} (${a.storeAtStart.length} before the first snapshot), workspace copies ${a.wsDirs}, live boxes ${a.boxes}${closedOk ? '' : ' LEFT'}`,
  )
  return { name: 'cycles', pass, figure: `start / middle / end${lines.map((l) => `\n      ${l}`).join('')}` }
}

childMain(module, child)

module.exports = { cyclesPhase }
