'use strict'
// The warm-kernel scenario: cells on a few warm kernels at once, checked against the state the
// soak keeps for each kernel; errors, interrupts (obeyed and ignored), per-cell timeouts, output
// past the cap, a dying interpreter, bursts queued without awaiting, kernels closed with cells
// still queued and opened anew.

const ctx = require('./context')

const { kern, MARKER, MAX_OUT, rnd, weighted, counters, tally, problems, state } = ctx
const { Sandbox } = kern

const KERNELS_AT_ONCE = 3
const CELL_MIX = [
  ['plain', 50],
  ['value', 15],
  ['error', 8],
  ['burst', 8],
  ['interrupt', 6],
  ['preabort', 2],
  ['deaf', 1],
  ['timeout', 2],
  ['cap', 2],
  ['die', 2],
  ['reopen', 2],
  ['closeQueued', 2],
]
const nextCell = () => weighted(CELL_MIX)

const kstats = { opened: 0, closed: 0, cells: 0 }
const cellOut = (r) =>
  `exit ${r.exitCode} fault ${JSON.stringify(r.fault)} stdout ${JSON.stringify(String(r.stdout).slice(0, 80))} results ${JSON.stringify(r.results.map((x) => x.text))} error ${JSON.stringify(r.error)}`
const why = (e) => `${e && e.name}: ${e && e.message}`

/** A warm kernel and `acc`, the value its `acc` variable must hold. */
class SoakKernel {
  constructor(session) {
    this.session = session
    this.k = null
    this.acc = 0
  }

  async open() {
    this.k = await this.session.kernel({ timeoutS: 60 })
    kstats.opened++
    this.acc = 0
    const r = await this.k.runCode(`acc = 0  # ${MARKER}`)
    return r.exitCode === 0 ? null : `the first cell of a new kernel: ${cellOut(r)}`
  }

  /** After a cell that must end the kernel: dead, later cells refused, then a new one. */
  async replaced() {
    if (this.k.alive) return 'the kernel is still alive after a cell that must end it'
    const later = await this.k.runCode('1').then(
      () => 'a dead kernel ran a cell',
      (e) => (e.name === 'SandboxError' && /closed/.test(e.message) ? null : `a dead kernel's refusal: ${why(e)}`),
    )
    kstats.closed++
    return later || (await this.open())
  }

  cellOptions() {
    const o = {}
    const r = rnd(8)
    if (r === 0) o.onStdout = () => counters.perCallChunks++
    if (r === 1) o.timeoutS = 30
    return o
  }

  /** Runs one workload of `kind`; a problem string, or null when every outcome was right. */
  async run(kind) {
    const k = this.k
    const n = rnd(1_000_000)
    switch (kind) {
      case 'plain': {
        const want = this.acc + n
        this.acc = want
        const r = await k.runCode(`acc += ${n}\nprint("p", acc)`, this.cellOptions())
        return r.exitCode === 0 && r.fault === null && r.stdout === `p ${want}\n` && r.results.length === 0
          ? null
          : cellOut(r)
      }
      case 'value': {
        const r = await k.runCode(`acc * 2 + ${n}`, this.cellOptions())
        const v = r.results[0]
        return r.exitCode === 0 && r.results.length === 1 && v.isMainResult && v.text === String(this.acc * 2 + n)
          ? null
          : cellOut(r)
      }
      case 'error': {
        const r = await k.runCode(`def f():\n    raise ValueError("e${n}")\nf()`)
        const e = r.error
        return r.exitCode === 1 && r.fault === null && e && e.name === 'ValueError' && e.value === `e${n}` && k.alive
          ? null
          : cellOut(r)
      }
      case 'burst': {
        // queued without awaiting: they must run in call order
        const m = 2 + rnd(7)
        const wants = []
        const ps = []
        for (let i = 0; i < m; i++) {
          this.acc += i + 1
          wants.push(`${this.acc}\n`)
          ps.push(k.runCode(`acc += ${i + 1}\nprint(acc)`))
        }
        const rs = await Promise.allSettled(ps)
        kstats.cells += m - 1
        const bad = rs.findIndex(
          (x, i) => x.status !== 'fulfilled' || x.value.stdout !== wants[i] || x.value.exitCode !== 0,
        )
        return bad < 0
          ? null
          : `burst cell ${bad}/${m}: ${rs[bad].status === 'fulfilled' ? cellOut(rs[bad].value) : why(rs[bad].reason)}`
      }
      case 'interrupt': {
        // obeyed: KeyboardInterrupt ends the cell, the kernel and its state stay
        const ac = new AbortController()
        const custom = rnd(2) === 0
        const reason = custom ? new Error('soak-stop') : undefined
        const got = await k
          .runCode('import time\nprint("z", flush=True)\ntime.sleep(30)', {
            signal: ac.signal,
            onStdout: () => ac.abort(reason),
          })
          .then(
            (r) => `an aborted cell resolved: ${cellOut(r)}`,
            (e) => ((custom ? e === reason : e.name === 'AbortError') ? null : `rejected with ${why(e)}`),
          )
        return got || (k.alive ? null : 'the kernel died of an obeyed interrupt')
      }
      case 'preabort': {
        const ac = new AbortController()
        ac.abort()
        const got = await k.runCode(`acc += 1`, { signal: ac.signal }).then(
          (r) => `a pre-aborted cell ran: ${cellOut(r)}`,
          (e) => (e.name === 'AbortError' ? null : `rejected with ${why(e)}`),
        )
        return got || (k.alive ? null : 'a pre-aborted cell ended the kernel')
      }
      case 'deaf': {
        // ignored: the kernel is torn down after the grace
        const ac = new AbortController()
        const got = await k
          .runCode(
            'import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint("deaf", flush=True)\nwhile True:\n    time.sleep(0.05)',
            {
              signal: ac.signal,
              onStdout: () => ac.abort(),
            },
          )
          .then(
            (r) => `a deaf aborted cell resolved: ${cellOut(r)}`,
            (e) => (e.name === 'AbortError' ? null : `rejected with ${why(e)}`),
          )
        return got || (await this.replaced())
      }
      case 'timeout': {
        const r = await k.runCode('print("spin", flush=True)\nwhile True:\n    pass', { timeoutS: 0.3 })
        return r.fault && r.fault.type === 'timeout' && r.stdout === 'spin\n' ? await this.replaced() : cellOut(r)
      }
      case 'cap': {
        const r = await k.runCode(`print("c" * ${MAX_OUT + 1000 + rnd(50_000)})`)
        return r.fault && r.fault.type === 'killed' && /cap/.test(r.fault.message) ? await this.replaced() : cellOut(r)
      }
      case 'die': {
        const code = 3 + rnd(100)
        const r = await k.runCode(`import os\nos._exit(${code})`)
        return r.fault && r.fault.type === 'killed' && r.fault.message.includes(`exit code ${code}`)
          ? await this.replaced()
          : cellOut(r)
      }
      case 'reopen': {
        await k.close()
        kstats.closed++
        if (k.alive) return 'alive after close()'
        return this.open()
      }
      case 'closeQueued': {
        // close() with a cell running and two queued: all three reject, none hangs
        const ps = [
          k.runCode('import time\nprint("long", flush=True)\ntime.sleep(30)', { onStdout: () => k.close() }),
          k.runCode('acc'),
          k.runCode('acc'),
        ]
        const rs = await Promise.allSettled(ps)
        kstats.cells += 2
        const bad = rs.find((x) => x.status !== 'rejected' || x.reason.name !== 'SandboxError')
        kstats.closed++
        if (bad)
          return `close() with cells queued: ${bad.status === 'fulfilled' ? cellOut(bad.value) : why(bad.reason)}`
        return this.open()
      }
    }
    return `unknown cell kind ${kind}`
  }
}

/** Cells on KERNELS_AT_ONCE warm kernels at once, each kernel's cells in sequence. */
async function kernelPhase(session, cells, deadline, phase = 'kernel') {
  let left = cells
  const one = async (sk) => {
    const p = await sk.open()
    if (p) problems.push(`${phase} open: ${p}`)
    while (left > 0 && Date.now() < deadline) {
      left--
      kstats.cells++
      const kind = nextCell()
      const started = Date.now()
      let timer
      const guard = new Promise((resolve) => {
        timer = setTimeout(() => resolve({ hung: true }), 90_000)
      })
      const outcome = await Promise.race([
        sk.run(kind).then(
          (problem) => ({ problem }),
          (e) => ({ problem: `threw ${why(e)}` }),
        ),
        guard,
      ])
      clearTimeout(timer)
      if (outcome.hung) state.hungCalls++
      const problem = outcome.hung ? 'did not settle' : outcome.problem
      const t = (tally[`${phase}:${kind}`] ??= { n: 0, bad: 0, ms: 0 })
      t.n++
      t.ms += Date.now() - started
      if (problem) {
        t.bad++
        problems.push(`${phase} ${kind}: ${problem}`)
        // a kernel in an unknown state: start over on a fresh one
        await sk.k.close()
        kstats.closed++
        const again = await sk.open()
        if (again) problems.push(`${phase} reopen: ${again}`)
      }
      if (ctx.args.verbose)
        console.log(`  ${phase} ${kind.padEnd(11)} ${problem ? 'BAD ' + problem : 'ok'} (${Date.now() - started} ms)`)
    }
    await sk.k.close()
    kstats.closed++
  }
  await Promise.all(Array.from({ length: KERNELS_AT_ONCE }, () => one(new SoakKernel(session))))
  return cells - left
}

/** The scenario as the soak runs it: ctx.args.cells workloads on a session of their own. */
async function kernelsPhase(deadline) {
  const tCells = Date.now()
  const kernelSession = await new Sandbox({ maxOutputBytes: MAX_OUT }).open()
  const kstart = { ...kstats }
  const cellsDone =
    ctx.args.cells > 0 && Date.now() <= deadline ? await kernelPhase(kernelSession, ctx.args.cells, deadline) : 0
  await kernelSession.close()
  return { done: cellsDone, ms: Date.now() - tCells, kstart }
}

module.exports = { KERNELS_AT_ONCE, CELL_MIX, kstats, why, SoakKernel, kernelPhase, kernelsPhase }
