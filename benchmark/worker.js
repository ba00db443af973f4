'use strict'
// One measurement in a fresh Node process, so RSS peaks, heaps and event-loop state never leak
// from one measurement into the next. run.js starts it as `node worker.js '<json spec>'` with
// KERN_BIN set for the row; the result is the last stdout line, prefixed with RESULT_TAG.

const fs = require('fs')
const path = require('path')
const crypto = require('crypto')
const { spawn } = require('child_process')
const { performance, monitorEventLoopDelay } = require('perf_hooks')

const RESULT_TAG = '@@RESULT '

const spec = JSON.parse(process.argv[2])

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

function load() {
  return require(spec.module)
}

async function openSandbox(opts = {}) {
  const { Sandbox } = load()
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
  const args = bareArgs(tpl)
  return new Promise((resolve) => {
    const child = spawn(tpl.kern, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
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

/** The floor under a warm kernel: a resident python3 in a bare box (the argv our binding builds,
 * its command swapped for this loop), one length-prefixed frame each way per cell (kind byte, u32
 * LE length, payload, as our driver's protocol), execing the cell with print() framed straight
 * onto the pipe. No capture, no tail expression, no interrupts, no output cap: only the pipes,
 * the box and the interpreter. */
const FLOOR_PY = `
import os, struct, sys
H = struct.Struct("<BI")
inp, out = os.dup(0), os.dup(1)
class W:
    def write(self, s):
        b = s.encode()
        os.write(out, H.pack(111, len(b)) + b) if len(b) < 65536 else os.writev(out, [H.pack(111, len(b)), b])
        return len(s)
    def flush(self):
        pass
sys.stdout = W()
buf = bytearray()
def take(n):
    while len(buf) < n:
        c = os.read(inp, 1 << 16)
        if not c:
            sys.exit(0)
        buf.extend(c)
    v = bytes(buf[:n])
    del buf[:n]
    return v
ns = {"__name__": "__main__"}
os.write(out, H.pack(82, 0))
while True:
    _, n = H.unpack(take(5))
    exec(compile(take(n).decode(), "<cell>", "exec"), ns)
    os.write(out, H.pack(100, 1) + b"0")
`

/** The same floor under a warm JavaScript kernel: a resident node reading frames on fd 0 (node
 * streams), running each cell with vm.runInThisContext, console.log framed straight onto fd 1.
 * No preparation, no trailing value, no capture of anything else, no interrupts. */
const FLOOR_JS = `
const fs = require('fs'), vm = require('vm'), net = require('net')
function frame(kind, s) {
  const b = Buffer.from(s), h = Buffer.alloc(5)
  h[0] = kind
  h.writeUInt32LE(b.length, 1)
  fs.writeSync(1, b.length < 65536 ? Buffer.concat([h, b]) : h)
  if (b.length >= 65536) fs.writeSync(1, b)
}
console.log = (...a) => frame(111, a.join(' ') + '\\n')
let buf = Buffer.alloc(0)
const input = new net.Socket({ fd: 0, readable: true, writable: false })
input.on('data', (c) => {
  buf = buf.length ? Buffer.concat([buf, c]) : c
  while (buf.length >= 5) {
    const n = buf.readUInt32LE(1)
    if (buf.length < 5 + n) break
    const code = buf.subarray(5, 5 + n).toString()
    buf = buf.subarray(5 + n)
    vm.runInThisContext(code)
    frame(100, '0')
  }
})
input.on('end', () => process.exit(0))
frame(82, '')
`

/** A framed ping-pong with a resident interpreter, Node streams on this side. */
function pipeFloor(tpl, language) {
  const args = bareArgs(tpl)
  const dash = args.indexOf('--')
  const t = args.indexOf('--timeout')
  if (t >= 0 && t < dash) args[t + 1] = '3600'
  args.splice(
    dash + 1,
    args.length,
    ...(language === 'javascript' ? ['node', '-e', FLOOR_JS] : ['python3', '-c', FLOOR_PY]),
  )
  const child = spawn(tpl.kern, args, { detached: true, stdio: ['pipe', 'pipe', 'ignore'] })
  let pending = Buffer.alloc(0)
  let waiter = null
  let out = []
  child.stdout.on('data', (c) => {
    pending = pending.length ? Buffer.concat([pending, c]) : c
    while (pending.length >= 5) {
      const n = pending.readUInt32LE(1)
      if (pending.length < 5 + n) break
      const kind = pending[0]
      const body = pending.subarray(5, 5 + n)
      pending = pending.subarray(5 + n)
      if (kind === 111) out.push(body)
      else if (waiter) {
        const w = waiter
        waiter = null
        const stdout = Buffer.concat(out).toString('utf8')
        out = []
        w({ exitCode: Number(body.toString()) || 0, fault: null, stdout })
      }
    }
  })
  const next = () => new Promise((resolve) => (waiter = resolve))
  return {
    ready: next(),
    runCode(code) {
      const src = Buffer.from(code)
      const head = Buffer.alloc(5)
      head[0] = 99
      head.writeUInt32LE(src.length, 1)
      child.stdin.write(Buffer.concat([head, src]))
      return next()
    },
    close() {
      child.stdin.end()
      return new Promise((resolve) => child.on('close', resolve))
    },
  }
}

const modes = {
  /** Warm-kernel cells: per-cell round trip (ms) for each of spec.cells, one kernel. */
  async kernel() {
    let s = null
    let k
    if (spec.impl === 'floor') {
      k = pipeFloor(spec.bare, spec.language)
      await k.ready
    } else {
      s = await openSandbox()
      // 0.1.23 takes no options; a language only for ours.
      k = await (spec.language ? s.kernel({ language: spec.language }) : s.kernel())
    }
    const out = {}
    const cpu0 = process.cpuUsage()
    let calls = 0
    const timed = async (name, code) => {
      const t = now()
      const r = await k.runCode(code)
      const cell = (out[name] ||= { samples: [], failed: 0 })
      cell.samples.push(now() - t)
      if (!ok(r)) cell.failed++
      calls++
    }
    const cells = Object.entries(spec.cells)
    if (spec.interleave) {
      // Cells compared with each other take turns, so drifting load hits them alike.
      for (let i = 0; i < spec.warmup; i++) for (const [, code] of cells) await k.runCode(code)
      for (let i = 0; i < spec.n; i++) for (const [name, code] of cells) await timed(name, code)
    } else {
      for (const [name, code] of cells) {
        for (let i = 0; i < spec.warmup; i++) await k.runCode(code)
        for (let i = 0; i < spec.n; i++) await timed(name, code)
      }
    }
    const cpu = process.cpuUsage(cpu0)
    const t = now()
    await k.close()
    const closeMs = now() - t
    if (s) await s.close()
    return { cells: out, closeMs, cpuMsPerCall: (cpu.user + cpu.system) / 1000 / calls }
  },

  /** Kernel start to first result (ms per kernel, closed after), beside a one-shot box running
   * spec.command (its start-to-exit). */
  async kernelStart() {
    const s = await openSandbox()
    const kernel = []
    const box = []
    let failed = 0
    for (let i = 0; i < spec.warmup + spec.n; i++) {
      let t = now()
      const k = await s.kernel({ language: spec.language })
      const r = await k.runCode(spec.cell)
      const ms = now() - t
      if (!ok(r) || r.results.length !== 1) failed++
      await k.close()
      t = now()
      const b = await s.run(spec.command)
      const boxMs = now() - t
      if (!ok(b)) failed++
      if (i >= spec.warmup) {
        kernel.push(ms)
        box.push(boxMs)
      }
    }
    await s.close()
    return { kernel, box, failed }
  },

  /** Host-side preparation of a TypeScript cell of spec.lines lines: type stripping alone (amaro,
   * strip-only) and the whole preparation (stripping plus the cell rewrite), ms per cell. */
  async tsPrepare() {
    const amaro = require(require.resolve('amaro', { paths: [spec.module] }))
    const { prepareCell } = require(path.join(spec.module, 'lib', 'jscell.js'))
    const lines = []
    for (let i = 0; i < spec.lines; i++) {
      lines.push(
        i % 4 === 0
          ? `interface Row${i} { id: number; name?: string }`
          : `const v${i}: Array<number> = [${i}, ${i + 1}].map((x: number): number => x * 2)`,
      )
    }
    const code = lines.join('\n')
    const time = (fn) => {
      for (let i = 0; i < spec.warmup; i++) fn()
      const samples = []
      for (let i = 0; i < spec.n; i++) {
        const t = now()
        fn()
        samples.push(now() - t)
      }
      return samples
    }
    return {
      strip: time(() => amaro.transformSync(code, { mode: 'strip-only' })),
      prepare: time(() => prepareCell(code, { typescript: true })),
    }
  },

  /** Sequential run(command) calls: per-call wall time (ms), optional stall monitor. */
  async calls() {
    let call
    let s = null
    if (spec.impl === 'bare') {
      call = () => bareCall(spec.bare)
    } else {
      s = await openSandbox()
      call = spec.code != null ? () => s.runCode(spec.code) : () => s.run(spec.command || ['true'])
    }
    let failed = 0
    let lastError = null
    let files = 0
    const one = async () => {
      try {
        const r = await call()
        if (!ok(r)) {
          failed++
          lastError = r.fault ? `${r.fault.type}: ${r.fault.message}` : `exit ${r.exitCode}`
        }
        files += r.files ? r.files.length : 0
      } catch (e) {
        failed++
        lastError = String(e && e.message)
      }
    }
    for (let i = 0; i < spec.warmup; i++) await one()
    failed = 0
    files = 0
    const mon = spec.stalls ? stallMonitor() : null
    const samples = []
    const cpu0 = process.cpuUsage()
    for (let i = 0; i < spec.n; i++) {
      const t = now()
      await one()
      samples.push(now() - t)
    }
    const cpu = process.cpuUsage(cpu0)
    const stalls = mon ? mon.stop() : null
    if (s) await s.close()
    const cpuMsPerCall = (cpu.user + cpu.system) / 1000 / spec.n
    return { samples, cpuMsPerCall, failed, lastError, files, stalls }
  },

  /** `width` concurrent run(["true"]) on one session, `reps` times. */
  async parallel() {
    const s = await openSandbox()
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
          : `${bad.value.fault ? bad.value.fault.type + ': ' + bad.value.fault.message : 'exit ' + bad.value.exitCode}`
        : null
      if (i >= spec.warmup)
        reps.push({ ms, ok: okCount, callsPerS: (spec.width * 1000) / ms, firstFailure: why && why.slice(0, 300) })
    }
    await s.close()
    return { reps }
  },

  async snapshot() {
    const s = await openSandbox({ workspace: spec.workspace })
    fs.rmSync(spec.dest, { force: true })
    const w = rssWindow()
    const t = now()
    s.snapshot(spec.dest)
    const ms = now() - t
    const rss = w.end()
    await s.close()
    return { ms, ...rss, archiveBytes: fs.statSync(spec.dest).size }
  },

  async restore() {
    fs.rmSync(spec.workspace, { recursive: true, force: true })
    fs.mkdirSync(spec.workspace, { recursive: true })
    const s = await openSandbox({ workspace: spec.workspace })
    const w = rssWindow()
    const t = now()
    s.restore(spec.src)
    const ms = now() - t
    const rss = w.end()
    await s.close()
    const { du } = require('./fixtures')
    const got = du(spec.workspace)
    fs.rmSync(spec.workspace, { recursive: true, force: true })
    return { ms, ...rss, restoredFiles: got.files, restoredBytes: got.bytes }
  },

  /** A fake kern floods stdout; the session caps the capture at spec.cap. */
  async flood() {
    const s = await openSandbox({ maxOutputBytes: spec.cap })
    const w = rssWindow()
    const t = now()
    const r = await s.run(['flood'])
    const ms = now() - t
    const rss = w.end()
    const res = {
      ms,
      ...rss,
      stdoutBytes: Buffer.byteLength(r.stdout),
      truncated: r.truncated,
      exitCode: r.exitCode,
      fault: r.fault,
    }
    await s.close()
    return res
  },

  /** A fake kern writes spec.n distinct lines; every byte must reach onStdout, in order. */
  async stream() {
    const { chunkLine } = require('./fixtures')
    const chunks = []
    // onStdout as a session option: the reference's run() takes no per-call options.
    // spec.perChunkUs: a callback that does some work per chunk; spec.blockMs: the JS thread busy
    // for that long right after the call starts (a slow consumer either way).
    const spin = (ms) => {
      const end = now() + ms
      while (now() < end);
    }
    const onStdout = spec.perChunkUs
      ? (c) => {
          chunks.push(c)
          spin(spec.perChunkUs / 1000)
        }
      : (c) => chunks.push(c)
    const s = await openSandbox({ onStdout })
    const t = now()
    const pending = s.run(['stream'])
    if (spec.blockMs) spin(spec.blockMs)
    const r = await pending
    const ms = now() - t
    await s.close()
    const expected = Buffer.from(Array.from({ length: spec.n }, (_, i) => chunkLine(i)).join(''))
    const got = Buffer.concat(chunks)
    let firstMismatch = -1
    if (!got.equals(expected)) {
      const m = Math.min(got.length, expected.length)
      for (let i = 0; i < m; i++)
        if (got[i] !== expected[i]) {
          firstMismatch = i
          break
        }
      if (firstMismatch < 0) firstMismatch = m
    }
    const lines = got.toString('latin1').split('\n').length - 1
    return {
      ms,
      callbacks: chunks.length,
      deliveredBytes: got.length,
      expectedBytes: expected.length,
      deliveredLines: lines,
      inOrder: firstMismatch < 0,
      firstMismatch,
      resultStdoutMatches: r.stdout === expected.toString('utf8'),
      linesPerS: (spec.n * 1000) / ms,
    }
  },

  /** kern-sandbox/e2b: Sandbox.create() plus its first runCode('1 + 1'), per fresh sandbox (the
   * first one, which loads the modules, is a warmup); then later cells of the last sandbox. */
  async e2b() {
    const { Sandbox } = require(path.join(spec.module, 'lib', 'e2b', 'entry.js'))
    const first = []
    let failed = 0
    let sbx = null
    for (let i = 0; i < spec.warmup + spec.n; i++) {
      if (sbx) await sbx.kill()
      const t = now()
      sbx = await Sandbox.create()
      const ex = await sbx.runCode('1 + 1')
      const ms = now() - t
      if (ex.text !== '2') failed++
      if (i >= spec.warmup) first.push(ms)
    }
    const later = []
    for (let i = 0; i < spec.cells; i++) {
      const t = now()
      const ex = await sbx.runCode('x = 1 + 1')
      later.push(now() - t)
      if (ex.error) failed++
    }
    await sbx.kill()
    return { first, later, failed }
  },

  /** Sequential calls (spec.code, else spec.command) with spec.thinkMs between them; with
   * spec.waitReady each timed call first waits (untimed) for a ready box. Per-call ms and the
   * loop's total (think time included). */
  async prewarm() {
    const s = await openSandbox({ prewarm: spec.prewarm })
    const call = () => (spec.code != null ? s.runCode(spec.code) : s.run(spec.command))
    const pause = (ms) => new Promise((r) => setTimeout(r, ms))
    // A full pool: no box is starting beside the timed call.
    const readyBox = async () => {
      while (spec.prewarm && s.readyBoxes < spec.prewarm) await pause(2)
    }
    let failed = 0
    for (let i = 0; i < spec.warmup; i++) if (!ok(await call())) failed++
    if (spec.prewarm) while (s.readyBoxes < spec.prewarm) await pause(5)
    const samples = []
    const t0 = now()
    for (let i = 0; i < spec.n; i++) {
      if (spec.waitReady) await readyBox()
      const t = now()
      const r = await call()
      samples.push(now() - t)
      if (!ok(r)) failed++
      if (spec.thinkMs) await pause(spec.thinkMs)
    }
    const totalMs = now() - t0
    await s.close()
    return { samples, totalMs, failed }
  },

  /** What spec.prewarm ready boxes cost: the RSS of the processes carrying the waiter's command
   * line (kern and the waiter; pages shared between boxes counted in each), and the CPU of the
   * boxes that were never used (their start and stop), from this process's reaped children. */
  async prewarmCost() {
    const s = await openSandbox({ prewarm: spec.prewarm })
    await (spec.code != null ? s.runCode(spec.code) : s.run(spec.command))
    while (s.readyBoxes < spec.prewarm) await new Promise((r) => setTimeout(r, 5))
    await new Promise((r) => setTimeout(r, 300))
    let rss = 0
    for (const e of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(e)) continue
      try {
        if (!fs.readFileSync(`/proc/${e}/cmdline`, 'latin1').includes('KERN-SANDBOX-READY')) continue
        rss += Number(/^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${e}/status`, 'utf8'))[1]) * 1024
      } catch {}
    }
    const childCpu = () => {
      const stat = fs.readFileSync('/proc/self/stat', 'utf8')
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      return (Number(f[13]) + Number(f[14])) * 10 // cutime + cstime, in ticks of 10 ms
    }
    const cpu0 = childCpu()
    await s.close()
    await new Promise((r) => setTimeout(r, 300))
    return { rssPerBox: rss / spec.prewarm, unusedCpuMsPerBox: (childCpu() - cpu0) / spec.prewarm }
  },

  /** Machines: start + first exec per fresh machine, against one run(['true']) each; then later
   * execs of one machine against `kern exec` into a running box; writeFile/readFile of 1 MiB. */
  async machine() {
    const kernel = require(spec.module)
    const sbx = await new kernel.Sandbox({ prewarm: 0, workspace: spec.workspace }).open()
    const start = []
    const run = []
    let failed = 0
    for (let i = 0; i < spec.warmup + spec.n; i++) {
      let t = now()
      const m = await sbx.machine()
      const r = await m.exec(['true'])
      const ms = now() - t
      await m.close()
      t = now()
      const o = await sbx.run(['true'])
      const runMs = now() - t
      if (r.exitCode !== 0 || o.exitCode !== 0) failed++
      if (i >= spec.warmup) {
        start.push(ms)
        run.push(runMs)
      }
    }
    const m = await sbx.machine()
    const exec = []
    const write = []
    const read = []
    const sbxWrite = []
    const sbxRead = []
    const mib = Buffer.alloc(1 << 20, 'x')
    const timed = async (into, i, fn) => {
      const t = now()
      const v = await fn()
      if (i >= spec.warmup) into.push(now() - t)
      return v
    }
    for (let i = 0; i < spec.warmup + spec.cells; i++) {
      const r = await timed(exec, i, () => m.exec(['true']))
      await timed(write, i, () => m.writeFile('/workspace/bench.bin', mib))
      const back = await timed(read, i, () => m.readFile('/workspace/bench.bin'))
      await timed(sbxWrite, i, () => sbx.writeFile('bench.bin', mib))
      await timed(sbxRead, i, () => sbx.readFile('bench.bin'))
      if (r.exitCode !== 0 || back.length !== mib.length) failed++
    }
    const holdLoop = setInterval(() => {}, 1000)
    const firstByte = []
    for (let i = 0; i < spec.warmup + spec.n; i++) {
      let got
      const seen = new Promise((resolve) => (got = resolve))
      const t = now()
      const p = await m.spawn(['echo', 'x'], { onStdout: () => got(now() - t) })
      const ms = await seen
      await p.wait()
      if (i >= spec.warmup) firstByte.push(ms)
    }
    clearInterval(holdLoop)
    // Output callbacks are weak (a machine never keeps Node alive): a timer holds the loop while
    // the measurements wait on them.
    const keep = setInterval(() => {}, 1000)
    const echo = []
    let onData = () => {}
    const tty = await m.spawn(['cat'], { pty: { cols: 80, rows: 24 }, onData: (d) => onData(d) })
    for (let i = 0; i < spec.warmup + spec.cells; i++) {
      const seen = new Promise((resolve) => (onData = resolve))
      const t = now()
      await tty.write('k')
      await seen
      if (i >= spec.warmup) echo.push(now() - t)
    }
    await tty.kill()
    clearInterval(keep)
    await m.close()
    await sbx.close()
    return { start, run, exec, write, read, sbxWrite, sbxRead, firstByte, echo, failed }
  },

  /** Records the argv our binding hands kern (the fake kern writes it to a file). */
  async argv() {
    const s = await openSandbox({ workspace: spec.workspace })
    await s.run(['true'])
    await s.close()
    return {}
  },
}

async function main() {
  let result
  try {
    result = await modes[spec.mode]()
  } catch (e) {
    result = { error: String((e && e.stack) || e) }
  }
  process.stdout.write(`\n${RESULT_TAG}${JSON.stringify(result)}\n`)
  process.exit(0)
}

main()
