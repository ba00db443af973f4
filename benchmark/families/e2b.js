'use strict'
// kern-sandbox/e2b on a real kern, ours alone (there is no reference): Sandbox.create() and its
// first cell, then later cells. The worker side is measure/e2b.js.

const { ctx, IMPLS, worker, baseEnv, log } = require('../lib/runner')
const { median, max, fmt, line } = require('../lib/table')

/** kern-sandbox/e2b on ours alone (there is no reference): a fresh sandbox's first cell, which
 * includes starting its Python kernel, and the cells after it. */
async function e2bRow() {
  const first = []
  const later = []
  const errors = []
  let failed = 0
  for (let r = 0; r < ctx.ROUNDS; r++) {
    const res = await worker(
      { mode: 'e2b', module: IMPLS.ours, n: ctx.Q ? 5 : 15, warmup: 1, cells: ctx.Q ? 100 : 500 },
      baseEnv(ctx.REAL_KERN),
    )
    if (res.error) {
      errors.push(res.error)
      continue
    }
    first.push(...res.first)
    later.push(...res.later)
    failed += res.failed
    log(
      `  e2b round ${r + 1}/${ctx.ROUNDS}: create + first cell ${fmt(median(res.first))} ms, later cells ${fmt(median(res.later))} ms`,
    )
  }
  const m1 = median(first)
  const e = errors.length ? [errors[0].split('\n')[0]] : null
  return {
    data: { firstMs: m1, firstMaxMs: max(first), laterMs: median(later), failed, errors: errors.slice(0, 3) },
    lines: [
      line(
        "e2b: Sandbox.create() + runCode('1 + 1')",
        'median ms',
        m1,
        null,
        'none',
        null,
        '<= 100 ms',
        e,
        m1 == null ? undefined : m1 <= 100,
      ),
      line("  later cells (runCode('x = 1 + 1'))", 'median ms', median(later), null, 'none', null, 'report'),
      failed
        ? { row: '', metric: 'failed calls', ours: String(failed), ref: '', ratio: '', target: '', result: '' }
        : null,
    ].filter(Boolean),
  }
}

const ROW_TITLE = "kern-sandbox/e2b: Sandbox.create() + first runCode('1 + 1'), then later cells"
const rows = [{ id: 'e2b', real: true, title: ROW_TITLE, run: e2bRow }]

module.exports = { name: 'e2b', title: 'the E2B-compatible Sandbox (real kern)', rows }
