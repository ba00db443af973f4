'use strict'
// Worker side (run in a fresh `node benchmark/worker.js` process): sequential and concurrent
// calls through a session (ours or a reference), a bare box with our argv, or the bare kern CLI;
// and the argv our binding hands kern. The binding, one-shot and CLI families share these modes.

const { spawn } = require('child_process')
const { now, stallMonitor, openSandbox, ok, bareCall, cliCall } = require('../lib/probe')

/** How many calls a block has when a spawn floor takes turns with them. */
const FLOOR_BLOCK = 10

/** The spawn floor (lib/fixtures.js spawnFloor: it reads block sizes on stdin) taking turns with this
 * worker's calls block by block, so that a host whose speed drifts (this one's spawn cost moves
 * between two levels for seconds at a time) moves the calls and their floor alike. */
function floorTurns({ bin, program }) {
  const child = spawn(bin, [program], { stdio: ['pipe', 'pipe', 'pipe'] })
  let out = ''
  let waiting = null
  const settle = () => {
    const end = out.indexOf('end\n')
    if (!waiting || end < 0) return
    const samples = out.slice(0, end).split('\n').filter(Boolean).map(Number)
    out = out.slice(end + 4)
    const w = waiting
    waiting = null
    w.resolve(samples)
  }
  const fail = (why) => {
    if (waiting) waiting.reject(new Error(`the spawn floor ${why}`))
    waiting = null
  }
  child.stdout.setEncoding('utf8')
  child.stdout.on('data', (c) => {
    out += c
    settle()
  })
  child.on('error', (e) => fail(`failed: ${e.message}`))
  child.on('exit', (code, signal) => fail(`exited (${signal || code})`))
  return {
    /** `n` floor calls: their times (ms). */
    run(n) {
      return new Promise((resolve, reject) => {
        waiting = { resolve, reject }
        child.stdin.write(`${n}\n`)
      })
    },
    close() {
      child.stdin.end()
    },
  }
}

/** What a call that did not succeed came to: its fault, else its exit code. */
const failure = (r) => (r.fault ? `${r.fault.type}: ${r.fault.message}` : `exit ${r.exitCode}`)

/** Counts the calls made through `run` that failed or rejected, keeping the last one's reason;
 * `run` gives the result (null for a rejection). */
function tally() {
  const t = {
    failed: 0,
    lastError: null,
    async run(call) {
      try {
        const r = await call()
        if (!ok(r)) {
          t.failed++
          t.lastError = failure(r)
        }
        return r
      } catch (e) {
        t.failed++
        t.lastError = String(e && e.message)
        return null
      }
    },
  }
  return t
}

module.exports = {
  /** Sequential run(command) calls: per-call wall time (ms), optional stall monitor. With
   * `spec.floor` ({ bin, program }) the spawn floor takes turns with them, FLOOR_BLOCK calls at a
   * time, which of the two goes first swapping each block: its times come back as floorSamples. */
  async calls(spec) {
    let call
    let s = null
    if (spec.impl === 'bare') {
      call = () => bareCall(spec.bare)
    } else if (spec.impl === 'cli') {
      call = () => cliCall(process.env.KERN_BIN, spec.cli)
    } else {
      s = await openSandbox(spec)
      call = spec.code != null ? () => s.runCode(spec.code) : () => s.run(spec.command || ['true'])
    }
    let t = tally()
    let files = 0
    const one = async () => {
      const r = await t.run(call)
      if (r && r.files) files += r.files.length
    }
    const floor = spec.floor ? floorTurns(spec.floor) : null
    const floorSamples = []
    for (let i = 0; i < spec.warmup; i++) await one()
    if (floor) await floor.run(spec.warmup)
    t = tally()
    files = 0
    const mon = spec.stalls ? stallMonitor() : null
    const samples = []
    // CPU is counted over our own calls only, not while the floor has its turn.
    let cpuUs = 0
    const block = floor ? FLOOR_BLOCK : spec.n
    try {
      for (let i = 0; i < spec.n; i += block) {
        const k = Math.min(block, spec.n - i)
        const floorFirst = floor && (i / block) % 2 === 1
        if (floorFirst) floorSamples.push(...(await floor.run(k)))
        const cpu0 = process.cpuUsage()
        for (let j = 0; j < k; j++) {
          const t = now()
          await one()
          samples.push(now() - t)
        }
        const cpu = process.cpuUsage(cpu0)
        cpuUs += cpu.user + cpu.system
        if (floor && !floorFirst) floorSamples.push(...(await floor.run(k)))
      }
    } finally {
      if (floor) floor.close()
    }
    const stalls = mon ? mon.stop() : null
    if (s) await s.close()
    const cpuMsPerCall = cpuUs / 1000 / spec.n
    const res = { samples, cpuMsPerCall, failed: t.failed, lastError: t.lastError, files, stalls }
    if (floor) res.floorSamples = floorSamples
    return res
  },

  /** Two kinds of call taking turns on one session (spec.a and spec.b: `{ code }` for runCode,
   * `{ command }` for run), which of them goes first swapping each pair, so a host that drifts
   * moves both alike: each one's per-call wall times, pair by pair. */
  async paired(spec) {
    const s = await openSandbox(spec)
    const call = (x) => () => (x.code != null ? s.runCode(x.code) : s.run(x.command))
    let t = tally()
    const timed = async (x) => {
      const t0 = now()
      await t.run(call(x))
      return now() - t0
    }
    for (let i = 0; i < spec.warmup; i++) {
      await timed(spec.a)
      await timed(spec.b)
    }
    t = tally()
    const a = []
    const b = []
    for (let i = 0; i < spec.n; i++) {
      if (i % 2) {
        b.push(await timed(spec.b))
        a.push(await timed(spec.a))
      } else {
        a.push(await timed(spec.a))
        b.push(await timed(spec.b))
      }
    }
    await s.close()
    return { a, b, failed: t.failed, lastError: t.lastError }
  },

  /** `width` concurrent run(["true"]) on one session, `reps` times. */
  async parallel(spec) {
    const s = await openSandbox(spec)
    const reps = []
    for (let i = 0; i < spec.warmup + spec.reps; i++) {
      const t = now()
      const rs = await Promise.allSettled(Array.from({ length: spec.width }, () => s.run(['true'])))
      const ms = now() - t
      const okCount = rs.filter((r) => r.status === 'fulfilled' && ok(r.value)).length
      const bad = rs.find((r) => !(r.status === 'fulfilled' && ok(r.value)))
      const why = bad
        ? bad.status === 'rejected'
          ? String(bad.reason && bad.reason.message)
          : failure(bad.value)
        : null
      if (i >= spec.warmup)
        reps.push({ ms, ok: okCount, callsPerS: (spec.width * 1000) / ms, firstFailure: why && why.slice(0, 300) })
    }
    await s.close()
    return { reps }
  },

  /** Records the argv our binding hands kern (the fake kern writes it to a file). */
  async argv(spec) {
    const s = await openSandbox(spec, { workspace: spec.workspace })
    await s.run(['true'])
    await s.close()
    return {}
  },
}
