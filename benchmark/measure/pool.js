'use strict'
// Worker side (run in a fresh `node benchmark/worker.js` process): ready boxes, calls with and
// without them, and what a ready box costs.

const fs = require('fs')
const { now, openSandbox, ok } = require('../lib/probe')

module.exports = {
  /** Sequential calls (spec.code, else spec.command) with spec.thinkMs between them; with
   * spec.waitReady each timed call first waits (untimed) for a ready box. Per-call ms and the
   * loop's total (think time included). */
  async prewarm(spec) {
    const s = await openSandbox(spec, { prewarm: spec.prewarm })
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
  async prewarmCost(spec) {
    const s = await openSandbox(spec, { prewarm: spec.prewarm })
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
}
