'use strict'
// What the measuring processes (benchmark/worker.js and the modes under benchmark/measure/) share:
// a clock, peak-RSS windows, an event-loop stall monitor, opening a session of the implementation
// a spec names, and spawning a bare kern box with the argv our binding builds.

const fs = require('fs')
const path = require('path')
const crypto = require('crypto')
const { spawn } = require('child_process')
const { performance, monitorEventLoopDelay } = require('perf_hooks')

function now() {
  return performance.now()
}

function status() {
  const s = fs.readFileSync('/proc/self/status', 'utf8')
  const kb = (k) => Number((new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(s) || [])[1] || 0) * 1024
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') }
}

/** Starts a peak-RSS window: resets VmHWM to the current RSS (`5` > clear_refs, Linux ≥ 4.0). */
function rssWindow() {
  let reset = true
  try {
    fs.writeFileSync('/proc/self/clear_refs', '5')
  } catch {
    reset = false // VmHWM then includes anything before; still a fresh process per measurement
  }
  const base = status().rss
  return {
    end() {
      const s = status()
      return { baseRss: base, peakRss: s.hwm, growth: s.hwm - base, hwmReset: reset }
    },
  }
}

/** Main-thread stalls, three views: the lateness of a 1 ms setInterval (what a user feels), the
 * same minus the time the JS thread spent waiting for a CPU in that interval (from
 * /proc/self/task/<pid>/schedstat: on a loaded machine most lateness is the OS not running us,
 * not work on the JS thread), and perf_hooks' event-loop-delay histogram as a cross-check. */
function stallMonitor() {
  let fd = null
  const buf = Buffer.alloc(128)
  try {
    fd = fs.openSync(`/proc/self/task/${process.pid}/schedstat`, 'r')
  } catch {}
  const waitMs = () => {
    if (fd === null) return 0
    const n = fs.readSync(fd, buf, 0, buf.length, 0)
    return Number(buf.toString('latin1', 0, n).split(' ')[1]) / 1e6
  }
  let last = now()
  let lastWait = waitMs()
  let max = 0
  let maxOwn = 0
  const timer = setInterval(() => {
    const t = now()
    const w = waitMs()
    const lag = t - last - 1
    const own = lag - (w - lastWait)
    if (lag > max) max = lag
    if (own > maxOwn) maxOwn = own
    last = t
    lastWait = w
  }, 1)
  const h = monitorEventLoopDelay({ resolution: 1 })
  h.enable()
  return {
    stop() {
      clearInterval(timer)
      h.disable()
      if (fd !== null) fs.closeSync(fd)
      return {
        intervalMaxMs: Math.max(0, max),
        ownMaxMs: fd === null ? null : Math.max(0, maxOwn),
        eldMaxMs: h.max / 1e6,
        eldP99Ms: h.percentile(99) / 1e6,
      }
    },
  }
}

/** An open session of the implementation at spec.module, with spec.sandbox's options. */
async function openSandbox(spec, opts = {}) {
  const { Sandbox } = require(spec.module)
  // Rows measure the cold path (a box started per call) unless they ask for ready boxes.
  const s = new Sandbox({ prewarm: 0, ...spec.sandbox, ...opts })
  await s.open()
  return s
}

const ok = (r) => r && r.exitCode === 0 && r.fault == null

/** The bare `kern box … -- true`, spawned like the reference spawns kern (detached, stdin ignored,
 * stdout/stderr piped and collected), with the argv our binding builds. Only the box name (must be
 * unique) and the env file (ours lives in its private dir) are swapped; the env file is written
 * once, outside the timed calls. */
let bareEnvFile = null
function bareArgs(tpl) {
  const name = `jssbx-${crypto.randomBytes(6).toString('hex')}`
  const args = tpl.argv.slice()
  args[1] = name
  const envAt = args.indexOf('--env-file')
  if (envAt >= 0) {
    if (!bareEnvFile) {
      bareEnvFile = path.join(tpl.privateDir, `env-bare-${process.pid}`)
      fs.writeFileSync(bareEnvFile, tpl.envBody, { mode: 0o600 })
    }
    args[envAt + 1] = bareEnvFile
  }
  return args
}

function bareCall(tpl) {
  return spawnKern(tpl.kern, bareArgs(tpl))
}

/** The bare kern CLI as a user types it: spec.cli is kern's argv with `NAME` where the box name
 * goes (a fresh one per call), spawned straight from Node, no library. */
function cliCall(kern, argv) {
  const name = `bench-cli-${crypto.randomBytes(6).toString('hex')}`
  return spawnKern(
    kern,
    argv.map((a) => (a === 'NAME' ? name : a)),
  )
}

/** kern spawned like the reference spawns it: detached, stdin ignored, stdout/stderr piped and
 * collected; resolves to { exitCode, fault } once it has exited and its pipes are drained. */
function spawnKern(kern, args) {
  return new Promise((resolve) => {
    const child = spawn(kern, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
    const out = []
    const err = []
    child.stdout.on('data', (c) => out.push(c))
    child.stderr.on('data', (c) => err.push(c))
    child.on('error', (e) => resolve({ exitCode: -1, fault: { type: 'spawn', message: e.message } }))
    child.on('close', (code) => {
      Buffer.concat(out).toString('utf8') // what a binding does with it too
      const stderr = Buffer.concat(err).toString('utf8')
      resolve({ exitCode: code, fault: code === 0 ? null : { type: 'exit', message: stderr.slice(0, 300) } })
    })
  })
}

module.exports = { now, status, rssWindow, stallMonitor, openSandbox, ok, bareArgs, bareCall, cliCall }
