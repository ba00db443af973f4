'use strict'
// The call scenarios: one-shot calls through long-lived sessions (successes, timeouts, kills,
// floods, cancellations, each checked for the outcome its workload must produce), calls through a
// session made for one call, run sequentially and all at once.

const path = require('node:path')
const ctx = require('./context')

const { kern, MARKER, MAX_OUT, SOAK_DIR, rnd, pick, weighted, sh, counters, tally, problems, state } = ctx
const { Sandbox, withSandbox } = kern
let seqNo = 0

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
const nextKind = () => weighted(MIX)

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
  if (outcome.hung) state.hungCalls++
  const problem = w.check(outcome)
  const t = (tally[`${phase}:${w.kind}`] ??= { n: 0, bad: 0, ms: 0 })
  t.n++
  t.ms += Date.now() - started
  if (problem) {
    t.bad++
    problems.push(`${phase} ${w.kind}: ${problem}`)
  }
  if (ctx.args.verbose)
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

/** The long-lived sessions the call phases spread their calls over. */
async function openSessions() {
  const sessions = []
  for (const spec of sessionSpecs()) {
    const s = await new Sandbox({ maxOutputBytes: MAX_OUT, ...spec.opts }).open()
    sessions.push({ name: spec.name, s })
  }
  return sessions
}

/** ctx.args.seq calls one after the other (every 50th through a one-shot session). */
async function sequentialPhase(sessions, deadline) {
  let seqDone = 0
  const tSeq = Date.now()
  for (let i = 0; i < ctx.args.seq; i++) {
    if (Date.now() > deadline) break
    if (i % 50 === 25) await oneShot('seq')
    else await runOne(sessions[i % sessions.length].s, WORKLOADS[nextKind()](), 'seq')
    seqDone++
    if (!ctx.args.verbose && seqDone % 100 === 0)
      console.log(`  sequential: ${seqDone}/${ctx.args.seq} (${((Date.now() - tSeq) / 1000).toFixed(0)} s)`)
  }
  return { done: seqDone, ms: Date.now() - tSeq }
}

/** ctx.args.conc calls all launched at once, spread over the sessions (and a few one-shot sessions). */
async function concurrentPhase(sessions, deadline) {
  let concDone = 0
  const tConc = Date.now()
  if (Date.now() <= deadline && ctx.args.conc > 0) {
    const calls = []
    for (let i = 0; i < ctx.args.conc; i++) {
      if (i % 40 === 39) calls.push(oneShot('conc'))
      else calls.push(runOne(sessions[i % sessions.length].s, WORKLOADS[nextKind()](), 'conc'))
    }
    await Promise.all(calls)
    concDone = ctx.args.conc
  }
  return { done: concDone, ms: Date.now() - tConc }
}

module.exports = { WORKLOADS, runOne, oneShot, openSessions, sequentialPhase, concurrentPhase }
