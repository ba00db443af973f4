'use strict'
// Machine snapshots and forks on a real kern: fork of a machine holding 200 MiB of files, and
// snapshot time and size against `tar cf` of the same tree in the box. The worker side is
// measure/forks.js.

const { ctx, IMPLS, worker, baseEnv, log } = require('../lib/runner')
const { median, fmt, line } = require('../lib/table')

async function forkRow() {
  const res = await worker(
    { mode: 'machineFork', module: IMPLS.ours, n: ctx.Q ? 3 : 7, warmup: 1 },
    baseEnv(ctx.REAL_KERN),
  )
  if (res.error) throw new Error(res.error)
  const med = Object.fromEntries(
    ['snapshot', 'size', 'tar', 'tarBytes', 'fork', 'fork3'].map((k) => [k, median(res[k])]),
  )
  const mib = (b) => b / (1 << 20)
  log(
    `  forks: snapshot ${fmt(med.snapshot)} ms (${fmt(mib(med.size))} MiB), tar ${fmt(med.tar)} ms ` +
      `(${fmt(mib(med.tarBytes))} MiB), fork ${fmt(med.fork)} ms, fork x3 ${fmt(med.fork3)} ms`,
  )
  const failed = res.failed
    ? { row: '', metric: 'failed rounds', ours: String(res.failed), ref: '', ratio: '', target: '', result: '' }
    : null
  return {
    data: { ...med, failed: res.failed },
    lines: [
      // The fallback path: a machine's root is kern's overlay, which the host may not reflink
      // into, so every changed byte crosses the agent's socket out and back in.
      line('machine.fork() of a machine with 200 MiB of files', 'median ms', med.fork, null, 'none', null, 'report'),
      line('  fork({ count: 3 })', 'median ms', med.fork3, null, 'none', null, 'report'),
      line(
        '  snapshot() vs `tar cf` of the tree in the box',
        'median ms',
        med.snapshot,
        med.tar,
        'lower',
        null,
        'report',
      ),
      line('  snapshot size vs the tar', 'MiB', mib(med.size), mib(med.tarBytes), 'lower', 1.05, '<= 1.05x'),
      failed,
    ].filter(Boolean),
  }
}

const ROW_TITLE = 'machine snapshots and forks: 200 MiB of files; snapshot vs `tar cf` of the tree'
const rows = [{ id: 'fork', real: true, title: ROW_TITLE, run: forkRow }]

module.exports = { name: 'forks', title: 'machine snapshots and forks (real kern)', rows }
