'use strict'
// Worker side (run in a fresh `node benchmark/worker.js` process): machines' start, exec, first
// output byte, PTY echo and 1 MiB files.

const { now } = require('../lib/probe')

module.exports = {
  /** Machines: start + first exec per fresh machine, against one run(['true']) each; then later
   * execs of one machine against `kern exec` into a running box; writeFile/readFile of 1 MiB. */
  async machine(spec) {
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

  /** Pause + resume round trips of one machine that runs a small process tree (a shell, a Python
   * loop and an http.server): pause() alone, resume() alone and the pair; an exec after each
   * resume checks the machine came back. */
  async pause(spec) {
    const kernel = require(spec.module)
    const sbx = await new kernel.Sandbox({ prewarm: 0, workspace: spec.workspace }).open()
    const m = await sbx.machine()
    await m.spawn(['python3', '-m', 'http.server', '8000', '--bind', '127.0.0.1', '-d', '/tmp'])
    await m.spawn(['sh', '-c', 'while true; do sleep 0.1; done'])
    await m.spawn(['python3', '-c', 'import time\nwhile True: time.sleep(0.01)'])
    // The box's processes, less the counting shell itself.
    const procs = Number((await m.exec(['sh', '-c', 'set -- /proc/[0-9]*; echo $(($# - 1))'])).stdout.trim())
    const pause = []
    const resume = []
    const trip = []
    let failed = 0
    for (let i = 0; i < spec.warmup + spec.n; i++) {
      const t0 = now()
      await m.pause()
      const t1 = now()
      await m.resume()
      const t2 = now()
      if (i >= spec.warmup) {
        pause.push(t1 - t0)
        resume.push(t2 - t1)
        trip.push(t2 - t0)
      }
      if ((await m.exec(['true'])).exitCode !== 0) failed++
    }
    await m.close()
    await sbx.close()
    return { pause, resume, trip, procs, failed }
  },
}
