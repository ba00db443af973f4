#!/usr/bin/env node
'use strict'
// kern-sandbox soak under faults (issue 7). Not a test and not part of `npm test`: a bounded run
// that hammers the binding with a mix of successes, timeouts, kills, floods and cancelled calls,
// sequentially and concurrently, across several sessions, then checks that nothing is left behind.
//
//   npm run soak                           # 1,000 sequential + 200 concurrent calls + 5,000 kernel cells, 10 min cap
//   npm run soak -- --quick                # 150 + 50 calls + 800 cells, about a minute
//   KERN_BIN=/path/to/kern npm run soak    # against a real kern (default: the stand-in)
//
// Options: --minutes N (cap on the call phases; checks still run after it), --quick, --seq N,
// --conc N, --cells N (warm-kernel cells), --out FILE (the figures as JSON), --verbose (every
// call's outcome).
//
// The kernel phase runs cells on a few warm kernels at once: plain cells whose output and value
// are checked against state the soak keeps per kernel, errors, interrupts (obeyed and ignored),
// per-cell timeouts, output past the cap, a dying interpreter, bursts queued without awaiting, and
// kernels closed with cells still queued and opened anew.
//
// Checks, each PASS/FAIL (the exit code is non-zero only if one fails):
//   fds        /proc/self/fd after the run == after the warm-up (lazily created long-lived fds,
//              such as the spawner's, exist by then)
//   processes  no child of this process (live or zombie), no process carrying the soak's marker
//   tmpdirs    no kern-sbx-<pid>-* left in os.tmpdir()
//   boxes      no box carrying the marker in `kern ps --json`
//   rss        VmRSS after the run (and a global.gc()) within 10% of VmRSS after the warm-up, or
//              within 8 MiB where that is more: a runtime or spawner thread still alive at the end
//              (threads are reported) brings its stack and malloc arena, a few MiB that are no
//              leak, which 10% of a ~55 MiB quick-soak baseline cannot absorb
//   calls      every call and cell settled in time with the outcome its workload must produce

const fs = require('node:fs')
const os = require('node:os')

/** The least RSS growth the rss check allows (see above). */
const RSS_FLOOR_KB = 8 * 1024
const path = require('node:path')
const cp = require('node:child_process')
const crypto = require('node:crypto')

const ROOT = path.resolve(__dirname, '..')

// ---------------------------------------------------------------------------------------------
// re-exec with --expose-gc, so RSS is compared after a full collection

if (typeof global.gc !== 'function') {
  if (process.env.KERN_SOAK_REEXEC) {
    console.error('soak: global.gc is still missing after re-exec with --expose-gc')
    process.exit(2)
  }
  const r = cp.spawnSync(process.execPath, ['--expose-gc', ...process.execArgv, __filename, ...process.argv.slice(2)], {
    stdio: 'inherit',
    env: { ...process.env, KERN_SOAK_REEXEC: '1' },
  })
  if (r.error) {
    console.error(`soak: could not re-exec node: ${r.error.message}`)
    process.exit(2)
  }
  process.exit(r.status === null ? 1 : r.status)
}

// ---------------------------------------------------------------------------------------------
// arguments

function parseArgs(argv) {
  const a = { quick: false, minutes: null, seq: null, conc: null, cells: null, out: null, verbose: false }
  for (let i = 0; i < argv.length; i++) {
    const v = argv[i]
    const num = () => {
      const n = Number(argv[++i])
      if (!Number.isFinite(n) || n < 0) {
        console.error(`soak: ${v} needs a non-negative number`)
        process.exit(2)
      }
      return n
    }
    if (v === '--quick') a.quick = true
    else if (v === '--minutes') a.minutes = num()
    else if (v === '--seq') a.seq = Math.floor(num())
    else if (v === '--conc') a.conc = Math.floor(num())
    else if (v === '--cells') a.cells = Math.floor(num())
    else if (v === '--out') a.out = path.resolve(argv[++i])
    else if (v === '--verbose' || v === '-v') a.verbose = true
    else if (v === '--help' || v === '-h') {
      console.log(
        fs
          .readFileSync(__filename, 'utf8')
          .split('\n')
          .slice(2, 28)
          .map((l) => l.replace(/^\/\/ ?/, ''))
          .join('\n'),
      )
      process.exit(0)
    } else {
      console.error(`soak: unknown option ${v} (try --help)`)
      process.exit(2)
    }
  }
  a.seq ??= a.quick ? 150 : 1000
  a.conc ??= a.quick ? 50 : 200
  a.cells ??= a.quick ? 800 : 5000
  a.minutes ??= a.quick ? 1.5 : 10
  return a
}

const args = parseArgs(process.argv.slice(2))

// ---------------------------------------------------------------------------------------------
// kern selection, as the test helpers do it

const standin = path.join(ROOT, 'target', 'release', 'kern-standin')
if (!process.env.KERN_BIN) {
  if (!fs.existsSync(standin)) {
    console.error(`soak: KERN_BIN is not set and the stand-in is not built (${standin}): run \`npm run build:standin\``)
    process.exit(2)
  }
  process.env.KERN_BIN = standin
}
const KERN = process.env.KERN_BIN
const realpathOr = (p) => {
  try {
    return fs.realpathSync(p)
  } catch {
    return p
  }
}
const KERN_KIND = realpathOr(KERN) === realpathOr(standin) ? 'stand-in' : 'real kern'

const kern = require(ROOT)
const { Sandbox, withSandbox } = kern

// Every command the soak runs carries this string: in argv (so kern's and the box's command lines
// show it, and `kern ps` lists it) and in python code (as a comment).
const MARKER = `ksoak${process.pid}x${crypto.randomBytes(3).toString('hex')}`
const MAX_OUT = 32 * 1024
const SOAK_DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'kern-soak-'))

// ---------------------------------------------------------------------------------------------
// probes

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

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

// ---------------------------------------------------------------------------------------------
// workloads: each returns { kind, start(session) -> Promise, check(outcome) -> null | problem }

const rnd = (n) => crypto.randomInt(n)
const pick = (arr) => arr[rnd(arr.length)]
let seqNo = 0

function sh(script) {
  return ['sh', '-c', `${script}; : ${MARKER}`]
}

const isResult = (o) => o.ok && o.value && typeof o.value.exitCode === 'number'
const describe = (o) =>
  o.hung
    ? 'did not settle'
    : o.ok
      ? `exit ${o.value.exitCode} fault ${JSON.stringify(o.value.fault)} truncated ${o.value.truncated} stdout ${JSON.stringify(String(o.value.stdout).slice(0, 60))} stderr ${JSON.stringify(String(o.value.stderr).slice(-160))}`
      : `rejected: ${o.error && o.error.name}: ${o.error && o.error.message}`

const WORKLOADS = {
  ok() {
    const n = ++seqNo
    const variant = rnd(6)
    if (variant === 0) {
      return {
        kind: 'ok',
        timeoutS: 60,
        start: (s, o) => s.runCode(`# ${MARKER}\nprint("ok-${n}")`, o),
        check: (r) =>
          isResult(r) && r.value.exitCode === 0 && r.value.fault === null && r.value.stdout === `ok-${n}\n`
            ? null
            : describe(r),
      }
    }
    if (variant === 1) {
      return {
        kind: 'ok',
        timeoutS: 60,
        start: (s, o) => s.runCode(`echo ok-${n} >&2; : ${MARKER}`, { ...o, language: 'bash' }),
        check: (r) =>
          isResult(r) && r.value.exitCode === 0 && r.value.fault === null && r.value.stderr.includes(`ok-${n}\n`)
            ? null
            : describe(r),
      }
    }
    if (variant === 2) {
      // a file made in the box, read back host-side (names are unique: calls run concurrently)
      const name = `f-${n}.txt`
      return {
        kind: 'ok',
        timeoutS: 60,
        start: async (s, o) => {
          const r = await s.run(sh(`echo ok-${n} > ${name}`), o)
          const back = r.exitCode === 0 ? String(await s.readFile(name)) : null
          return Object.assign(r, { back })
        },
        check: (r) =>
          isResult(r) && r.value.exitCode === 0 && r.value.fault === null && r.value.back === `ok-${n}\n`
            ? null
            : describe(r),
      }
    }
    if (variant === 3) {
      // host write, box read (and remove)
      const name = `h-${n}.txt`
      return {
        kind: 'ok',
        timeoutS: 60,
        start: async (s, o) => {
          await s.writeFile(name, `host-${n}\n`)
          return s.run(sh(`cat ${name} && rm ${name}`), o)
        },
        check: (r) => (isResult(r) && r.value.exitCode === 0 && r.value.stdout === `host-${n}\n` ? null : describe(r)),
      }
    }
    if (variant === 4) {
      // a failing exit is a result, not a fault
      return {
        kind: 'ok',
        timeoutS: 60,
        start: (s, o) => s.run(sh('exit 3'), o),
        check: (r) => (isResult(r) && r.value.exitCode === 3 && r.value.fault === null ? null : describe(r)),
      }
    }
    return {
      kind: 'ok',
      timeoutS: 60,
      start: (s, o) => s.run(sh(`echo ok-${n}`), o),
      check: (r) =>
        isResult(r) && r.value.exitCode === 0 && r.value.fault === null && r.value.stdout === `ok-${n}\n`
          ? null
          : describe(r),
    }
  },

  timeout() {
    const timeoutS = pick([0.2, 0.3, 0.5])
    // half of them leave a background child holding the box's stdout open
    const script = rnd(2) ? `python3 -c 'import time; time.sleep(30)' ${MARKER} & sleep 30` : 'sleep 30'
    return {
      kind: 'timeout',
      timeoutS,
      start: (s, o) => s.run(sh(script), o),
      check: (r) => (isResult(r) && r.value.fault && r.value.fault.type === 'timeout' ? null : describe(r)),
    }
  },

  kill() {
    // PID 1 of a box ignores signals from inside its namespace, so the SIGKILLed process is a
    // child of the shell, which exits with its status (137). A sleeper is left behind in the box.
    return {
      kind: 'kill',
      timeoutS: 60,
      start: (s, o) =>
        s.run(
          [
            'sh',
            '-c',
            `python3 -c 'import time; time.sleep(30)' ${MARKER} & python3 -c 'import os; os.kill(os.getpid(), 9)' ${MARKER}; exit $?`,
          ],
          o,
        ),
      check: (r) =>
        isResult(r) && r.value.exitCode === 137 && r.value.fault && ['killed', 'oom'].includes(r.value.fault.type)
          ? null
          : describe(r),
    }
  },

  flood() {
    const bytes = pick([MAX_OUT * 2, 256 * 1024, 2 * 1024 * 1024])
    const toErr = rnd(3) === 0
    const endless = rnd(8) === 0
    if (endless) {
      // never ends: the cap holds while the deadline tears it down
      return {
        kind: 'flood',
        timeoutS: 0.5,
        start: (s, o) => s.run(sh(`yes ${MARKER}-flood`), o),
        check: (r) =>
          isResult(r) &&
          r.value.truncated &&
          r.value.fault &&
          r.value.fault.type === 'timeout' &&
          r.value.stdout.length <= MAX_OUT
            ? null
            : describe(r),
      }
    }
    return {
      kind: 'flood',
      timeoutS: 60,
      start: (s, o) => s.run(sh(`yes ${MARKER}-flood | head -c ${bytes}${toErr ? ' >&2' : ''}`), o),
      check: (r) => {
        if (!isResult(r)) return describe(r)
        const v = r.value
        const stream = toErr ? v.stderr : v.stdout
        return v.truncated &&
          v.exitCode === 0 &&
          v.fault === null &&
          Buffer.byteLength(stream) <= MAX_OUT &&
          stream.includes(`${MARKER}-flood\n`)
          ? null
          : describe(r)
      },
    }
  },

  cancel() {
    const ac = new AbortController()
    const custom = rnd(3) === 0
    const reason = custom ? new Error('soak-cancel') : undefined
    const pre = rnd(10) === 0
    const afterMs = pre ? 0 : pick([1, 20, 60, 150, 300])
    return {
      kind: 'cancel',
      timeoutS: 60,
      start: (s, o) => {
        if (pre) ac.abort(reason)
        else setTimeout(() => ac.abort(reason), afterMs)
        return s.run(sh(rnd(2) ? `python3 -c 'import time; time.sleep(30)' ${MARKER} & sleep 30` : 'sleep 30'), {
          ...o,
          signal: ac.signal,
        })
      },
      check: (r) => {
        if (r.ok || r.hung) return describe(r)
        if (custom) return r.error === reason ? null : describe(r)
        return r.error && r.error.name === 'AbortError' ? null : describe(r)
      },
    }
  },
}

/** The mix: about 50% successes, the rest spread over the faults. */
const MIX = [
  ['ok', 50],
  ['timeout', 12],
  ['kill', 12],
  ['flood', 14],
  ['cancel', 12],
]
/** A kind drawn from `mix` ([kind, weight] pairs) in proportion to its weight. */
function weighted(mix) {
  let x = rnd(mix.reduce((a, [, w]) => a + w, 0))
  for (const [k, w] of mix) {
    if (x < w) return k
    x -= w
  }
  return mix[0][0]
}
const nextKind = () => weighted(MIX)

// ---------------------------------------------------------------------------------------------
// sessions

const counters = { stdoutBytes: 0, stderrBytes: 0, callbackThrows: 0, perCallChunks: 0 }

function sessionSpecs() {
  const wsA = path.join(SOAK_DIR, 'ws-a')
  const wsB = path.join(SOAK_DIR, 'ws-b')
  return [
    { name: 'temp', opts: {} },
    {
      name: 'temp+callbacks',
      opts: {
        onStdout: (c) => (counters.stdoutBytes += c.length),
        onStderr: (c) => (counters.stderrBytes += c.length),
      },
    },
    {
      name: 'dir+throwing-callbacks',
      opts: {
        workspace: wsA,
        trackFiles: false,
        onStdout: () => {
          counters.callbackThrows++
          throw new Error('soak: a throwing onStdout')
        },
        onStderr: async () => {
          throw new Error('soak: a rejecting onStderr')
        },
      },
    },
    { name: 'dir', opts: { workspace: wsB, memoryMb: null, pids: null } },
  ]
}

function perCallOptions(w) {
  const o = { timeoutS: w.timeoutS }
  // now and then a call brings its own callbacks, or switches the session's off
  const r = rnd(6)
  if (r === 0) o.onStdout = () => counters.perCallChunks++
  if (r === 1) o.onStdout = null
  if (r === 2) o.onStderr = () => counters.perCallChunks++
  return o
}

// ---------------------------------------------------------------------------------------------
// running calls

const tally = {}
const problems = []
let hungCalls = 0

async function runOne(session, w, phase) {
  const started = Date.now()
  const guardMs = (w.timeoutS + 60) * 1000
  let timer
  const guard = new Promise((resolve) => {
    timer = setTimeout(() => resolve({ hung: true }), guardMs)
  })
  const call = (async () => {
    try {
      return { ok: true, value: await w.start(session, perCallOptions(w)) }
    } catch (error) {
      return { ok: false, error }
    }
  })()
  const outcome = await Promise.race([call, guard])
  clearTimeout(timer)
  if (outcome.hung) hungCalls++
  const problem = w.check(outcome)
  const t = (tally[`${phase}:${w.kind}`] ??= { n: 0, bad: 0, ms: 0 })
  t.n++
  t.ms += Date.now() - started
  if (problem) {
    t.bad++
    problems.push(`${phase} ${w.kind}: ${problem}`)
  }
  if (args.verbose)
    console.log(`  ${phase} ${w.kind.padEnd(7)} ${problem ? 'BAD ' + problem : 'ok'} (${Date.now() - started} ms)`)
}

/** A call through a session that lives for just this call (temp workspace churn). */
async function oneShot(phase) {
  const w = WORKLOADS[pick(['ok', 'timeout', 'flood'])]()
  const started = Date.now()
  const t = (tally[`${phase}:one-shot`] ??= { n: 0, bad: 0, ms: 0 })
  t.n++
  let problem
  try {
    if (rnd(2)) {
      const r = await kern.runCode(`# ${MARKER}\nprint("one-shot")`, { timeoutS: 60, maxOutputBytes: MAX_OUT })
      problem = r.stdout === 'one-shot\n' && r.fault === null ? null : describe({ ok: true, value: r })
    } else {
      await withSandbox({ maxOutputBytes: MAX_OUT }, async (s) => {
        problem = w.check(
          await w.start(s, { timeoutS: w.timeoutS }).then(
            (value) => ({ ok: true, value }),
            (error) => ({ ok: false, error }),
          ),
        )
      })
    }
  } catch (e) {
    problem = `rejected: ${e.name}: ${e.message}`
  }
  t.ms += Date.now() - started
  if (problem) {
    t.bad++
    problems.push(`${phase} one-shot: ${problem}`)
  }
}

// ---------------------------------------------------------------------------------------------
// warm kernels: cells checked against the state the soak keeps for each kernel

const KERNELS_AT_ONCE = 3
const CELL_MIX = [
  ['plain', 50],
  ['value', 15],
  ['error', 8],
  ['burst', 8],
  ['interrupt', 6],
  ['preabort', 2],
  ['deaf', 1],
  ['timeout', 2],
  ['cap', 2],
  ['die', 2],
  ['reopen', 2],
  ['closeQueued', 2],
]
const nextCell = () => weighted(CELL_MIX)

const kstats = { opened: 0, closed: 0, cells: 0 }
const cellOut = (r) =>
  `exit ${r.exitCode} fault ${JSON.stringify(r.fault)} stdout ${JSON.stringify(String(r.stdout).slice(0, 80))} results ${JSON.stringify(r.results.map((x) => x.text))} error ${JSON.stringify(r.error)}`
const why = (e) => `${e && e.name}: ${e && e.message}`

/** A warm kernel and `acc`, the value its `acc` variable must hold. */
class SoakKernel {
  constructor(session) {
    this.session = session
    this.k = null
    this.acc = 0
  }

  async open() {
    this.k = await this.session.kernel({ timeoutS: 60 })
    kstats.opened++
    this.acc = 0
    const r = await this.k.runCode(`acc = 0  # ${MARKER}`)
    return r.exitCode === 0 ? null : `the first cell of a new kernel: ${cellOut(r)}`
  }

  /** After a cell that must end the kernel: dead, later cells refused, then a new one. */
  async replaced() {
    if (this.k.alive) return 'the kernel is still alive after a cell that must end it'
    const later = await this.k.runCode('1').then(
      () => 'a dead kernel ran a cell',
      (e) => (e.name === 'SandboxError' && /closed/.test(e.message) ? null : `a dead kernel's refusal: ${why(e)}`),
    )
    kstats.closed++
    return later || (await this.open())
  }

  cellOptions() {
    const o = {}
    const r = rnd(8)
    if (r === 0) o.onStdout = () => counters.perCallChunks++
    if (r === 1) o.timeoutS = 30
    return o
  }

  /** Runs one workload of `kind`; a problem string, or null when every outcome was right. */
  async run(kind) {
    const k = this.k
    const n = rnd(1_000_000)
    switch (kind) {
      case 'plain': {
        const want = this.acc + n
        this.acc = want
        const r = await k.runCode(`acc += ${n}\nprint("p", acc)`, this.cellOptions())
        return r.exitCode === 0 && r.fault === null && r.stdout === `p ${want}\n` && r.results.length === 0
          ? null
          : cellOut(r)
      }
      case 'value': {
        const r = await k.runCode(`acc * 2 + ${n}`, this.cellOptions())
        const v = r.results[0]
        return r.exitCode === 0 && r.results.length === 1 && v.isMainResult && v.text === String(this.acc * 2 + n)
          ? null
          : cellOut(r)
      }
      case 'error': {
        const r = await k.runCode(`def f():\n    raise ValueError("e${n}")\nf()`)
        const e = r.error
        return r.exitCode === 1 && r.fault === null && e && e.name === 'ValueError' && e.value === `e${n}` && k.alive
          ? null
          : cellOut(r)
      }
      case 'burst': {
        // queued without awaiting: they must run in call order
        const m = 2 + rnd(7)
        const wants = []
        const ps = []
        for (let i = 0; i < m; i++) {
          this.acc += i + 1
          wants.push(`${this.acc}\n`)
          ps.push(k.runCode(`acc += ${i + 1}\nprint(acc)`))
        }
        const rs = await Promise.allSettled(ps)
        kstats.cells += m - 1
        const bad = rs.findIndex(
          (x, i) => x.status !== 'fulfilled' || x.value.stdout !== wants[i] || x.value.exitCode !== 0,
        )
        return bad < 0
          ? null
          : `burst cell ${bad}/${m}: ${rs[bad].status === 'fulfilled' ? cellOut(rs[bad].value) : why(rs[bad].reason)}`
      }
      case 'interrupt': {
        // obeyed: KeyboardInterrupt ends the cell, the kernel and its state stay
        const ac = new AbortController()
        const custom = rnd(2) === 0
        const reason = custom ? new Error('soak-stop') : undefined
        const got = await k
          .runCode('import time\nprint("z", flush=True)\ntime.sleep(30)', {
            signal: ac.signal,
            onStdout: () => ac.abort(reason),
          })
          .then(
            (r) => `an aborted cell resolved: ${cellOut(r)}`,
            (e) => ((custom ? e === reason : e.name === 'AbortError') ? null : `rejected with ${why(e)}`),
          )
        return got || (k.alive ? null : 'the kernel died of an obeyed interrupt')
      }
      case 'preabort': {
        const ac = new AbortController()
        ac.abort()
        const got = await k.runCode(`acc += 1`, { signal: ac.signal }).then(
          (r) => `a pre-aborted cell ran: ${cellOut(r)}`,
          (e) => (e.name === 'AbortError' ? null : `rejected with ${why(e)}`),
        )
        return got || (k.alive ? null : 'a pre-aborted cell ended the kernel')
      }
      case 'deaf': {
        // ignored: the kernel is torn down after the grace
        const ac = new AbortController()
        const got = await k
          .runCode(
            'import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint("deaf", flush=True)\nwhile True:\n    time.sleep(0.05)',
            {
              signal: ac.signal,
              onStdout: () => ac.abort(),
            },
          )
          .then(
            (r) => `a deaf aborted cell resolved: ${cellOut(r)}`,
            (e) => (e.name === 'AbortError' ? null : `rejected with ${why(e)}`),
          )
        return got || (await this.replaced())
      }
      case 'timeout': {
        const r = await k.runCode('print("spin", flush=True)\nwhile True:\n    pass', { timeoutS: 0.3 })
        return r.fault && r.fault.type === 'timeout' && r.stdout === 'spin\n' ? await this.replaced() : cellOut(r)
      }
      case 'cap': {
        const r = await k.runCode(`print("c" * ${MAX_OUT + 1000 + rnd(50_000)})`)
        return r.fault && r.fault.type === 'killed' && /cap/.test(r.fault.message) ? await this.replaced() : cellOut(r)
      }
      case 'die': {
        const code = 3 + rnd(100)
        const r = await k.runCode(`import os\nos._exit(${code})`)
        return r.fault && r.fault.type === 'killed' && r.fault.message.includes(`exit code ${code}`)
          ? await this.replaced()
          : cellOut(r)
      }
      case 'reopen': {
        await k.close()
        kstats.closed++
        if (k.alive) return 'alive after close()'
        return this.open()
      }
      case 'closeQueued': {
        // close() with a cell running and two queued: all three reject, none hangs
        const ps = [
          k.runCode('import time\nprint("long", flush=True)\ntime.sleep(30)', { onStdout: () => k.close() }),
          k.runCode('acc'),
          k.runCode('acc'),
        ]
        const rs = await Promise.allSettled(ps)
        kstats.cells += 2
        const bad = rs.find((x) => x.status !== 'rejected' || x.reason.name !== 'SandboxError')
        kstats.closed++
        if (bad)
          return `close() with cells queued: ${bad.status === 'fulfilled' ? cellOut(bad.value) : why(bad.reason)}`
        return this.open()
      }
    }
    return `unknown cell kind ${kind}`
  }
}

/** Cells on KERNELS_AT_ONCE warm kernels at once, each kernel's cells in sequence. */
async function kernelPhase(session, cells, deadline, phase = 'kernel') {
  let left = cells
  const one = async (sk) => {
    const p = await sk.open()
    if (p) problems.push(`${phase} open: ${p}`)
    while (left > 0 && Date.now() < deadline) {
      left--
      kstats.cells++
      const kind = nextCell()
      const started = Date.now()
      let timer
      const guard = new Promise((resolve) => {
        timer = setTimeout(() => resolve({ hung: true }), 90_000)
      })
      const outcome = await Promise.race([
        sk.run(kind).then(
          (problem) => ({ problem }),
          (e) => ({ problem: `threw ${why(e)}` }),
        ),
        guard,
      ])
      clearTimeout(timer)
      if (outcome.hung) hungCalls++
      const problem = outcome.hung ? 'did not settle' : outcome.problem
      const t = (tally[`${phase}:${kind}`] ??= { n: 0, bad: 0, ms: 0 })
      t.n++
      t.ms += Date.now() - started
      if (problem) {
        t.bad++
        problems.push(`${phase} ${kind}: ${problem}`)
        // a kernel in an unknown state: start over on a fresh one
        await sk.k.close()
        kstats.closed++
        const again = await sk.open()
        if (again) problems.push(`${phase} reopen: ${again}`)
      }
      if (args.verbose)
        console.log(`  ${phase} ${kind.padEnd(11)} ${problem ? 'BAD ' + problem : 'ok'} (${Date.now() - started} ms)`)
    }
    await sk.k.close()
    kstats.closed++
  }
  await Promise.all(Array.from({ length: KERNELS_AT_ONCE }, () => one(new SoakKernel(session))))
  return cells - left
}

// ---------------------------------------------------------------------------------------------
// main

function fmtKb(kb) {
  return `${(kb / 1024).toFixed(1)} MiB`
}

async function warmUp() {
  // Every kind once, sequentially (a flood streamed to a callback among them), then concurrent
  // bursts: the thread pools and allocator arenas exist before the baseline. No concurrent
  // floods: memory glibc keeps after those is what the rss check is there to see.
  const s = await new Sandbox({ maxOutputBytes: MAX_OUT }).open()
  for (const k of ['ok', 'ok', 'timeout', 'kill', 'flood', 'cancel']) await runOne(s, WORKLOADS[k](), 'warm-up')
  await s.run(sh('echo warm; echo warm >&2'), { onStdout: () => {}, onStderr: () => {} })
  const light = ['ok', 'timeout', 'kill', 'cancel']
  await Promise.all(Array.from({ length: 24 }, (_, i) => runOne(s, WORKLOADS[light[i % light.length]](), 'warm-up')))
  // and one as wide as the concurrent phase, of light calls: the blocking pool grows to about
  // this many threads, each with its own malloc arena (kept by glibc for the process's life)
  await Promise.all(Array.from({ length: args.conc }, () => s.run(sh('echo warm'), { timeoutS: 120 })))
  await s.writeFile('w.txt', 'warm')
  await s.readFile('w.txt')
  await s.listFiles()
  await s.close()
  await oneShot('warm-up')
  await oneShot('warm-up')
  // every kind of kernel cell, so the kernel machinery's lazily created state exists too
  const ks = await new Sandbox({ maxOutputBytes: MAX_OUT }).open()
  for (const [kind] of CELL_MIX) {
    const sk = new SoakKernel(ks)
    await sk.open()
    const p = await sk.run(kind).catch((e) => `threw ${why(e)}`)
    if (p) problems.push(`warm-up kernel ${kind}: ${p}`)
    await sk.k.close()
  }
  await kernelPhase(ks, 60, Date.now() + 60_000, 'warm-up')
  // V8's young generation and the allocator grow with the rate of cells and settle after a few
  // thousand (measured: +11 MiB, flat from ~6,000 cells on); the baseline comes after that.
  const warm = await ks.kernel()
  for (let i = 0; i < Math.min(args.cells, 6000); i++) await warm.runCode(`w = ${i}\nprint(w)`)
  await warm.close()
  await ks.close()
}

async function main() {
  const t0 = Date.now()
  const deadline = t0 + args.minutes * 60_000
  console.log(`kern-sandbox soak: ${KERN_KIND} (${KERN}), pid ${process.pid}, marker ${MARKER}`)
  console.log(
    `plan: ${args.seq} sequential + ${args.conc} concurrent calls + ${args.cells} kernel cell workloads, cap ${args.minutes} min, node ${process.version}, ${os.cpus().length} CPUs`,
  )

  // warm-up, then the baseline
  await warmUp()
  const warmProblems = problems.splice(0)
  for (const k of Object.keys(tally)) if (k.startsWith('warm-up:')) delete tally[k]
  await sleep(500)
  const before = await snapshotFigures()
  const rssHwm0 = statusKb('VmHWM')
  console.log(
    `baseline after warm-up: ${before.fds.length} fds, RSS ${fmtKb(before.rssKb)}, ${before.threads} threads, ${before.strays.length} strays, ${before.tmpdirs.length} session dirs, ${before.boxes.all.length} boxes in kern ps`,
  )
  if (warmProblems.length)
    console.log(`warm-up had ${warmProblems.length} unexpected outcome(s):\n  ${warmProblems.join('\n  ')}`)

  const sessions = []
  for (const spec of sessionSpecs()) {
    const s = await new Sandbox({ maxOutputBytes: MAX_OUT, ...spec.opts }).open()
    sessions.push({ name: spec.name, s })
  }

  // sequential
  let seqDone = 0
  const tSeq = Date.now()
  for (let i = 0; i < args.seq; i++) {
    if (Date.now() > deadline) break
    if (i % 50 === 25) await oneShot('seq')
    else await runOne(sessions[i % sessions.length].s, WORKLOADS[nextKind()](), 'seq')
    seqDone++
    if (!args.verbose && seqDone % 100 === 0)
      console.log(`  sequential: ${seqDone}/${args.seq} (${((Date.now() - tSeq) / 1000).toFixed(0)} s)`)
  }
  const seqMs = Date.now() - tSeq

  // concurrent: all launched at once, spread over the sessions (and a few one-shot sessions)
  let concDone = 0
  const tConc = Date.now()
  if (Date.now() <= deadline && args.conc > 0) {
    const calls = []
    for (let i = 0; i < args.conc; i++) {
      if (i % 40 === 39) calls.push(oneShot('conc'))
      else calls.push(runOne(sessions[i % sessions.length].s, WORKLOADS[nextKind()](), 'conc'))
    }
    await Promise.all(calls)
    concDone = args.conc
  }
  const concMs = Date.now() - tConc

  // warm kernels
  const tCells = Date.now()
  const kernelSession = await new Sandbox({ maxOutputBytes: MAX_OUT }).open()
  const kstart = { ...kstats }
  const cellsDone =
    args.cells > 0 && Date.now() <= deadline ? await kernelPhase(kernelSession, args.cells, deadline) : 0
  await kernelSession.close()
  const cellsMs = Date.now() - tCells

  // a session closed while calls are still running (close() must stop them)
  const closer = await new Sandbox({ maxOutputBytes: MAX_OUT }).open()
  const running = Array.from({ length: 6 }, () =>
    closer.run(sh(`python3 -c 'import time; time.sleep(30)' ${MARKER} & sleep 30`), { timeoutS: 60 }).then(
      (r) => r,
      (e) => e,
    ),
  )
  await sleep(400)
  await closer.close()
  const closed = await Promise.race([Promise.all(running), sleep(30_000).then(() => null)])
  const t = (tally['close-while-running'] = { n: 6, bad: 0, ms: 0 })
  if (!closed) {
    t.bad = 6
    hungCalls += 6
    problems.push('close-while-running: calls did not settle within 30 s of close()')
  }

  for (const { s } of sessions) await s.close()

  // let teardown settle: strays and session dirs get a few seconds to go
  const settleEnd = Date.now() + 15_000
  while (Date.now() < settleEnd && (strays().length || sessionDirs().length)) await sleep(200)
  await sleep(500)
  const after = await snapshotFigures()
  const rssHwm = statusKb('VmHWM')
  const totalMs = Date.now() - t0

  // ---- report
  console.log('')
  console.log(
    `calls: ${seqDone}/${args.seq} sequential in ${(seqMs / 1000).toFixed(1)} s, ${concDone}/${args.conc} concurrent in ${(concMs / 1000).toFixed(1)} s; total ${(totalMs / 1000).toFixed(1)} s`,
  )
  console.log(
    `kernel cells: ${cellsDone}/${args.cells} workloads (${kstats.cells - kstart.cells} cells) on ${KERNELS_AT_ONCE} kernels at once in ${(cellsMs / 1000).toFixed(1)} s; ${kstats.opened - kstart.opened} kernels opened, ${kstats.closed - kstart.closed} closed or torn down`,
  )
  if (seqDone < args.seq || concDone < args.conc || cellsDone < args.cells)
    console.log(`WARNING: the ${args.minutes} min cap stopped the run early`)
  const rows = Object.entries(tally).sort(([a], [b]) => a.localeCompare(b))
  for (const [k, v] of rows)
    console.log(
      `  ${k.padEnd(22)} ${String(v.n).padStart(5)} calls, ${String(v.bad).padStart(3)} unexpected, mean ${(v.ms / Math.max(1, v.n)).toFixed(0)} ms`,
    )
  console.log(
    `  callbacks: ${counters.stdoutBytes} stdout bytes and ${counters.stderrBytes} stderr bytes streamed, ${counters.callbackThrows} throwing-callback calls, ${counters.perCallChunks} per-call chunks`,
  )

  const fdSetBefore = new Set(before.fds)
  const fdSetAfter = new Set(after.fds)
  const fdsNew = after.fds.filter((f) => !fdSetBefore.has(f))
  const fdsGone = before.fds.filter((f) => !fdSetAfter.has(f))
  const rssRatio = after.rssKb / before.rssKb
  const rssAllowedKb = Math.max(before.rssKb * 0.1, RSS_FLOOR_KB)
  const checks = [
    {
      name: 'fds',
      pass: after.fds.length <= before.fds.length,
      figure:
        `${before.fds.length} -> ${after.fds.length}` +
        (fdsNew.length ? ` (new: ${fdsNew.join(', ')})` : '') +
        (fdsGone.length ? ` (gone: ${fdsGone.join(', ')})` : ''),
    },
    {
      name: 'processes',
      pass: after.strays.length === 0,
      figure:
        `${after.strays.length} stray (children or marked)` +
        after.strays
          .slice(0, 10)
          .map((p) => `\n      ${p.pid} ppid ${p.ppid} ${p.state} ${p.cmd.slice(0, 120)}`)
          .join(''),
    },
    {
      name: 'tmpdirs',
      pass: after.tmpdirs.length === 0,
      figure:
        `${after.tmpdirs.length} kern-sbx-${process.pid}-* left` +
        (after.tmpdirs.length ? `: ${after.tmpdirs.slice(0, 10).join(', ')}` : ''),
    },
    {
      name: 'boxes',
      pass: !after.boxes.error && after.boxes.ours.length === 0,
      figure: after.boxes.error
        ? `kern ps failed: ${after.boxes.error}`
        : `${after.boxes.ours.length} soak boxes left (${after.boxes.all.length} boxes in kern ps in all, ${before.boxes.all.length} at baseline)` +
          after.boxes.ours
            .slice(0, 5)
            .map((b) => `\n      ${b.name} pid ${b.pid} ${String(b.command).slice(0, 100)}`)
            .join(''),
    },
    {
      name: 'rss',
      pass: after.rssKb - before.rssKb <= rssAllowedKb,
      figure:
        `${fmtKb(before.rssKb)} -> ${fmtKb(after.rssKb)} (${((rssRatio - 1) * 100).toFixed(1)}%, limit +${fmtKb(rssAllowedKb)}; peak ${fmtKb(Math.max(rssHwm, rssHwm0))}; ` +
        `JS heap ${fmtKb(before.mem.heapTotal / 1024)} -> ${fmtKb(after.mem.heapTotal / 1024)}, external ${fmtKb(before.mem.external / 1024)} -> ${fmtKb(after.mem.external / 1024)}, ` +
        `threads ${before.threads} -> ${after.threads})`,
    },
    {
      name: 'calls',
      pass: problems.length === 0 && hungCalls === 0,
      figure:
        `${problems.length} unexpected outcome(s), ${hungCalls} did not settle` +
        problems
          .slice(0, 15)
          .map((p) => `\n      ${p.slice(0, 400)}`)
          .join('') +
        (problems.length > 15 ? `\n      ... ${problems.length - 15} more` : ''),
    },
  ]
  console.log('')
  for (const c of checks) console.log(`${c.pass ? 'PASS' : 'FAIL'}  ${c.name.padEnd(10)} ${c.figure}`)
  const failed = checks.filter((c) => !c.pass)
  console.log(failed.length ? `\nsoak FAILED: ${failed.map((c) => c.name).join(', ')}` : '\nsoak passed')

  if (args.out) {
    fs.writeFileSync(
      args.out,
      JSON.stringify(
        {
          kern: KERN_KIND,
          kernBin: KERN,
          plan: { seq: args.seq, conc: args.conc, cells: args.cells, minutes: args.minutes },
          done: { seq: seqDone, conc: concDone, cells: cellsDone },
          kernels: {
            opened: kstats.opened - kstart.opened,
            closed: kstats.closed - kstart.closed,
            cells: kstats.cells - kstart.cells,
          },
          ms: { seq: seqMs, conc: concMs, cells: cellsMs, total: totalMs },
          tally,
          counters,
          figures: {
            fds: { before: before.fds.length, after: after.fds.length, new: fdsNew, gone: fdsGone },
            rssKb: { before: before.rssKb, after: after.rssKb, peak: Math.max(rssHwm, rssHwm0) },
            memoryUsage: { before: before.mem, after: after.mem },
            strays: after.strays,
            tmpdirs: after.tmpdirs,
            boxes: {
              ours: after.boxes.ours,
              all: after.boxes.all.length,
              baseline: before.boxes.all.length,
              error: after.boxes.error || null,
            },
          },
          checks: checks.map(({ name, pass, figure }) => ({ name, pass, figure })),
          problems,
        },
        null,
        2,
      ),
    )
  }
  fs.rmSync(SOAK_DIR, { recursive: true, force: true })
  return failed.length ? 1 : 0
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error('soak crashed:', e)
    try {
      fs.rmSync(SOAK_DIR, { recursive: true, force: true })
    } catch {
      /* best effort */
    }
    process.exit(2)
  },
)
