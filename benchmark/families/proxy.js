'use strict'
// The host-side egress proxy (issue 37), loopback only, no kern: a 1 MiB HTTPS download through a
// tunnelled host and through a terminated host (one with a header rule) against the same download
// straight from the server, and requests per second on 64 parallel keep-alive connections through
// the proxy against straight to the server. The worker side is measure/proxy.js.

const { ctx, IMPLS, worker, baseEnv, log } = require('../lib/runner')
const { median, fmt, line } = require('../lib/table')

const CONNS = 64

/** Every round's worker result (one worker per round, shared by both rows). */
let rounds = null
async function measure() {
  if (rounds) return rounds
  rounds = []
  for (let r = 0; r < ctx.ROUNDS; r++) {
    const res = await worker(
      {
        mode: 'proxy',
        module: IMPLS.ours,
        n: ctx.Q ? 15 : 40,
        warmup: 3,
        conns: CONNS,
        requests: CONNS * (ctx.Q ? 40 : 100),
      },
      baseEnv(null),
    )
    rounds.push(res)
    if (res.dl)
      log(
        `  proxy round ${r + 1}/${ctx.ROUNDS}: 1 MiB direct ${fmt(median(res.dl.direct))} ms, tunnelled ${fmt(median(res.dl.tunnel))} ms, terminated ${fmt(median(res.dl.term))} ms; ${fmt(res.rpsProxy)} req/s through the proxy, ${fmt(res.rpsDirect)} direct`,
      )
  }
  return rounds
}

function outcome(all) {
  const skipped = all.find((r) => r.skipped)
  const errors = all.filter((r) => r.error).map((r) => r.error.split('\n')[0])
  const ok = all.filter((r) => !r.error && !r.skipped)
  return { skipped: skipped && skipped.skipped, errors: errors.length ? errors.slice(0, 1) : null, ok }
}

async function downloadRow() {
  const { skipped, errors, ok } = outcome(await measure())
  if (skipped)
    return { data: { skipped }, lines: [line(`proxy: skipped, ${skipped}`, '', null, null, 'none', null, '')] }
  const pool = (k) => ok.flatMap((r) => r.dl[k])
  const [direct, tunnel, term] = ['direct', 'tunnel', 'term'].map((k) => median(pool(k)))
  const failed = ok.reduce((a, r) => a + r.failed, 0)
  return {
    data: { directMs: direct, tunnelMs: tunnel, termMs: term, failed, errors },
    lines: [
      line(
        'proxy: 1 MiB HTTPS download, tunnelled vs direct',
        'median ms',
        tunnel,
        direct,
        'lower',
        1.2,
        '<= 1.2x',
        errors,
      ),
      line('  terminated (a header rule) vs direct', 'median ms', term, direct, 'lower', 2, '<= 2x', errors),
      failed
        ? { row: '', metric: 'failed requests', ours: String(failed), ref: '', ratio: '', target: '', result: '' }
        : null,
    ].filter(Boolean),
  }
}

async function rpsRow() {
  const { skipped, errors, ok } = outcome(await measure())
  if (skipped)
    return { data: { skipped }, lines: [line(`proxy: skipped, ${skipped}`, '', null, null, 'none', null, '')] }
  const through = median(ok.map((r) => r.rpsProxy))
  const direct = median(ok.map((r) => r.rpsDirect))
  return {
    data: { rpsProxy: through, rpsDirect: direct, errors },
    lines: [
      line(
        `proxy: plain HTTP, ${CONNS} keep-alive connections, via proxy vs direct`,
        'requests/s',
        through,
        direct,
        'higher',
        null,
        'report',
        errors,
      ),
    ],
  }
}

const rows = [
  { id: 'proxydl', title: 'egress proxy: 1 MiB HTTPS download, tunnelled and terminated vs direct', run: downloadRow },
  { id: 'proxyrps', title: `egress proxy: requests/s on ${CONNS} keep-alive connections vs direct`, run: rpsRow },
]

module.exports = { name: 'proxy', title: 'the host-side egress proxy (loopback, no kern)', rows }
