'use strict'
// The warm-up before the baseline: every kind of call and cell once, then bursts, so thread pools,
// allocator arenas and the kernel machinery's lazily created state exist before the figures the
// checks compare against are taken.

const ctx = require('./context')
const { WORKLOADS, runOne, oneShot } = require('./calls')
const { CELL_MIX, SoakKernel, kernelPhase, why } = require('./kernels')

const { kern, MAX_OUT, sh, problems } = ctx
const { Sandbox } = kern

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
  await Promise.all(Array.from({ length: ctx.args.conc }, () => s.run(sh('echo warm'), { timeoutS: 120 })))
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
  for (let i = 0; i < Math.min(ctx.args.cells, 6000); i++) await warm.runCode(`w = ${i}\nprint(w)`)
  await warm.close()
  await ks.close()
}

module.exports = { warmUp }
