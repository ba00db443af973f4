'use strict'
// The shared runner: where the implementations live, one fresh worker process per measurement,
// rounds that take turns (the order alternating from round to round), pooled medians. Families
// (benchmark/families/*.js) build their rows on it; run.js sets it up with init().

const fs = require('fs')
const os = require('os')
const path = require('path')
const { spawn, spawnSync } = require('child_process')
const fx = require('./fixtures')
const { median, max, min, sum, fmt, short, errs, line } = require('./table')

const ROOT = path.resolve(__dirname, '..', '..')
const WORKER = path.join(__dirname, '..', 'worker.js')
const RESULT_TAG = '@@RESULT '
const TRUE_BIN = '/bin/true'

/** A reference package: `shared/reference/<name>` beside the package root, or beside one of its
 * parents (a git worktree under a folder of worktrees), else where it would be beside the root. */
function reference(name) {
  const at = (up) => path.resolve(ROOT, ...Array(up).fill('..'), 'shared', 'reference', name)
  for (let up = 1; up <= 3; up++) if (fs.existsSync(path.join(at(up), 'package.json'))) return at(up)
  return at(1)
}

const IMPLS = {
  ours: ROOT,
  ref: process.env.KERN_BENCH_REFERENCE || reference('kern-sandbox-0.1.1'),
  // Today's upstream: rich results and the warm kernel are measured against it.
  ref23: process.env.KERN_BENCH_REFERENCE_023 || reference('kern-sandbox-0.1.23'),
}

/** What every family reads while it runs: set once by init(). */
const ctx = {
  args: null,
  /** --quick */
  Q: false,
  ROUNDS: 5,
  /** KERN_BIN when it is a kern (not true/false) and --no-real is not given, else null. */
  REAL_KERN: null,
  /** The run's own directory: fixtures, workspaces, both implementations' TMPDIR. */
  TMP: null,
  /** Paths and figures the families' setup() hooks leave for their rows. */
  fixtures: {},
}

function init(args) {
  ctx.args = args
  ctx.Q = args.quick
  ctx.ROUNDS = args.rounds || (args.quick ? 2 : 5)
  ctx.REAL_KERN =
    args.real && process.env.KERN_BIN && !/\/(true|false)$/.test(process.env.KERN_BIN) ? process.env.KERN_BIN : null
  fs.mkdirSync(fixtureBase(), { recursive: true })
  ctx.TMP = fs.mkdtempSync(path.join(fixtureBase(), 'kern-bench-'))
  return ctx
}

/** Where fixtures, workspaces and both implementations' temp files live: the temp dir users get
 * (TMPDIR, else /tmp) unless --dir says otherwise. `--dir /dev/shm` takes the disk out of the
 * figures. (On this project's dev machines / is ext4 without a journal: there, creating files
 * within minutes of deleting thousands scans every recently deleted inode, and the per-call and
 * restore timings of both implementations swing by 2-3x.) */
function fixtureBase() {
  return ctx.args.dir || os.tmpdir()
}

function log(msg) {
  process.stderr.write(msg + '\n')
}

function sync() {
  spawnSync('sync', { stdio: 'ignore' })
}

function baseEnv(kernBin, extra = {}) {
  // TMPDIR: both implementations put their private files and temp workspaces there.
  const env = { ...process.env, KERN_SANDBOX_SNAPSHOT: '1', TMPDIR: ctx.TMP, ...extra }
  delete env.KERN_BIN
  if (kernBin) env.KERN_BIN = kernBin
  return env
}

/** --rt: every worker (and what it starts) runs SCHED_FIFO, ahead of ordinary processes, so other
 * load on a shared machine barely touches the figures (the kernel still leaves 5% to others). */
let RT = null
function rtPrefix() {
  if (RT !== null) return RT
  RT = []
  if (ctx.args.rt) {
    const r = spawnSync('chrt', ['-f', '10', 'true'], { stdio: 'ignore' })
    if (r.status === 0) RT = ['chrt', '-f', '10']
    else log('--rt: `chrt -f 10` is not permitted here (needs root or CAP_SYS_NICE); running at normal priority')
  }
  return RT
}

/** Runs one worker; resolves to its JSON result (or { error }). Never rejects. */
function worker(spec, env, timeoutMs = 300000) {
  return new Promise((resolve) => {
    const [cmd, ...pre] = [...rtPrefix(), process.execPath]
    const child = spawn(cmd, [...pre, WORKER, JSON.stringify(spec)], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stdout.on('data', (c) => (out += c))
    child.stderr.on('data', (c) => (err += c))
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      const line = out
        .split('\n')
        .reverse()
        .find((l) => l.startsWith(RESULT_TAG))
      if (line) {
        try {
          return resolve(JSON.parse(line.slice(RESULT_TAG.length)))
        } catch {}
      }
      resolve({ error: `worker exited ${signal || code} without a result: ${(err || out).trim().slice(-800)}` })
    })
  })
}

/** Alternates the order of `impls` round by round. */
function order(impls, round) {
  const k = round % impls.length
  return impls.slice(k).concat(impls.slice(0, k))
}

/** Pools per-call samples over the rounds. */
async function callRows(id, { kern, n, warmup, sandbox = {}, stalls = false, impls = ['ours', 'ref'], extra = {} }) {
  const acc = Object.fromEntries(
    impls.map((i) => [
      i,
      { samples: [], floorSamples: [], roundMedians: [], cpuPerCall: [], failed: 0, errors: [], stalls: [], files: 0 },
    ]),
  )
  for (let r = 0; r < ctx.ROUNDS; r++) {
    for (const impl of order(impls, r)) {
      const res = await worker(
        { mode: 'calls', impl, module: IMPLS[impl], n, warmup, sandbox, stalls, ...extra[impl] },
        baseEnv(kern),
      )
      const a = acc[impl]
      if (res.error) {
        a.errors.push(res.error)
        continue
      }
      a.samples.push(...res.samples)
      if (res.floorSamples) a.floorSamples.push(...res.floorSamples)
      a.cpuPerCall.push(res.cpuMsPerCall)
      a.roundMedians.push(median(res.samples))
      a.failed += res.failed
      a.files += res.files
      if (res.lastError) a.errors.push(res.lastError)
      if (res.stalls) a.stalls.push(res.stalls)
    }
    log(
      `  ${id} round ${r + 1}/${ctx.ROUNDS}: ` +
        impls
          .map((i) => {
            const f = acc[i].floorSamples
            const floor = f.length ? ` (floor ${fmt(median(f.slice(-n)))})` : ''
            return `${i} ${fmt(acc[i].roundMedians.at(-1))} ms${floor}`
          })
          .join(', '),
    )
  }
  for (const i of impls) {
    const a = acc[i]
    a.median = median(a.samples)
    // The spawn floor that took turns with this implementation's calls (measure/calls.js).
    a.floorMedian = a.floorSamples.length ? median(a.floorSamples) : null
    delete a.floorSamples
    a.p90 = a.samples.length ? a.samples.slice().sort((x, y) => x - y)[Math.floor(a.samples.length * 0.9)] : null
    a.calls = a.samples.length
    a.cpuMsPerCall = median(a.cpuPerCall)
    a.errors = [...new Set(a.errors)].slice(0, 3)
    if (a.stalls.length) {
      a.stallMaxMs = max(a.stalls.map((s) => s.intervalMaxMs))
      a.ownStallMaxMs = a.stalls.every((s) => s.ownMaxMs != null) ? max(a.stalls.map((s) => s.ownMaxMs)) : null
      a.eldMaxMs = max(a.stalls.map((s) => s.eldMaxMs))
    }
    delete a.samples
  }
  return acc
}

/** Two kinds of call in turns on one session of ours (measure/calls.js `paired`), one worker per
 * round: each kind's pooled median, and the median of the pairs' differences (a - b), which a
 * host that drifts between rounds or calls moves far less than either median. */
async function pairedRows(id, { kern, n, warmup, sandbox = {}, a, b }) {
  const acc = { a: [], b: [], diffs: [], failed: 0, errors: [] }
  for (let r = 0; r < ctx.ROUNDS; r++) {
    const res = await worker({ mode: 'paired', module: IMPLS.ours, n, warmup, sandbox, a, b }, baseEnv(kern))
    if (res.error) {
      acc.errors.push(res.error)
      continue
    }
    const diffs = res.a.map((x, i) => x - res.b[i])
    acc.a.push(...res.a)
    acc.b.push(...res.b)
    acc.diffs.push(...diffs)
    acc.failed += res.failed
    if (res.lastError) acc.errors.push(res.lastError)
    log(
      `  ${id} round ${r + 1}/${ctx.ROUNDS}: a ${fmt(median(res.a))} ms, b ${fmt(median(res.b))} ms, a - b ${fmt(median(diffs))} ms`,
    )
  }
  return {
    a: { median: median(acc.a), calls: acc.a.length },
    b: { median: median(acc.b), calls: acc.b.length },
    diffMedian: median(acc.diffs),
    failed: acc.failed,
    errors: [...new Set(acc.errors)].slice(0, 3),
  }
}

/** One result per worker (a snapshot, a flood...), several rounds taking turns. */
async function oneShotRows(id, mode, { kern, specFor, impls = ['ours', 'ref'], after }) {
  const acc = Object.fromEntries(impls.map((i) => [i, { runs: [], errors: [] }]))
  for (let r = 0; r < ctx.ROUNDS; r++) {
    for (const impl of order(impls, r)) {
      const res = await worker({ mode, impl, module: IMPLS[impl], ...specFor(impl, r) }, baseEnv(kern))
      if (res.error) acc[impl].errors.push(res.error)
      else acc[impl].runs.push(res)
      if (after) after(impl, r)
    }
    const last = (i) => acc[i].runs.at(-1)
    const show = (i) =>
      !last(i)
        ? 'error'
        : last(i).reps
          ? `${fmt(median(last(i).reps.map((x) => x.callsPerS)))} calls/s`
          : `${fmt(last(i).ms)} ms`
    log(`  ${id} round ${r + 1}/${ctx.ROUNDS}: ` + impls.map((i) => `${i} ${show(i)}`).join(', '))
  }
  for (const i of impls) acc[i].errors = [...new Set(acc[i].errors)].slice(0, 3)
  return acc
}

/** `width` concurrent calls on one session, ours and the reference taking turns. */
async function parallelRow(id, kern, reps, title, sandbox = {}, target = 3) {
  const a = await oneShotRows(id, 'parallel', { kern, specFor: () => ({ width: 64, reps, warmup: 1, sandbox }) })
  const flat = (i) => a[i].runs.flatMap((r) => r.reps)
  const s = {}
  for (const i of ['ours', 'ref']) {
    const reps = flat(i)
    s[i] = {
      callsPerS: median(reps.map((x) => x.callsPerS)),
      ok: sum(reps.map((x) => x.ok)),
      total: reps.length * 64,
      minOk: min(reps.map((x) => x.ok)),
      firstFailure: (reps.find((x) => x.firstFailure) || {}).firstFailure || null,
    }
  }
  const allOk = s.ours.total > 0 && s.ours.ok === s.ours.total
  return {
    data: a,
    summary: s,
    lines: [
      line(
        title,
        'calls/s (median)',
        s.ours.callsPerS,
        s.ref.callsPerS,
        'higher',
        target,
        target ? `>= ${target}x` : 'report',
        errs(a),
      ),
      line(
        '',
        'succeeded',
        `${s.ours.ok}/${s.ours.total}`,
        `${s.ref.ok}/${s.ref.total}`,
        'none',
        null,
        'ours all',
        null,
        allOk,
      ),
      s.ref.firstFailure || s.ours.firstFailure
        ? {
            row: '',
            metric: 'first failure',
            ours: short(s.ours.firstFailure),
            ref: short(s.ref.firstFailure),
            ratio: '',
            target: '',
            result: '',
          }
        : null,
    ].filter(Boolean),
  }
}

/** The exact argv our binding builds for `run(["true"])` in the real-kern workspace, learnt once
 * through a recording fake kern: { kern, argv, envBody, privateDir } for spawning a bare box. */
let bareTpl = null
async function bareTemplate() {
  if (bareTpl) return bareTpl
  const rec = fx.argvRecorderKern(ctx.TMP)
  const r = await worker(
    { mode: 'argv', impl: 'ours', module: IMPLS.ours, workspace: ctx.fixtures.realWs },
    baseEnv(rec.bin),
  )
  if (r.error || !fs.existsSync(rec.out)) throw new Error(`could not record our argv: ${r.error || 'nothing recorded'}`)
  const argv = fs.readFileSync(rec.out, 'utf8').split('\0').slice(0, -1)
  const envBody = fs.existsSync(rec.out + '.env') ? fs.readFileSync(rec.out + '.env', 'utf8') : ''
  const privateDir = path.join(ctx.TMP, 'bare-private')
  fs.mkdirSync(privateDir, { recursive: true, mode: 0o700 })
  bareTpl = { kern: ctx.REAL_KERN, argv, envBody, privateDir }
  return bareTpl
}

module.exports = {
  ROOT,
  IMPLS,
  TRUE_BIN,
  RESULT_TAG,
  ctx,
  init,
  log,
  sync,
  baseEnv,
  rtPrefix,
  worker,
  order,
  callRows,
  pairedRows,
  oneShotRows,
  parallelRow,
  bareTemplate,
}
