'use strict'
// Ready boxes (prewarm) on a real kern: the same calls with ready boxes, with a box per call and
// on 0.1.1, each variant in a worker of its own; what a ready box costs. The worker side is
// measure/pool.js.

const { ctx, IMPLS, worker, baseEnv, order, log } = require('../lib/runner')
const { median, fmt, mib, line } = require('../lib/table')

/** prewarm: the same calls with ready boxes, with a box started per call, and on 0.1.1; each
 * variant in a worker of its own, their order alternating round by round. */
async function prewarmRow() {
  const n = ctx.Q ? 10 : 30
  const loop = ctx.Q ? 40 : 100
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
  const sandbox = { workspace: ctx.fixtures.realWs }
  for (let r = 0; r < ctx.ROUNDS; r++) {
    for (const [c, spec] of Object.entries(cases)) {
      for (const v of order(Object.keys(variants), r)) {
        const res = await worker({ mode: 'prewarm', sandbox, ...spec, ...variants[v] }, baseEnv(ctx.REAL_KERN))
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
      `  prewarm round ${r + 1}/${ctx.ROUNDS}: runCode ready ${fmt(median(acc['code.pool'].samples))} ms, cold ${fmt(median(acc['code.cold'].samples))} ms`,
    )
  }
  const cost = {}
  for (const [kind, what] of [
    ['python', { code: 'x = 1' }],
    ['sh', { command: ['true'] }],
  ]) {
    const res = await worker(
      { mode: 'prewarmCost', impl: 'ours', module: IMPLS.ours, sandbox, prewarm: 4, ...what },
      baseEnv(ctx.REAL_KERN),
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

const ROW_TITLE = 'ready boxes (prewarm: 2) vs a box per call (prewarm: 0) vs 0.1.1: call latency, 100-call loops, cost'
const rows = [{ id: 'prewarm', real: true, title: ROW_TITLE, run: prewarmRow }]

module.exports = { name: 'pool', title: 'ready boxes, prewarm (real kern)', rows }
