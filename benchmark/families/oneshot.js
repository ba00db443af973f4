'use strict'
// One-shot calls on a real kern: run(["true"]) against 0.1.1 and the bare `kern box … -- true`
// with exactly our argv; one-shot Python runCode against 0.1.23 and against plain `python3 -c`;
// 64 calls at once. The worker side is measure/calls.js.

const { ctx, IMPLS, callRows, pairedRows, parallelRow, bareTemplate } = require('../lib/runner')
const { fmt, verdict, errs, failedLine, line, issue34 } = require('../lib/table')

/** One-shot Python: ours through the rich-result runner against 0.1.23 through its runner; and
 * what the runner adds, from ours taking turns on one session with the same code run plainly
 * (`run(["python3", "-c", code])`): the median of the pairs' differences. */
async function pyRunnerRow() {
  const code = 'x = 1'
  const n = ctx.Q ? 8 : 20
  const sandbox = { workspace: ctx.fixtures.realWs }
  const a = await callRows('pyrunner', {
    kern: ctx.REAL_KERN,
    n,
    warmup: 3,
    sandbox,
    impls: ['ours', 'ref23'],
    extra: { ours: { code }, ref23: { code, module: IMPLS.ref23 } },
  })
  const p = await pairedRows('pyrunner pairs', {
    kern: ctx.REAL_KERN,
    n: ctx.Q ? 16 : 40,
    warmup: 3,
    sandbox,
    a: { code },
    b: { command: ['python3', '-c', code] },
  })
  const added = p.diffMedian
  const bad =
    p.errors.length || p.failed ? [`pairs: ${p.failed} failed${p.errors.length ? `, ${p.errors[0]}` : ''}`] : null
  return {
    data: { ...a, pairs: p },
    lines: [
      line(
        'one-shot Python runCode vs 0.1.23',
        'median ms',
        a.ours.median,
        a.ref23.median,
        'lower',
        null,
        '',
        errs({ ours: a.ours, ref: a.ref23 }),
      ),
      {
        row: '  what the runner adds over plain python3 -c',
        metric: 'ms, median of pairs',
        ours: fmt(added),
        ref: '',
        ratio: `plain ${fmt(p.b.median)}`,
        target: '<= 2 ms',
        result: verdict(added == null ? null : added <= 2),
      },
      // The same pairs, held to issue 34's goal for what the runner adds.
      issue34(
        'one-shot runCode over a bare interpreter (`python3 -c`)',
        line(
          '  runCode vs plain python3 -c, in turns',
          'median ms',
          p.a.median,
          p.b.median,
          'lower',
          null,
          `adds <= 1 ms (issue 34): ${fmt(added)} ms`,
          bad,
          added == null ? null : added <= 1,
        ),
      ),
    ],
  }
}

const rows = [
  {
    id: 'real',
    real: true,
    title: 'real kern: run(["true"]) vs the bare `kern box … -- true`',
    async run() {
      const bare = await bareTemplate()
      const argv = bare.argv
      const a = await callRows('real', {
        kern: ctx.REAL_KERN,
        n: ctx.Q ? 6 : 15,
        warmup: ctx.Q ? 2 : 3,
        sandbox: { workspace: ctx.fixtures.realWs },
        impls: ['ours', 'ref', 'bare'],
        extra: { bare: { bare } },
      })
      const ratio = a.ours.median != null && a.bare.median ? a.ours.median / a.bare.median : null
      return {
        data: { ...a, argv: argv.map((x) => (x.startsWith(ctx.TMP) ? x.replace(ctx.TMP, '$TMP') : x)) },
        lines: [
          line('real kern run(["true"])', 'median ms', a.ours.median, a.ref.median, 'lower', null, '', errs(a)),
          line('', 'node CPU ms per call', a.ours.cpuMsPerCall, a.ref.cpuMsPerCall, 'lower', null, '(all threads)'),
          {
            row: '  ours vs bare `kern box … -- true`',
            metric: 'median ms',
            ours: fmt(a.ours.median),
            ref: `bare ${fmt(a.bare.median)}`,
            ratio: ratio == null ? '-' : `${ratio.toFixed(2)}x`,
            target: '<= 1.07x',
            result: verdict(ratio == null ? null : ratio <= 1.07),
            ratioValue: ratio,
          },
          {
            row: '  reference vs bare',
            metric: 'median ms',
            ours: '',
            ref: fmt(a.ref.median),
            ratio: a.ref.median != null && a.bare.median ? `${(a.ref.median / a.bare.median).toFixed(2)}x` : '-',
            target: '(issue: 1.12x)',
            result: '',
          },
          failedLine(a, ['ours', 'ref', 'bare']),
        ].filter(Boolean),
      }
    },
  },
  {
    id: 'pyrunner',
    real: true,
    title: 'one-shot Python runCode: runner overhead vs plain python3, and vs 0.1.23',
    run: pyRunnerRow,
  },
  {
    id: 'parallel64real',
    real: true,
    title: '64 parallel calls on one session, real kern',
    async run() {
      // kern itself is the bottleneck here: the figure that matters is how many calls succeed.
      return parallelRow(
        'parallel64real',
        ctx.REAL_KERN,
        ctx.Q ? 1 : 2,
        '64 parallel calls, real kern',
        { workspace: ctx.fixtures.realWs },
        null,
      )
    },
  },
]

module.exports = { name: 'oneshot', title: 'one-shot calls (real kern)', rows }
