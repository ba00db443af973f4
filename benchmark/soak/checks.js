'use strict'
// The soak's leak and outcome checks, each PASS/FAIL, comparing the figures after the run with the
// baseline taken after the warm-up (the bounds are described in soak.js's header).

const { problems, state } = require('./context')

/** The least RSS growth the rss check allows (see above). */
const RSS_FLOOR_KB = 8 * 1024

function fmtKb(kb) {
  return `${(kb / 1024).toFixed(1)} MiB`
}

/** The checks: [{ name, pass, figure }], and the fds that appeared and went. */
function checks(before, after, rssHwm0, rssHwm) {
  const fdSetBefore = new Set(before.fds)
  const fdSetAfter = new Set(after.fds)
  const fdsNew = after.fds.filter((f) => !fdSetBefore.has(f))
  const fdsGone = before.fds.filter((f) => !fdSetAfter.has(f))
  const rssRatio = after.rssKb / before.rssKb
  const rssAllowedKb = Math.max(before.rssKb * 0.1, RSS_FLOOR_KB)
  const checks = [
    {
      name: 'fds',
      pass: after.fds.length <= before.fds.length,
      figure:
        `${before.fds.length} -> ${after.fds.length}` +
        (fdsNew.length ? ` (new: ${fdsNew.join(', ')})` : '') +
        (fdsGone.length ? ` (gone: ${fdsGone.join(', ')})` : ''),
    },
    {
      name: 'processes',
      pass: after.strays.length === 0,
      figure:
        `${after.strays.length} stray (children or marked)` +
        after.strays
          .slice(0, 10)
          .map((p) => `\n      ${p.pid} ppid ${p.ppid} ${p.state} ${p.cmd.slice(0, 120)}`)
          .join(''),
    },
    {
      name: 'tmpdirs',
      pass: after.tmpdirs.length === 0,
      figure:
        `${after.tmpdirs.length} kern-sbx-${process.pid}-* left` +
        (after.tmpdirs.length ? `: ${after.tmpdirs.slice(0, 10).join(', ')}` : ''),
    },
    {
      name: 'boxes',
      pass: !after.boxes.error && after.boxes.ours.length === 0,
      figure: after.boxes.error
        ? `kern ps failed: ${after.boxes.error}`
        : `${after.boxes.ours.length} soak boxes left (${after.boxes.all.length} boxes in kern ps in all, ${before.boxes.all.length} at baseline)` +
          after.boxes.ours
            .slice(0, 5)
            .map((b) => `\n      ${b.name} pid ${b.pid} ${String(b.command).slice(0, 100)}`)
            .join(''),
    },
    {
      name: 'rss',
      pass: after.rssKb - before.rssKb <= rssAllowedKb,
      figure:
        `${fmtKb(before.rssKb)} -> ${fmtKb(after.rssKb)} (${((rssRatio - 1) * 100).toFixed(1)}%, limit +${fmtKb(rssAllowedKb)}; peak ${fmtKb(Math.max(rssHwm, rssHwm0))}; ` +
        `JS heap ${fmtKb(before.mem.heapTotal / 1024)} -> ${fmtKb(after.mem.heapTotal / 1024)}, external ${fmtKb(before.mem.external / 1024)} -> ${fmtKb(after.mem.external / 1024)}, ` +
        `threads ${before.threads} -> ${after.threads})`,
    },
    {
      name: 'calls',
      pass: problems.length === 0 && state.hungCalls === 0,
      figure:
        `${problems.length} unexpected outcome(s), ${state.hungCalls} did not settle` +
        problems
          .slice(0, 15)
          .map((p) => `\n      ${p.slice(0, 400)}`)
          .join('') +
        (problems.length > 15 ? `\n      ... ${problems.length - 15} more` : ''),
    },
  ]
  return { checks, fdsNew, fdsGone }
}

module.exports = { fmtKb, checks }
