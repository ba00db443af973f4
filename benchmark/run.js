#!/usr/bin/env node
'use strict'
// kern-sandbox benchmark: every row measured on our addon and on the pure-JS reference
// (kern-sandbox 0.1.1) in one run, alternating which goes first, several rounds, medians.
// A benchmark, not a test: it prints a table, writes JSON, and exits 0 whatever the numbers.
//
//   npm run bench                  # default: 5 rounds (a few minutes)
//   npm run bench -- --quick       # 2 rounds, fewer iterations (about a minute)
//   KERN_BIN=/path/to/kern npm run bench   # adds the real-kern rows
//
// Options: --quick, --rounds N, --only row1,row2, --out FILE, --no-real, --keep (fixtures),
// --dir DIR (fixtures, workspaces and TMPDIR of both implementations; default the temp dir),
// --rt (run the measurements under SCHED_FIFO via chrt, to shield them from other load; root),
// --list (row ids). See benchmark/README.md.

const fs = require('fs')
const os = require('os')
const path = require('path')
const { spawn, spawnSync } = require('child_process')
const fx = require('./fixtures')

const ROOT = path.resolve(__dirname, '..')
const WORKER = path.join(__dirname, 'worker.js')
const RESULT_TAG = '@@RESULT '
const MiB = 1024 * 1024

const IMPLS = {
  ours: ROOT,
  ref: process.env.KERN_BENCH_REFERENCE || path.resolve(ROOT, '..', 'shared', 'reference', 'kern-sandbox-0.1.1'),
  // Today's upstream: rich results and the warm kernel are measured against it.
  ref23: process.env.KERN_BENCH_REFERENCE_023 || path.resolve(ROOT, '..', 'shared', 'reference', 'kern-sandbox-0.1.23'),
}

// ---------------------------------------------------------------------------------------------
// arguments

function parseArgs(argv) {
  const a = {
    quick: false,
    rounds: null,
    only: null,
    out: path.join(__dirname, 'results.json'),
    real: true,
    keep: false,
    list: false,
    dir: null,
    rt: false,
  }
  for (let i = 0; i < argv.length; i++) {
    const v = argv[i]
    if (v === '--quick') a.quick = true
    else if (v === '--rounds') a.rounds = Math.max(1, parseInt(argv[++i], 10) || 1)
    else if (v === '--only') a.only = new Set(String(argv[++i]).split(','))
    else if (v === '--out') a.out = path.resolve(argv[++i])
    else if (v === '--no-real') a.real = false
    else if (v === '--keep') a.keep = true
    else if (v === '--list') a.list = true
    else if (v === '--dir') a.dir = path.resolve(argv[++i])
    else if (v === '--rt') a.rt = true
    else if (v === '--help' || v === '-h') {
      console.log(
        fs
          .readFileSync(__filename, 'utf8')
          .split('\n')
          .slice(2, 15)
          .map((l) => l.replace(/^\/\/ ?/, ''))
          .join('\n'),
      )
      process.exit(0)
    } else {
      console.error(`unknown option ${v} (try --help)`)
      process.exit(2)
    }
  }
  return a
}

const args = parseArgs(process.argv.slice(2))
const Q = args.quick
const ROUNDS = args.rounds || (Q ? 2 : 5)
const REAL_KERN =
  args.real && process.env.KERN_BIN && !/\/(true|false)$/.test(process.env.KERN_BIN) ? process.env.KERN_BIN : null

// ---------------------------------------------------------------------------------------------
// small helpers

function median(xs) {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b)
  if (!v.length) return null
  const m = v.length >> 1
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2
}
const max = (xs) => (xs.length ? Math.max(...xs) : null)
const min = (xs) => (xs.length ? Math.min(...xs) : null)
const sum = (xs) => xs.reduce((a, b) => a + b, 0)

function baseEnv(kernBin, extra = {}) {
  // TMPDIR: both implementations put their private files and temp workspaces there.
  const env = { ...process.env, KERN_SANDBOX_SNAPSHOT: '1', TMPDIR: TMP, ...extra }
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
  if (args.rt) {
    const r = spawnSync('chrt', ['-f', '10', 'true'], { stdio: 'ignore' })
    if (r.status === 0) RT = ['chrt', '-f', '10']
    else log('--rt: `chrt -f 10` is not permitted here (needs root or CAP_SYS_NICE); running at normal priority')
  }
  return RT
}

/** [cmd, args] for spawnSync, under chrt with --rt. */
function rtArgv(cmd, argv) {
  const pre = rtPrefix()
  return pre.length ? [pre[0], [...pre.slice(1), cmd, ...argv]] : [cmd, argv]
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

function log(msg) {
  process.stderr.write(msg + '\n')
}

function sync() {
  spawnSync('sync', { stdio: 'ignore' })
}

// ---------------------------------------------------------------------------------------------
// fixtures

/** Where fixtures, workspaces and both implementations' temp files live: the temp dir users get
 * (TMPDIR, else /tmp) unless --dir says otherwise. `--dir /dev/shm` takes the disk out of the
 * figures. (On this project's dev machines / is ext4 without a journal: there, creating files
 * within minutes of deleting thousands scans every recently deleted inode, and the per-call and
 * restore timings of both implementations swing by 2-3x.) */
function fixtureBase() {
  return args.dir || os.tmpdir()
}
fs.mkdirSync(fixtureBase(), { recursive: true })
const TMP = fs.mkdtempSync(path.join(fixtureBase(), 'kern-bench-'))
const fixtures = {}

function setupFixtures(rows) {
  const need = (id) => rows.some((r) => r.id === id)
  const t = Date.now()
  if (need('noop')) fixtures.spawnFloor = fx.spawnFloor(TMP)
  fixtures.emptyWs = path.join(TMP, 'ws-empty')
  fs.mkdirSync(fixtures.emptyWs)
  if (need('ws10k')) fixtures.ws10k = fx.manyFiles(path.join(TMP, 'ws-10k'), 10000)
  if (need('snapshot') || need('restore')) {
    fixtures.snapWs = fx.snapshotData(path.join(TMP, 'ws-snapshot'))
    fixtures.snapDu = fx.du(fixtures.snapWs)
  }
  if (need('flood')) fixtures.floodKern = fx.floodKern(TMP, 256 * MiB)
  if (need('stream') || need('streamslow')) fixtures.chunkKern = fx.chunkKern(TMP, 100000)
  if (REAL_KERN) fixtures.realWs = path.join(TMP, 'ws-real')
  if (REAL_KERN) fs.mkdirSync(fixtures.realWs)
  sync()
  log(`fixtures ready in ${((Date.now() - t) / 1000).toFixed(1)} s under ${TMP}`)
}

// ---------------------------------------------------------------------------------------------
// rows: each measures ours and the reference (and the bare command) and returns lines

const TRUE_BIN = '/bin/true'

/** Pools per-call samples over the rounds. */
async function callRows(id, { kern, n, warmup, sandbox = {}, stalls = false, impls = ['ours', 'ref'], extra = {} }) {
  const acc = Object.fromEntries(
    impls.map((i) => [
      i,
      { samples: [], roundMedians: [], cpuPerCall: [], failed: 0, errors: [], stalls: [], files: 0 },
    ]),
  )
  for (let r = 0; r < ROUNDS; r++) {
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
      a.cpuPerCall.push(res.cpuMsPerCall)
      a.roundMedians.push(median(res.samples))
      a.failed += res.failed
      a.files += res.files
      if (res.lastError) a.errors.push(res.lastError)
      if (res.stalls) a.stalls.push(res.stalls)
    }
    log(
      `  ${id} round ${r + 1}/${ROUNDS}: ` + impls.map((i) => `${i} ${fmt(acc[i].roundMedians.at(-1))} ms`).join(', '),
    )
  }
  for (const i of impls) {
    const a = acc[i]
    a.median = median(a.samples)
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

async function oneShotRows(id, mode, { kern, specFor, impls = ['ours', 'ref'], after }) {
  const acc = Object.fromEntries(impls.map((i) => [i, { runs: [], errors: [] }]))
  for (let r = 0; r < ROUNDS; r++) {
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
    log(`  ${id} round ${r + 1}/${ROUNDS}: ` + impls.map((i) => `${i} ${show(i)}`).join(', '))
  }
  for (const i of impls) acc[i].errors = [...new Set(acc[i].errors)].slice(0, 3)
  return acc
}

const ROWS = [
  {
    id: 'noop',
    title: 'per call, do-nothing kern (/bin/true)',
    async run() {
      const n = Q ? 60 : 200
      const a = await callRows('noop', { kern: TRUE_BIN, n, warmup: Q ? 10 : 20 })
      // The floor: the same /bin/true started and reaped from C, no binding at all.
      let floor = null
      if (fixtures.spawnFloor) {
        const samples = []
        for (let r = 0; r < ROUNDS; r++) {
          const res = spawnSync(...rtArgv(fixtures.spawnFloor, [TRUE_BIN, String(n)]), { encoding: 'utf8' })
          if (res.status === 0) samples.push(...res.stdout.trim().split('\n').map(Number))
        }
        floor = median(samples)
      }
      const over = (v) => (v != null && floor != null ? v - floor : null)
      return {
        data: { ...a, floorMs: floor },
        lines: [
          line('per call, do-nothing kern', 'median ms', a.ours.median, a.ref.median, 'lower', 0.2, '<= 0.2x', errs(a)),
          line('', 'p90 ms', a.ours.p90, a.ref.p90, 'lower', null, ''),
          line('', 'node CPU ms per call', a.ours.cpuMsPerCall, a.ref.cpuMsPerCall, 'lower', null, '(all threads)'),
          // Under load the C loop waits for a CPU too and the floor means little: shown only when
          // it is below both medians.
          floor != null && over(a.ours.median) > 0 && over(a.ref.median) > 0
            ? line(
                '',
                `over the floor (${fmt(floor)} ms)`,
                over(a.ours.median),
                over(a.ref.median),
                'lower',
                null,
                '(info)',
              )
            : null,
          failedLine(a),
        ].filter(Boolean),
      }
    },
  },
  {
    id: 'ws10k',
    title: 'per call, 10,000 workspace files',
    async run() {
      const a = await callRows('ws10k', {
        kern: TRUE_BIN,
        n: Q ? 8 : 20,
        warmup: Q ? 2 : 3,
        sandbox: { workspace: fixtures.ws10k },
        stalls: true,
      })
      return {
        data: a,
        lines: [
          line(
            'per call, 10,000 workspace files',
            'median ms',
            a.ours.median,
            a.ref.median,
            'lower',
            0.1,
            '<= 0.1x',
            errs(a),
          ),
          line('', 'node CPU ms per call', a.ours.cpuMsPerCall, a.ref.cpuMsPerCall, 'lower', null, '(all threads)'),
          line(
            '',
            'max event-loop stall ms',
            a.ours.stallMaxMs,
            a.ref.stallMaxMs,
            'none',
            null,
            'ours <= 5 ms',
            null,
            a.ours.stallMaxMs != null ? a.ours.stallMaxMs <= 5 : null,
          ),
          line(
            '',
            '  same, less CPU wait ms',
            a.ours.ownStallMaxMs,
            a.ref.ownStallMaxMs,
            'none',
            null,
            'ours <= 5 ms',
            null,
            a.ours.ownStallMaxMs != null ? a.ours.ownStallMaxMs <= 5 : null,
          ),
          line('', '  ELD histogram max ms', a.ours.eldMaxMs, a.ref.eldMaxMs, 'none', null, '(cross-check)'),
          failedLine(a),
        ].filter(Boolean),
      }
    },
  },
  {
    id: 'parallel64',
    title: '64 parallel calls on one session (do-nothing kern)',
    async run() {
      return parallelRow('parallel64', TRUE_BIN, Q ? 3 : 5, '64 parallel calls, do-nothing kern')
    },
  },
  {
    id: 'snapshot',
    title: 'snapshot of 200 MiB + 2,000 small files',
    async run() {
      const dest = (impl) => path.join(TMP, `snap-${impl}.tar.gz`)
      // Warm the page cache and produce the archive the restore row uses (ours; the reference
      // must be able to read it, checked there).
      const warm = await worker(
        {
          mode: 'snapshot',
          impl: 'ours',
          module: IMPLS.ours,
          workspace: fixtures.snapWs,
          dest: path.join(TMP, 'restore-src.tar.gz'),
        },
        baseEnv(TRUE_BIN),
      )
      if (warm.error) {
        log(`  our snapshot failed, the restore row will use the reference's archive: ${warm.error.split('\n')[0]}`)
        await worker(
          {
            mode: 'snapshot',
            impl: 'ref',
            module: IMPLS.ref,
            workspace: fixtures.snapWs,
            dest: path.join(TMP, 'restore-src.tar.gz'),
          },
          baseEnv(TRUE_BIN),
        )
      }
      fixtures.restoreSrc = path.join(TMP, 'restore-src.tar.gz')
      sync()
      const a = await oneShotRows('snapshot', 'snapshot', {
        kern: TRUE_BIN,
        specFor: (impl) => ({ workspace: fixtures.snapWs, dest: dest(impl) }),
        after: (impl) => {
          fs.rmSync(dest(impl), { force: true })
          sync()
        },
      })
      const s = summarize(a, ['ms', 'growth', 'archiveBytes'])
      return {
        data: a,
        summary: s,
        lines: [
          line('snapshot 200 MiB + 2,000 files', 'median ms', s.ours.ms, s.ref.ms, 'lower', 0.2, '<= 0.2x', errs(a)),
          line(
            '',
            'peak RSS growth MiB (max)',
            mib(s.ours.growthMax),
            mib(s.ref.growthMax),
            'none',
            null,
            'ours <= 64 MiB',
            null,
            s.ours.growthMax != null ? s.ours.growthMax <= 64 * MiB : null,
          ),
          line(
            '',
            'archive MiB',
            mib(s.ours.archiveBytes),
            mib(s.ref.archiveBytes),
            'lower',
            1.05,
            '<= 1.05x',
            errs(a),
          ),
        ],
      }
    },
  },
  {
    id: 'restore',
    title: 'restore of that snapshot (into an empty workspace)',
    async run() {
      if (!fixtures.restoreSrc || !fs.existsSync(fixtures.restoreSrc)) {
        fixtures.restoreSrc = path.join(TMP, 'restore-src.tar.gz')
        const w = await worker(
          { mode: 'snapshot', impl: 'ours', module: IMPLS.ours, workspace: fixtures.snapWs, dest: fixtures.restoreSrc },
          baseEnv(TRUE_BIN),
        )
        if (w.error)
          await worker(
            { mode: 'snapshot', impl: 'ref', module: IMPLS.ref, workspace: fixtures.snapWs, dest: fixtures.restoreSrc },
            baseEnv(TRUE_BIN),
          )
      }
      const target = (impl) => path.join(TMP, `ws-restore-${impl}`)
      const a = await oneShotRows('restore', 'restore', {
        kern: TRUE_BIN,
        specFor: (impl) => ({ workspace: target(impl), src: fixtures.restoreSrc }),
        after: () => sync(),
      })
      const s = summarize(a, ['ms', 'growth', 'restoredFiles', 'restoredBytes'])
      const complete = (i) =>
        a[i].runs.length > 0 &&
        a[i].runs.every((r) => r.restoredFiles === fixtures.snapDu.files && r.restoredBytes === fixtures.snapDu.bytes)
      return {
        data: a,
        summary: s,
        lines: [
          line('restore of that snapshot', 'median ms', s.ours.ms, s.ref.ms, 'lower', 0.3, '<= 0.3x', errs(a)),
          line('', 'peak RSS growth MiB (max)', mib(s.ours.growthMax), mib(s.ref.growthMax), 'none', null, ''),
          line(
            '',
            'all files restored',
            complete('ours'),
            complete('ref'),
            'none',
            null,
            'ours complete',
            null,
            complete('ours'),
          ),
        ],
      }
    },
  },
  {
    id: 'flood',
    title: '256 MiB stdout flood, 64 MiB cap (fake kern: head -c 256MiB /dev/zero)',
    async run() {
      const cap = 64 * MiB
      const a = await oneShotRows('flood', 'flood', { kern: fixtures.floodKern, specFor: () => ({ cap }) })
      const s = summarize(a, ['ms', 'growth'])
      const capped = (i) => a[i].runs.length > 0 && a[i].runs.every((r) => r.stdoutBytes === cap && r.truncated)
      return {
        data: a,
        summary: s,
        lines: [
          line(
            '256 MiB flood, 64 MiB cap [fake kern]',
            'median ms',
            s.ours.ms,
            s.ref.ms,
            'lower',
            0.6,
            '<= 0.6x',
            errs(a),
          ),
          line(
            '',
            'peak RSS growth MiB (max)',
            mib(s.ours.growthMax),
            mib(s.ref.growthMax),
            'none',
            null,
            'ours <= 96 MiB',
            null,
            s.ours.growthMax != null ? s.ours.growthMax <= cap + 32 * MiB : null,
          ),
          line(
            '',
            'kept 64 MiB, truncated',
            capped('ours'),
            capped('ref'),
            'none',
            null,
            'ours yes',
            null,
            capped('ours'),
          ),
        ],
      }
    },
  },
  {
    id: 'stream',
    title: 'streaming 100,000 chunks through onStdout (fake kern writer)',
    async run() {
      const n = 100000
      const a = await oneShotRows('stream', 'stream', { kern: fixtures.chunkKern.bin, specFor: () => ({ n }) })
      const s = summarize(a, ['ms', 'linesPerS', 'callbacks'])
      const all = (i) =>
        a[i].runs.length > 0 && a[i].runs.every((r) => r.inOrder && r.deliveredLines === n && r.resultStdoutMatches)
      const lost = (i) => a[i].runs.map((r) => r.expectedBytes - r.deliveredBytes)
      return {
        data: a,
        summary: s,
        lines: [
          line(
            'stream 100,000 chunks via onStdout [fake kern]',
            'chunks/s (median)',
            s.ours.linesPerS,
            s.ref.linesPerS,
            'higher',
            null,
            'report',
            errs(a),
          ),
          line('', 'all delivered, in order', all('ours'), all('ref'), 'none', null, 'ours yes', null, all('ours')),
          line('', 'bytes lost (max)', max(lost('ours')), max(lost('ref')), 'none', null, ''),
          line('', 'onStdout calls (median)', s.ours.callbacks, s.ref.callbacks, 'none', null, ''),
        ],
      }
    },
  },
  {
    id: 'streamslow',
    title: 'streaming 100,000 chunks to a slow consumer (JS thread busy 300 ms, then 20 us per chunk)',
    async run() {
      const n = 100000
      const a = await oneShotRows('streamslow', 'stream', {
        kern: fixtures.chunkKern.bin,
        specFor: () => ({ n, blockMs: 300, perChunkUs: 20 }),
      })
      const all = (i) =>
        a[i].runs.length > 0 && a[i].runs.every((r) => r.inOrder && r.deliveredLines === n && r.resultStdoutMatches)
      const lost = (i) => a[i].runs.map((r) => r.expectedBytes - r.deliveredBytes)
      const s = summarize(a, ['ms', 'callbacks'])
      return {
        data: a,
        summary: s,
        lines: [
          line(
            'stream to a slow consumer [fake kern]',
            'median ms',
            s.ours.ms,
            s.ref.ms,
            'lower',
            null,
            'report',
            errs(a),
          ),
          line('', 'all delivered, in order', all('ours'), all('ref'), 'none', null, 'ours yes', null, all('ours')),
          line('', 'bytes lost (max)', max(lost('ours')), max(lost('ref')), 'none', null, ''),
        ],
      }
    },
  },
  {
    id: 'real',
    real: true,
    title: 'real kern: run(["true"]) vs the bare `kern box … -- true`',
    async run() {
      const bare = await bareTemplate()
      const argv = bare.argv
      const a = await callRows('real', {
        kern: REAL_KERN,
        n: Q ? 6 : 15,
        warmup: Q ? 2 : 3,
        sandbox: { workspace: fixtures.realWs },
        impls: ['ours', 'ref', 'bare'],
        extra: { bare: { bare } },
      })
      const ratio = a.ours.median != null && a.bare.median ? a.ours.median / a.bare.median : null
      return {
        data: { ...a, argv: argv.map((x) => (x.startsWith(TMP) ? x.replace(TMP, '$TMP') : x)) },
        lines: [
          line('real kern run(["true"])', 'median ms', a.ours.median, a.ref.median, 'lower', null, '', errs(a)),
          line('', 'node CPU ms per call', a.ours.cpuMsPerCall, a.ref.cpuMsPerCall, 'lower', null, '(all threads)'),
          {
            row: '  ours vs bare `kern box … -- true`',
            metric: 'median ms',
            ours: fmt(a.ours.median),
            ref: `bare ${fmt(a.bare.median)}`,
            ratio: ratio == null ? '-' : `${ratio.toFixed(2)}x`,
            target: '<= 1.07x',
            result: verdict(ratio == null ? null : ratio <= 1.07),
            ratioValue: ratio,
          },
          {
            row: '  reference vs bare',
            metric: 'median ms',
            ours: '',
            ref: fmt(a.ref.median),
            ratio: a.ref.median != null && a.bare.median ? `${(a.ref.median / a.bare.median).toFixed(2)}x` : '-',
            target: '(issue: 1.12x)',
            result: '',
          },
          failedLine(a, ['ours', 'ref', 'bare']),
        ].filter(Boolean),
      }
    },
  },
  {
    id: 'kernel',
    real: true,
    title: 'warm kernel cells vs 0.1.23 (x = 1 + 1, sum(range(1000)), 100 kB print), close()',
    run: kernelRow,
  },
  {
    id: 'charts',
    real: true,
    title: 'a warm-kernel cell drawing a 1,000-point line chart: PNG + chart vs the same PNG alone',
    run: chartsRow,
  },
  {
    id: 'jskernel',
    real: true,
    title: 'JavaScript kernel beside the Python kernel (x = 1 + 1, 100 kB output), start to first result, TS stripping',
    run: jsKernelRow,
  },
  {
    id: 'e2b',
    real: true,
    title: "kern-sandbox/e2b: Sandbox.create() + first runCode('1 + 1'), then later cells",
    run: e2bRow,
  },
  {
    id: 'machine',
    real: true,
    title: 'machines: start + first exec vs one run(); later exec vs `kern exec`; 1 MiB writeFile/readFile',
    run: machineRow,
  },
  {
    id: 'pyrunner',
    real: true,
    title: 'one-shot Python runCode: runner overhead vs plain python3, and vs 0.1.23',
    run: pyRunnerRow,
  },
  {
    id: 'prewarm',
    real: true,
    title: 'ready boxes (prewarm: 2) vs a box per call (prewarm: 0) vs 0.1.1: call latency, 100-call loops, cost',
    run: prewarmRow,
  },
  {
    id: 'parallel64real',
    real: true,
    title: '64 parallel calls on one session, real kern',
    async run() {
      // kern itself is the bottleneck here: the figure that matters is how many calls succeed.
      return parallelRow(
        'parallel64real',
        REAL_KERN,
        Q ? 1 : 2,
        '64 parallel calls, real kern',
        { workspace: fixtures.realWs },
        null,
      )
    },
  },
]

/** The exact argv our binding builds for `run(["true"])` in the real-kern workspace, learnt once
 * through a recording fake kern: { kern, argv, envBody, privateDir } for spawning a bare box. */
let bareTpl = null
async function bareTemplate() {
  if (bareTpl) return bareTpl
  const rec = fx.argvRecorderKern(TMP)
  const r = await worker(
    { mode: 'argv', impl: 'ours', module: IMPLS.ours, workspace: fixtures.realWs },
    baseEnv(rec.bin),
  )
  if (r.error || !fs.existsSync(rec.out)) throw new Error(`could not record our argv: ${r.error || 'nothing recorded'}`)
  const argv = fs.readFileSync(rec.out, 'utf8').split('\0').slice(0, -1)
  const envBody = fs.existsSync(rec.out + '.env') ? fs.readFileSync(rec.out + '.env', 'utf8') : ''
  const privateDir = path.join(TMP, 'bare-private')
  fs.mkdirSync(privateDir, { recursive: true, mode: 0o700 })
  bareTpl = { kern: REAL_KERN, argv, envBody, privateDir }
  return bareTpl
}

const KERNEL_CELLS = {
  trivial: 'x = 1 + 1',
  sum1000: 'sum(range(1000))',
  print100k: 'print("a" * 100_000)',
}

/** Warm-kernel cells on ours and on 0.1.23, alternating, pooled medians. */
async function kernelRow() {
  // floor: the same cells through a bare framed pipe to a resident python3 in the same kind of box.
  const impls = ['ours', 'ref23', 'floor']
  const bare = await bareTemplate()
  const acc = Object.fromEntries(impls.map((i) => [i, { cells: {}, closeMs: [], cpu: [], errors: [] }]))
  for (let r = 0; r < ROUNDS; r++) {
    for (const impl of order(impls, r)) {
      const res = await worker(
        {
          mode: 'kernel',
          impl,
          module: IMPLS[impl === 'floor' ? 'ours' : impl],
          bare: impl === 'floor' ? bare : undefined,
          cells: KERNEL_CELLS,
          n: Q ? 200 : 1000,
          warmup: 50,
          sandbox: { workspace: fixtures.realWs },
        },
        baseEnv(REAL_KERN),
      )
      const a = acc[impl]
      if (res.error) {
        a.errors.push(res.error)
        continue
      }
      for (const [name, c] of Object.entries(res.cells)) {
        const cell = (a.cells[name] ||= { samples: [], failed: 0 })
        cell.samples.push(...c.samples)
        cell.failed += c.failed
      }
      a.closeMs.push(res.closeMs)
      a.cpu.push(res.cpuMsPerCall)
    }
    log(
      `  kernel round ${r + 1}/${ROUNDS}: ` +
        impls.map((i) => `${i} ${fmt(median(acc[i].cells.trivial?.samples || []))} ms`).join(', '),
    )
  }
  for (const i of impls) {
    const a = acc[i]
    for (const c of Object.values(a.cells)) {
      c.median = median(c.samples)
      c.calls = c.samples.length
      delete c.samples
    }
    a.closeMs = median(a.closeMs)
    a.cpuMsPerCall = median(a.cpu)
    a.errors = [...new Set(a.errors)].slice(0, 3)
  }
  const m = (i, name) => acc[i].cells[name]?.median ?? null
  const e = { ours: { errors: acc.ours.errors }, ref: { errors: acc.ref23.errors } }
  const ef = { ours: { errors: acc.ours.errors }, floor: { errors: acc.floor.errors } }
  return {
    data: acc,
    lines: [
      line(
        'warm kernel vs 0.1.23: `x = 1 + 1`',
        'median ms',
        m('ours', 'trivial'),
        m('ref23', 'trivial'),
        'lower',
        0.5,
        '<= 0.5x',
        errs(e),
      ),
      line('  `sum(range(1000))`', 'median ms', m('ours', 'sum1000'), m('ref23', 'sum1000'), 'lower', 0.5, '<= 0.5x'),
      line(
        '  a cell printing 100 kB',
        'median ms',
        m('ours', 'print100k'),
        m('ref23', 'print100k'),
        'lower',
        0.5,
        '<= 0.5x',
      ),
      line('  close()', 'median ms', acc.ours.closeMs, acc.ref23.closeMs, 'lower', null, '< 150 ms'),
      line('', 'node CPU ms per cell', acc.ours.cpuMsPerCall, acc.ref23.cpuMsPerCall, 'lower', null, '(all threads)'),
      // The reference column here is the pipe floor, not a package.
      line(
        'warm kernel vs the pipe floor: `x = 1 + 1`',
        'median ms',
        m('ours', 'trivial'),
        m('floor', 'trivial'),
        'lower',
        2,
        '<= 2x (aim 1.5x)',
        errs(ef),
      ),
      line('  `sum(range(1000))`', 'median ms', m('ours', 'sum1000'), m('floor', 'sum1000'), 'lower', null, ''),
      line(
        '  a cell printing 100 kB',
        'median ms',
        m('ours', 'print100k'),
        m('floor', 'print100k'),
        'lower',
        2,
        '<= 2x',
      ),
      line('', 'node CPU ms per cell', acc.ours.cpuMsPerCall, acc.floor.cpuMsPerCall, 'lower', null, '(all threads)'),
    ],
  }
}

// Both cells draw and save the same figure; the first lets the end-of-cell capture give its PNG
// and chart, the second saves the PNG itself and displays it raw: the same work minus the chart.
const CHART_PLOT =
  'import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt, numpy as np, io, base64\n' +
  'xs = np.linspace(0, 10, 1000)\nfig, ax = plt.subplots()\nax.plot(xs, np.sin(xs), label="sin")\n' +
  'ax.set_title("wave"); ax.set_xlabel("t (s)")\n'
const CHART_CELLS = {
  withChart: CHART_PLOT + 'None',
  pngOnly:
    CHART_PLOT +
    'buf = io.BytesIO(); fig.savefig(buf, format="png", bbox_inches="tight"); plt.close(fig)\n' +
    'display({"image/png": base64.b64encode(buf.getbuffer()).decode("ascii")}, raw=True)',
}

/** What chart extraction adds to a figure cell, on our warm kernel (issue: at most 10%). */
async function chartsRow() {
  const samples = { withChart: [], pngOnly: [] }
  const errors = []
  for (let r = 0; r < ROUNDS; r++) {
    // The two cells take turns, and which goes first alternates round by round.
    const names = r % 2 ? ['pngOnly', 'withChart'] : ['withChart', 'pngOnly']
    const cells = Object.fromEntries(names.map((n) => [n, CHART_CELLS[n]]))
    const res = await worker(
      {
        mode: 'kernel',
        impl: 'ours',
        module: IMPLS.ours,
        cells,
        interleave: true,
        n: Q ? 10 : 30,
        warmup: 3,
        sandbox: { workspace: fixtures.realWs },
      },
      baseEnv(REAL_KERN),
    )
    if (res.error) {
      errors.push(res.error)
      continue
    }
    for (const n of names) samples[n].push(...res.cells[n].samples)
    log(
      `  charts round ${r + 1}/${ROUNDS}: with chart ${fmt(median(samples.withChart))} ms, PNG only ${fmt(median(samples.pngOnly))} ms`,
    )
  }
  const withChart = median(samples.withChart)
  const pngOnly = median(samples.pngOnly)
  const e = errors.length ? { ours: { errors: [...new Set(errors)].slice(0, 3) } } : {}
  return {
    data: { withChart, pngOnly, calls: samples.withChart.length, errors },
    lines: [
      line(
        '1,000-point line chart cell: PNG + chart vs PNG only',
        'median ms',
        withChart,
        pngOnly,
        'lower',
        1.1,
        '<= 1.10x',
        errs(e),
      ),
    ],
  }
}

const JS_KERNEL_CELLS = {
  python: { trivial: 'x = 1 + 1', print100k: 'print("a" * 100_000)' },
  javascript: { trivial: 'x = 1 + 1', print100k: 'console.log("a".repeat(100_000))' },
}

/** Our JavaScript kernel against our Python kernel in the same run (alternating, pooled
 * medians); kernel start to first result against a one-shot `node -e ""` box; host-side
 * preparation of a 1,000-line TypeScript cell. */
async function jsKernelRow() {
  // jsfloor: the JavaScript cells through a bare framed pipe to a resident node in the same box.
  const langs = ['javascript', 'python', 'jsfloor']
  const bare = await bareTemplate()
  const acc = Object.fromEntries(langs.map((l) => [l, { cells: {}, errors: [] }]))
  const start = { kernel: [], box: [], failed: 0, errors: [] }
  for (let r = 0; r < ROUNDS; r++) {
    for (const run of order(langs, r)) {
      const floor = run === 'jsfloor'
      const language = floor ? 'javascript' : run
      const res = await worker(
        {
          mode: 'kernel',
          impl: floor ? 'floor' : 'ours',
          bare: floor ? bare : undefined,
          module: IMPLS.ours,
          language,
          cells: JS_KERNEL_CELLS[language],
          n: Q ? 200 : 1000,
          warmup: 50,
          sandbox: { workspace: fixtures.realWs },
        },
        baseEnv(REAL_KERN),
      )
      if (res.error) {
        acc[run].errors.push(res.error)
        continue
      }
      for (const [name, c] of Object.entries(res.cells)) {
        const cell = (acc[run].cells[name] ||= { samples: [], failed: 0 })
        cell.samples.push(...c.samples)
        cell.failed += c.failed
      }
    }
    const st = await worker(
      {
        mode: 'kernelStart',
        impl: 'ours',
        module: IMPLS.ours,
        language: 'javascript',
        cell: '1',
        command: ['node', '-e', ''],
        n: Q ? 5 : 15,
        warmup: 2,
        sandbox: { workspace: fixtures.realWs },
      },
      baseEnv(REAL_KERN),
    )
    if (st.error) start.errors.push(st.error)
    else {
      start.kernel.push(...st.kernel)
      start.box.push(...st.box)
      start.failed += st.failed
    }
    log(
      `  js kernel round ${r + 1}/${ROUNDS}: ` +
        langs.map((l) => `${l} ${fmt(median(acc[l].cells.trivial?.samples || []))} ms`).join(', '),
    )
  }
  const ts = await worker(
    { mode: 'tsPrepare', impl: 'ours', module: IMPLS.ours, lines: 1000, n: Q ? 30 : 100, warmup: 20 },
    baseEnv(REAL_KERN),
  )
  const m = (l, name) => median(acc[l].cells[name]?.samples || [])
  const e = { ours: { errors: acc.javascript.errors }, ref: { errors: acc.python.errors } }
  const ef = { ours: { errors: acc.javascript.errors }, floor: { errors: acc.jsfloor.errors } }
  const startK = median(start.kernel)
  const startB = median(start.box)
  const strip = ts.error ? null : median(ts.strip)
  const prep = ts.error ? null : median(ts.prepare)
  return {
    data: {
      acc: {
        javascript: { errors: acc.javascript.errors },
        python: { errors: acc.python.errors },
        jsfloor: { errors: acc.jsfloor.errors },
      },
      medians: {
        js: [m('javascript', 'trivial'), m('javascript', 'print100k')],
        py: [m('python', 'trivial'), m('python', 'print100k')],
        jsfloor: [m('jsfloor', 'trivial'), m('jsfloor', 'print100k')],
      },
      start: { kernel: startK, box: startB, failed: start.failed, errors: start.errors },
      ts: { strip, prepare: prep, error: ts.error },
    },
    lines: [
      line(
        'JS kernel vs Python kernel (ref column): `x = 1 + 1`',
        'median ms',
        m('javascript', 'trivial'),
        m('python', 'trivial'),
        'lower',
        1,
        '<= 1x',
        errs(e),
      ),
      line(
        '  a cell writing 100 kB',
        'median ms',
        m('javascript', 'print100k'),
        m('python', 'print100k'),
        'lower',
        1,
        '<= 1x',
      ),
      // The reference column here is the JavaScript pipe floor, not a package.
      line(
        'JS kernel vs the JS pipe floor: `x = 1 + 1`',
        'median ms',
        m('javascript', 'trivial'),
        m('jsfloor', 'trivial'),
        'lower',
        2,
        '<= 2x',
        errs(ef),
      ),
      line(
        '  a cell writing 100 kB',
        'median ms',
        m('javascript', 'print100k'),
        m('jsfloor', 'print100k'),
        'lower',
        2,
        '<= 2x',
      ),
      line(
        'JS kernel start to first result vs one-shot `node -e ""` box',
        'median ms',
        startK,
        startB,
        'lower',
        1.5,
        '<= 1.5x',
        start.errors.length || start.failed
          ? { ours: { errors: start.errors.length ? start.errors : [`${start.failed} failed`] } }
          : null,
      ),
      line(
        'type stripping, 1,000-line TS cell (amaro strip-only)',
        'median ms',
        strip,
        null,
        'none',
        null,
        '<= 5 ms',
        ts.error ? { ours: { errors: [ts.error] } } : null,
        strip == null ? undefined : strip <= 5,
      ),
      line('  whole cell preparation (strip + rewrite)', 'median ms', prep, null, 'none', null, 'report'),
    ],
  }
}

/** kern-sandbox/e2b on ours alone (there is no reference): a fresh sandbox's first cell, which
 * includes starting its Python kernel, and the cells after it. */
async function e2bRow() {
  const first = []
  const later = []
  const errors = []
  let failed = 0
  for (let r = 0; r < ROUNDS; r++) {
    const res = await worker(
      { mode: 'e2b', module: IMPLS.ours, n: Q ? 5 : 15, warmup: 1, cells: Q ? 100 : 500 },
      baseEnv(REAL_KERN),
    )
    if (res.error) {
      errors.push(res.error)
      continue
    }
    first.push(...res.first)
    later.push(...res.later)
    failed += res.failed
    log(
      `  e2b round ${r + 1}/${ROUNDS}: create + first cell ${fmt(median(res.first))} ms, later cells ${fmt(median(res.later))} ms`,
    )
  }
  const m1 = median(first)
  const e = errors.length ? [errors[0].split('\n')[0]] : null
  return {
    data: { firstMs: m1, firstMaxMs: max(first), laterMs: median(later), failed, errors: errors.slice(0, 3) },
    lines: [
      line(
        "e2b: Sandbox.create() + runCode('1 + 1')",
        'median ms',
        m1,
        null,
        'none',
        null,
        '<= 100 ms',
        e,
        m1 == null ? undefined : m1 <= 100,
      ),
      line("  later cells (runCode('x = 1 + 1'))", 'median ms', median(later), null, 'none', null, 'report'),
      failed
        ? { row: '', metric: 'failed calls', ours: String(failed), ref: '', ratio: '', target: '', result: '' }
        : null,
    ].filter(Boolean),
  }
}

/** How long `kern exec <box> true` takes into a running box: the floor a machine's exec is held to. */
function kernExecMs(n) {
  const name = `bench-exec-${process.pid}`
  const box = spawn(REAL_KERN, ['box', name, '--image', 'python:3.12-slim', '--', 'sleep', '600'], {
    stdio: 'ignore',
  })
  try {
    for (let i = 0; i < 100 && spawnSync(REAL_KERN, ['exec', name, 'true']).status !== 0; i++) {
      spawnSync('sleep', ['0.1'])
    }
    const ms = []
    for (let i = 0; i < n; i++) {
      const t = process.hrtime.bigint()
      spawnSync(REAL_KERN, ['exec', name, 'true'])
      ms.push(Number(process.hrtime.bigint() - t) / 1e6)
    }
    return median(ms)
  } finally {
    spawnSync(REAL_KERN, ['stop', name])
    box.kill('SIGKILL')
  }
}

async function machineRow() {
  const res = await worker(
    { mode: 'machine', module: IMPLS.ours, n: Q ? 5 : 15, warmup: 2, cells: Q ? 50 : 200, workspace: fixtures.realWs },
    baseEnv(REAL_KERN),
  )
  if (res.error) throw new Error(res.error)
  const kernExec = kernExecMs(Q ? 20 : 50)
  const med = Object.fromEntries(
    ['start', 'run', 'exec', 'write', 'read', 'sbxWrite', 'sbxRead', 'firstByte', 'echo'].map((k) => [
      k,
      median(res[k]),
    ]),
  )
  log(
    `  machine: start + exec ${fmt(med.start)} ms, run ${fmt(med.run)} ms, exec ${fmt(med.exec)} ms, kern exec ${fmt(kernExec)} ms`,
  )
  const failed = res.failed
    ? { row: '', metric: 'failed calls', ours: String(res.failed), ref: '', ratio: '', target: '', result: '' }
    : null
  return {
    data: { ...med, kernExec, failed: res.failed },
    lines: [
      line(
        'machine() + first exec(["true"]) vs run(["true"])',
        'median ms',
        med.start,
        med.run,
        'lower',
        1.2,
        '<= 1.2x',
      ),
      line('  later exec(["true"]) vs `kern exec NAME true`', 'median ms', med.exec, kernExec, 'lower', 1.3, '<= 1.3x'),
      line(
        '  spawn to its first output byte',
        'median ms',
        med.firstByte,
        null,
        'none',
        null,
        '<= 5 ms',
        null,
        med.firstByte <= 5,
      ),
      line('  PTY keystroke echoed back', 'median ms', med.echo, null, 'none', null, '<= 2 ms', null, med.echo <= 2),
      line('  m.writeFile 1 MiB vs sbx.writeFile', 'median ms', med.write, med.sbxWrite, 'lower', 2, '<= 2x'),
      line('  m.readFile 1 MiB vs sbx.readFile', 'median ms', med.read, med.sbxRead, 'lower', 2, '<= 2x'),
      failed,
    ].filter(Boolean),
  }
}

/** One-shot Python: ours through the rich-result runner, 0.1.23 through its runner, and ours
 * running the same code plainly (`run(["python3", "-c", code])`): what the runner adds. */
/** prewarm: the same calls with ready boxes, with a box started per call, and on 0.1.1; each
 * variant in a worker of its own, their order alternating round by round. */
async function prewarmRow() {
  const n = Q ? 10 : 30
  const loop = Q ? 40 : 100
  const variants = {
    pool: { impl: 'ours', module: IMPLS.ours, prewarm: 2 },
    cold: { impl: 'ours', module: IMPLS.ours, prewarm: 0 },
    ref: { impl: 'ref', module: IMPLS.ref, prewarm: 0 },
  }
  const cases = {
    code: { code: 'x = 1', n, warmup: 2, waitReady: true },
    true: { command: ['true'], n, warmup: 2, waitReady: true },
    think: { code: 'x = 1', n: loop, warmup: 2, thinkMs: 20 },
    burst: { code: 'x = 1', n: loop, warmup: 2 },
  }
  const acc = {}
  for (const c of Object.keys(cases))
    for (const v of Object.keys(variants)) acc[`${c}.${v}`] = { samples: [], totals: [], failed: 0, errors: [] }
  const sandbox = { workspace: fixtures.realWs }
  for (let r = 0; r < ROUNDS; r++) {
    for (const [c, spec] of Object.entries(cases)) {
      for (const v of order(Object.keys(variants), r)) {
        const res = await worker({ mode: 'prewarm', sandbox, ...spec, ...variants[v] }, baseEnv(REAL_KERN))
        const a = acc[`${c}.${v}`]
        if (res.error) a.errors.push(res.error)
        else {
          a.samples.push(...res.samples)
          a.totals.push(res.totalMs)
          a.failed += res.failed
        }
      }
    }
    log(
      `  prewarm round ${r + 1}/${ROUNDS}: runCode ready ${fmt(median(acc['code.pool'].samples))} ms, cold ${fmt(median(acc['code.cold'].samples))} ms`,
    )
  }
  const cost = {}
  for (const [kind, what] of [
    ['python', { code: 'x = 1' }],
    ['sh', { command: ['true'] }],
  ]) {
    const res = await worker(
      { mode: 'prewarmCost', impl: 'ours', module: IMPLS.ours, sandbox, prewarm: 4, ...what },
      baseEnv(REAL_KERN),
    )
    cost[kind] = res
  }
  for (const a of Object.values(acc)) {
    a.median = median(a.samples)
    delete a.samples
  }
  const med = (k) => acc[k].median
  const tot = (k) => median(acc[k].totals)
  const failed = Object.values(acc).reduce((x, a) => x + a.failed, 0)
  const speedup = (c) => (tot(`${c}.pool`) ? tot(`${c}.cold`) / tot(`${c}.pool`) : null)
  const errors = Object.entries(acc)
    .filter(([, a]) => a.errors.length)
    .map(([k, a]) => `${k}: ${a.errors[0].split('\n')[0]}`)
  return {
    data: { acc, cost },
    lines: [
      line(
        "runCode('x = 1'), a ready box",
        'median ms',
        med('code.pool'),
        med('code.ref'),
        'lower',
        null,
        '<= 5 ms',
        errors.length ? errors : null,
        med('code.pool') == null ? null : med('code.pool') <= 5,
      ),
      line('', 'prewarm: 0 / 0.1.1', med('code.cold'), med('code.ref'), 'none', null, '(info)'),
      line(
        "run(['true']), a ready box",
        'median ms',
        med('true.pool'),
        med('true.ref'),
        'lower',
        null,
        '<= 5 ms',
        null,
        med('true.pool') == null ? null : med('true.pool') <= 5,
      ),
      line('', 'prewarm: 0 / 0.1.1', med('true.cold'), med('true.ref'), 'none', null, '(info)'),
      line(
        `${loop} runCode, 20 ms think time`,
        'total ms',
        tot('think.pool'),
        tot('think.ref'),
        'lower',
        null,
        '>= 5x prewarm:0',
        null,
        speedup('think') == null ? null : speedup('think') >= 5,
      ),
      line('', 'prewarm: 0 total ms; speed-up', tot('think.cold'), speedup('think'), 'none', null, '(info)'),
      line(
        `${loop} runCode back to back`,
        'total ms',
        tot('burst.pool'),
        tot('burst.ref'),
        'lower',
        null,
        '<= prewarm:0',
        null,
        tot('burst.pool') == null ? null : tot('burst.pool') <= tot('burst.cold'),
      ),
      line('', 'prewarm: 0 total ms', tot('burst.cold'), null, 'none', null, '(info)'),
      line(
        'a ready box (Python / sh)',
        'host RSS MiB',
        mib(cost.python?.rssPerBox),
        mib(cost.sh?.rssPerBox),
        'none',
        null,
        '(info; shared pages in each)',
      ),
      line(
        '',
        'CPU ms per unused box',
        cost.python?.unusedCpuMsPerBox,
        cost.sh?.unusedCpuMsPerBox,
        'none',
        null,
        '(info; start + stop)',
      ),
      failed ? line('', 'failed calls', failed, null, 'none', null, '') : null,
    ].filter(Boolean),
  }
}

async function pyRunnerRow() {
  const code = 'x = 1'
  const n = Q ? 8 : 20
  const a = await callRows('pyrunner', {
    kern: REAL_KERN,
    n,
    warmup: 3,
    sandbox: { workspace: fixtures.realWs },
    impls: ['ours', 'ref23', 'plain'],
    extra: {
      ours: { code },
      ref23: { code, module: IMPLS.ref23 },
      plain: { module: IMPLS.ours, command: ['python3', '-c', code] },
    },
  })
  const added = a.ours.median != null && a.plain.median != null ? a.ours.median - a.plain.median : null
  const addedRef = a.ref23.median != null && a.plain.median != null ? a.ref23.median - a.plain.median : null
  return {
    data: a,
    lines: [
      line(
        'one-shot Python runCode vs 0.1.23',
        'median ms',
        a.ours.median,
        a.ref23.median,
        'lower',
        null,
        '',
        errs({ ours: a.ours, ref: a.ref23 }),
      ),
      {
        row: '  what the runner adds over plain python3 -c',
        metric: 'ms',
        ours: fmt(added),
        ref: fmt(addedRef),
        ratio: `plain ${fmt(a.plain.median)}`,
        target: '<= 2 ms',
        result: verdict(added == null ? null : added <= 2),
      },
    ],
  }
}

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

// ---------------------------------------------------------------------------------------------
// formatting

function fmt(v) {
  if (v == null || (typeof v === 'number' && !Number.isFinite(v))) return '-'
  if (typeof v === 'boolean') return v ? 'yes' : 'NO'
  if (typeof v === 'string') return v
  const a = Math.abs(v)
  if (Number.isInteger(v)) return v.toLocaleString('en-US')
  if (a >= 10000) return Math.round(v).toLocaleString('en-US')
  if (a >= 100) return v.toFixed(0)
  if (a >= 10) return v.toFixed(1)
  if (a >= 1) return v.toFixed(2)
  return v.toFixed(3)
}
const mib = (b) => (b == null ? null : b / MiB)
const short = (s) => (s ? (s.length > 44 ? s.slice(0, 41) + '...' : s) : '')
const verdict = (p) => (p == null ? 'n/a' : p ? 'PASS' : 'FAIL')

function errs(a) {
  const e = Object.entries(a)
    .filter(([, v]) => v && v.errors && v.errors.length)
    .map(([k, v]) => `${k}: ${v.errors[0].split('\n')[0]}`)
  return e.length ? e : null
}

function failedLine(a, impls = ['ours', 'ref']) {
  if (!impls.some((i) => a[i].failed)) return null
  return {
    row: '',
    metric: 'failed calls',
    ours: String(a.ours.failed),
    ref: impls
      .map((i) => (i === 'ours' ? null : `${i !== 'ref' ? i + ' ' : ''}${a[i].failed}`))
      .filter(Boolean)
      .join(', '),
    ratio: '',
    target: '',
    result: '',
  }
}

/** One table line. `better` says how to read the ratio ours/ref: 'lower', 'higher' or 'none'. */
function line(row, metric, ours, ref, better, target, targetText, errors = null, pass) {
  let ratio = null
  if (better !== 'none' && typeof ours === 'number' && typeof ref === 'number' && ref !== 0) ratio = ours / ref
  let result = pass
  if (result === undefined) {
    if (target == null) result = null
    else if (ratio == null) result = null
    else result = better === 'lower' ? ratio <= target : ratio >= target
  }
  return {
    row,
    metric,
    ours: fmt(ours),
    ref: fmt(ref),
    ratio: ratio == null ? (better === 'none' ? '' : '-') : `${ratio.toFixed(ratio < 0.1 ? 3 : 2)}x`,
    target: targetText,
    result: errors
      ? 'ERROR'
      : target == null && pass === undefined
        ? targetText === 'report'
          ? 'info'
          : ''
        : verdict(result),
    ratioValue: ratio,
    pass: result,
    errors,
  }
}

function table(lines) {
  const cols = [
    ['row', 'row'],
    ['metric', 'metric'],
    ['ours', 'ours'],
    ['ref', 'reference'],
    ['ratio', 'ours/ref'],
    ['target', 'target'],
    ['result', 'result'],
  ]
  const w = cols.map(([k, h]) => Math.max(h.length, ...lines.map((l) => String(l[k] ?? '').length)))
  const fmtRow = (vals) =>
    vals.map((v, i) => (i >= 2 && i <= 4 ? String(v).padStart(w[i]) : String(v).padEnd(w[i]))).join('  ')
  const out = [fmtRow(cols.map(([, h]) => h)), w.map((n) => '-'.repeat(n)).join('  ')]
  for (const l of lines) out.push(fmtRow(cols.map(([k]) => l[k] ?? '')))
  return out.join('\n')
}

function summarize(a, keys) {
  const s = {}
  for (const [impl, v] of Object.entries(a)) {
    s[impl] = {}
    for (const k of keys) {
      const xs = v.runs.map((r) => r[k]).filter((x) => typeof x === 'number')
      s[impl][k] = median(xs)
      s[impl][k + 'Max'] = max(xs)
    }
  }
  return s
}

function fsType(dir) {
  const r = spawnSync('stat', ['-f', '-c', '%T', dir], { encoding: 'utf8' })
  return (r.stdout || '').trim() || 'unknown'
}

function machine() {
  const cpus = os.cpus()
  let rev = null
  try {
    rev = spawnSync('git', ['-C', ROOT, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).stdout.trim() || null
    const dirty = spawnSync('git', ['-C', ROOT, 'status', '--porcelain', '--', 'src', 'index.js'], {
      encoding: 'utf8',
    }).stdout.trim()
    if (dirty) rev += '+dirty'
  } catch {}
  let addon = null
  try {
    const f = fs.readdirSync(ROOT).find((n) => n.endsWith('.node'))
    if (f) addon = { file: f, built: fs.statSync(path.join(ROOT, f)).mtime.toISOString() }
  } catch {}
  return {
    host: os.hostname(),
    kernel: os.release(),
    cpu: cpus[0] && cpus[0].model,
    cores: cpus.length,
    memGiB: +(os.totalmem() / 2 ** 30).toFixed(1),
    node: process.version,
    loadavg: os.loadavg().map((x) => +x.toFixed(2)),
    git: rev,
    addon,
  }
}

// ---------------------------------------------------------------------------------------------

async function main() {
  let rows = ROWS.filter((r) => !args.only || args.only.has(r.id))
  if (args.list) {
    for (const r of ROWS) console.log(`${r.id.padEnd(15)} ${r.title}${r.real ? '  (only with KERN_BIN)' : ''}`)
    return
  }
  try {
    require.resolve(path.join(ROOT, 'binding.js'))
    if (!fs.readdirSync(ROOT).some((n) => n.endsWith('.node'))) throw new Error('no .node file')
  } catch {
    console.error('kern-sandbox: the native addon is not built. Run `npm run build` in the package root first.')
    process.exitCode = 1
    return
  }
  const skipped = rows.filter((r) => r.real && !REAL_KERN).map((r) => r.id)
  rows = rows.filter((r) => !r.real || REAL_KERN)
  const started = Date.now()
  const m0 = machine()
  m0.fixtureFs = fsType(TMP)
  log(
    `kern-sandbox bench: ${ROUNDS} rounds${Q ? ' (quick)' : ''}${rtPrefix().length ? ', SCHED_FIFO (--rt)' : ''}; ours=${IMPLS.ours}; reference=${IMPLS.ref}`,
  )
  log(`machine: ${m0.cores} × ${m0.cpu}, ${m0.memGiB} GiB, ${m0.kernel}, node ${m0.node}, load ${m0.loadavg.join(' ')}`)
  log(`fixtures and workspaces: ${TMP} (${m0.fixtureFs})`)
  if (REAL_KERN) log(`real kern: ${REAL_KERN}`)
  else log('real-kern rows skipped (set KERN_BIN=/path/to/kern to add them)')

  setupFixtures(rows)
  const results = {}
  const lines = []
  for (const row of rows) {
    log(`${row.id}: ${row.title}`)
    const t = Date.now()
    try {
      const r = await row.run()
      results[row.id] = {
        title: row.title,
        seconds: (Date.now() - t) / 1000,
        lines: r.lines,
        summary: r.summary,
        data: r.data,
      }
      lines.push(...r.lines)
    } catch (e) {
      results[row.id] = { title: row.title, error: String((e && e.stack) || e) }
      lines.push({
        row: row.title,
        metric: 'error',
        ours: '',
        ref: '',
        ratio: '',
        target: '',
        result: 'ERROR',
        errors: [String(e && e.message)],
      })
    }
  }
  const m1 = machine()
  const notes = [
    `do-nothing kern: KERN_BIN=${TRUE_BIN}; "the floor" = posix_spawn + waitpid of ${TRUE_BIN} from a C program (no binding, no Node). Rows marked [fake kern] use a stand-in that ignores its argv and only writes stdout:`,
    `  flood: ${fixtures.floodKern ? 'a sh script, `exec head -c 268435456 /dev/zero`' : '-'}; stream: ${fixtures.chunkKern ? fixtures.chunkKern.kind + ', 100,000 distinct lines "chunk NNNNNNN\\n"' : '-'}.`,
    `fixtures, workspaces and TMPDIR: ${m0.fixtureFs} (${path.dirname(TMP)}; --dir to change).`,
    'snapshot data: 2 × 50 MiB random bytes + 2 × 50 MiB CSV text + 2,000 text files of 1-4 KiB in 20 dirs; restore reads the archive our snapshot wrote.',
    'peak RSS growth: VmHWM (reset through /proc/self/clear_refs) minus VmRSS just before the operation, one fresh Node process per measurement.',
    `each figure: ${ROUNDS} rounds, ours and the reference alternating which goes first; per-call rows pool every call's wall time and take the median.`,
    rtPrefix().length
      ? 'measured under SCHED_FIFO (--rt): other load on the machine is mostly kept off the figures.'
      : 'measured at normal priority (--rt shields the figures from other load, as root).',
    `machine load: ${m0.loadavg.join(' ')} at the start, ${m1.loadavg.join(' ')} at the end (1/5/15-min load on ${m0.cores} cores; other work on the host skews all figures).`,
  ]
  if (skipped.length) notes.push(`skipped (no KERN_BIN): ${skipped.join(', ')}`)
  const failures = lines.filter((l) => l.errors).flatMap((l) => l.errors)

  console.log('')
  console.log(table(lines))
  console.log('')
  for (const n of notes) console.log(n)
  if (failures.length) {
    console.log('\nerrors:')
    for (const f of new Set(failures)) console.log(`  ${f.slice(0, 300)}`)
  }
  const doc = {
    date: new Date().toISOString(),
    durationS: (Date.now() - started) / 1000,
    rounds: ROUNDS,
    quick: Q,
    rt: rtPrefix().length > 0,
    machine: { ...m0, loadavgEnd: m1.loadavg },
    kern: { doNothing: TRUE_BIN, real: REAL_KERN },
    reference: IMPLS.ref,
    notes,
    table: lines.map(({ errors, ...l }) => ({ ...l, errors: errors || undefined })),
    rows: results,
  }
  fs.writeFileSync(args.out, JSON.stringify(doc, null, 2) + '\n')
  console.log(
    `\nwrote ${path.relative(process.cwd(), args.out) || args.out} in ${((Date.now() - started) / 1000).toFixed(0)} s`,
  )
}

main()
  .catch((e) => {
    console.error('benchmark crashed:', e)
    process.exitCode = 1
  })
  .finally(() => {
    if (!args.keep) fs.rmSync(TMP, { recursive: true, force: true })
    else log(`fixtures kept in ${TMP}`)
  })
