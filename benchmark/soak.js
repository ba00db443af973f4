#!/usr/bin/env node
'use strict'
// kern-sandbox soak under faults (issue 7). Not a test and not part of `npm test`: a bounded run
// that hammers the binding with a mix of successes, timeouts, kills, floods and cancelled calls,
// sequentially and concurrently, across several sessions, then checks that nothing is left behind.
//
//   npm run soak                           # 1,000 sequential + 200 concurrent calls + 5,000 kernel cells
//                                          # + 10,000 requests through the egress proxy
//                                          # + 10,000 through one machine's egress
//                                          # + 200 pause/resume cycles of one machine, 10 min cap
//   npm run soak -- --quick                # 150 + 50 calls + 800 cells + 2,000 + 2,000 requests
//                                          # + 20 cycles, about a minute
//   KERN_BIN=/path/to/kern npm run soak    # against a real kern (default: the stand-in)
//
// Options: --minutes N (cap on the call phases; checks still run after it), --quick, --seq N,
// --conc N, --cells N (warm-kernel cells), --proxy N (requests through the egress proxy, half
// refused), --box N (requests from inside one machine through its egress, half refused), --cycles N
// (pause/resume cycles of one machine), --cycles-every K (a fork and a snapshot round every K
// cycles), --out FILE (the figures as JSON), --verbose (every call's outcome).
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
//   proxy      the egress proxy's own process (soak/proxy.js): fds and threads after the run <= after
//              its warm-up, RSS (after a full collection) within the rss check's bound
//   box-egress one machine's egress (soak/box-egress.js), measured at the in-box client's start,
//              middle and end marks: the host process's fds, the proxy's streams, the upstream
//              connections, the box's processes (kern's pids, the client's /proc count) and the
//              agent's fds never above the start figure, the host's RSS within the rss check's
//              bound of it; after the client exits, no stream of it left and the box's process
//              count back to where it was before it
//   cycles     one machine paused and resumed N times (soak/cycles.js), with a fork({ count: 2 })
//              and a snapshot (a machine from it, then deleted) every K: measured at start, middle
//              and end, the host process's fds, the session's live boxes, the host processes
//              under it (and kern's) and the snapshot store's entries and workspace copies never
//              above the start figure, RSS within the rss check's bound of it; after close, the
//              store as it was before the first snapshot and no workspace copy or box left
//   calls      every call and cell settled in time with the outcome its workload must produce
//
// One module per scenario under benchmark/soak/: calls.js (one-shot calls, sequential and
// concurrent), kernels.js (warm kernels), proxy.js (the egress proxy), box-egress.js (egress through
// one machine, with its in-box client box-egress.py), cycles.js (pause/resume/fork/snapshot
// cycles of one machine), close.js (a session closed with calls running); shared:
// context.js (marker, tallies, draws), probes.js (what the checks look at), warmup.js, checks.js.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const cp = require('node:child_process')

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
  const a = {
    quick: false,
    minutes: null,
    seq: null,
    conc: null,
    cells: null,
    proxy: null,
    box: null,
    cycles: null,
    cyclesEvery: null,
    out: null,
    verbose: false,
  }
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
    else if (v === '--proxy') a.proxy = Math.floor(num())
    else if (v === '--box') a.box = Math.floor(num())
    else if (v === '--cycles') a.cycles = Math.floor(num())
    else if (v === '--cycles-every') a.cyclesEvery = Math.max(1, Math.floor(num()))
    else if (v === '--out') a.out = path.resolve(argv[++i])
    else if (v === '--verbose' || v === '-v') a.verbose = true
    else if (v === '--help' || v === '-h') {
      console.log(
        fs
          .readFileSync(__filename, 'utf8')
          .split('\n')
          .slice(2, 56)
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
  a.proxy ??= a.quick ? 2000 : 10000
  a.box ??= a.quick ? 2000 : 10000
  a.cycles ??= a.quick ? 20 : 200
  a.cyclesEvery ??= a.quick ? 5 : 10
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

// After the re-exec and the flags: the marker and the soak's directory belong to this process.
const ctx = require('./soak/context')
ctx.args = args
const { KERN, KERN_KIND, MARKER, SOAK_DIR, sleep, counters, tally, problems } = ctx
const { statusKb, strays, sessionDirs, snapshotFigures } = require('./soak/probes')
const { openSessions, sequentialPhase, concurrentPhase } = require('./soak/calls')
const { KERNELS_AT_ONCE, kstats, kernelsPhase } = require('./soak/kernels')
const { closeWhileRunning } = require('./soak/close')
const { proxyPhase } = require('./soak/proxy')
const { boxEgressPhase } = require('./soak/box-egress')
const { cyclesPhase } = require('./soak/cycles')
const { warmUp } = require('./soak/warmup')
const { fmtKb, checks: runChecks } = require('./soak/checks')

// ---------------------------------------------------------------------------------------------
// main

async function main() {
  const t0 = Date.now()
  const deadline = t0 + args.minutes * 60_000
  console.log(`kern-sandbox soak: ${KERN_KIND} (${KERN}), pid ${process.pid}, marker ${MARKER}`)
  console.log(
    `plan: ${args.seq} sequential + ${args.conc} concurrent calls + ${args.cells} kernel cell workloads + ${args.proxy} proxied requests + ${args.box} through a machine + ${args.cycles} pause/resume cycles (fork and snapshot every ${args.cyclesEvery}), cap ${args.minutes} min, node ${process.version}, ${os.cpus().length} CPUs`,
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

  const sessions = await openSessions()

  // sequential
  const { done: seqDone, ms: seqMs } = await sequentialPhase(sessions, deadline)

  // concurrent: all launched at once, spread over the sessions (and a few one-shot sessions)
  const { done: concDone, ms: concMs } = await concurrentPhase(sessions, deadline)

  // warm kernels
  const { done: cellsDone, ms: cellsMs, kstart } = await kernelsPhase(deadline)

  // the egress proxy: half refused, every answer and event checked
  const { done: proxyDone, ms: proxyMs, check: proxyCheck } = await proxyPhase(args.proxy)

  // egress through one machine: an in-box client, half refused, measured at three marks
  const { done: boxDone, ms: boxMs, check: boxCheck, result: boxResult } = await boxEgressPhase(args.box)

  // one machine paused and resumed, forked and snapshotted, measured at three marks
  const {
    done: cyclesDone,
    ms: cyclesMs,
    check: cyclesCheck,
    result: cyclesResult,
  } = await cyclesPhase(args.cycles, args.cyclesEvery)

  // a session closed while calls are still running (close() must stop them)
  await closeWhileRunning()

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
  console.log(`egress proxy: ${proxyDone}/${args.proxy} requests (half refused) in ${(proxyMs / 1000).toFixed(1)} s`)
  console.log(
    `machine egress: ${boxDone}/${args.box} requests from inside one machine (half refused) in ${(boxMs / 1000).toFixed(1)} s`,
  )
  console.log(
    `machine cycles: ${cyclesDone}/${args.cycles} pause/resume cycles (fork and snapshot every ${args.cyclesEvery}) in ${(cyclesMs / 1000).toFixed(1)} s`,
  )
  if (seqDone < args.seq || concDone < args.conc || cellsDone < args.cells || proxyDone < args.proxy)
    console.log(`WARNING: the ${args.minutes} min cap stopped the run early`)
  const rows = Object.entries(tally).sort(([a], [b]) => a.localeCompare(b))
  for (const [k, v] of rows)
    console.log(
      `  ${k.padEnd(22)} ${String(v.n).padStart(5)} calls, ${String(v.bad).padStart(3)} unexpected, mean ${(v.ms / Math.max(1, v.n)).toFixed(0)} ms`,
    )
  console.log(
    `  callbacks: ${counters.stdoutBytes} stdout bytes and ${counters.stderrBytes} stderr bytes streamed, ${counters.callbackThrows} throwing-callback calls, ${counters.perCallChunks} per-call chunks`,
  )

  const { checks, fdsNew, fdsGone } = runChecks(before, after, rssHwm0, rssHwm)
  if (proxyCheck) checks.splice(checks.length - 1, 0, proxyCheck)
  if (boxCheck) checks.splice(checks.length - 1, 0, boxCheck)
  if (cyclesCheck) checks.splice(checks.length - 1, 0, cyclesCheck)
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
          plan: {
            seq: args.seq,
            conc: args.conc,
            cells: args.cells,
            proxy: args.proxy,
            box: args.box,
            cycles: args.cycles,
            cyclesEvery: args.cyclesEvery,
            minutes: args.minutes,
          },
          done: {
            seq: seqDone,
            conc: concDone,
            cells: cellsDone,
            proxy: proxyDone,
            box: boxDone,
            cycles: cyclesDone,
          },
          kernels: {
            opened: kstats.opened - kstart.opened,
            closed: kstats.closed - kstart.closed,
            cells: kstats.cells - kstart.cells,
          },
          ms: {
            seq: seqMs,
            conc: concMs,
            cells: cellsMs,
            proxy: proxyMs,
            box: boxMs,
            cycles: cyclesMs,
            total: totalMs,
          },
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
          boxEgress: boxResult ?? null,
          cycles: cyclesResult ?? null,
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
