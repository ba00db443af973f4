'use strict'
// The binding itself, on fake kerns (no box): per-call cost over a do-nothing kern, a large
// workspace, 64 calls at once, a stdout flood against the cap, and 100,000 chunks streamed to
// onStdout (fast and slow consumers). Ours against 0.1.1, taking turns.

const path = require('path')
const fx = require('../lib/fixtures')
const { ctx, TRUE_BIN, callRows, oneShotRows, parallelRow } = require('../lib/runner')
const { MiB, max, fmt, mib, errs, failedLine, line, issue34, summarize } = require('../lib/table')

function setup(need) {
  const { fixtures, TMP } = ctx
  if (need('noop')) fixtures.spawnFloor = fx.spawnFloor(TMP)
  if (need('ws10k')) fixtures.ws10k = fx.manyFiles(path.join(TMP, 'ws-10k'), 10000)
  if (need('flood')) fixtures.floodKern = fx.floodKern(TMP, 256 * MiB)
  if (need('stream') || need('streamslow')) fixtures.chunkKern = fx.chunkKern(TMP, 100000)
}

const rows = [
  {
    id: 'noop',
    title: 'per call, do-nothing kern (/bin/true)',
    async run() {
      const { Q, fixtures } = ctx
      const n = Q ? 60 : 200
      // The floor, the same /bin/true started and reaped from C (no binding at all), takes turns
      // with each implementation's calls in its worker, ten calls at a time: this host's spawn
      // cost drifts between two levels for seconds at a time, and a floor measured in a turn of
      // its own could land on the other level (seen: a floor above our whole call).
      const floor = fixtures.spawnFloor && { bin: fixtures.spawnFloor, program: TRUE_BIN }
      const a = await callRows('noop', {
        kern: TRUE_BIN,
        n,
        warmup: Q ? 10 : 20,
        extra: floor ? { ours: { floor }, ref: { floor } } : {},
      })
      const over = (x) => (x.median != null && x.floorMedian != null ? x.median - x.floorMedian : null)
      const [oursOver, refOver] = [over(a.ours), over(a.ref)]
      const aboveFloor = oursOver > 0 && refOver > 0
      const floors = `${fmt(a.ours.floorMedian)} / ${fmt(a.ref.floorMedian)} ms`
      return {
        data: { ...a, oursOverFloorMs: oursOver, refOverFloorMs: refOver },
        lines: [
          line('per call, do-nothing kern', 'median ms', a.ours.median, a.ref.median, 'lower', 0.2, '<= 0.2x', errs(a)),
          line('', 'p90 ms', a.ours.p90, a.ref.p90, 'lower', null, ''),
          line('', 'node CPU ms per call', a.ours.cpuMsPerCall, a.ref.cpuMsPerCall, 'lower', null, '(all threads)'),
          // Each over the floor that took turns with it; shown only when both are above theirs.
          issue34(
            'per-call overhead over the spawn floor vs 0.1.1 [fake kern]',
            line(
              '',
              `over the floor (${floors})`,
              aboveFloor ? oursOver : null,
              aboveFloor ? refOver : null,
              'lower',
              0.15,
              '<= 0.15x (issue 34)',
            ),
          ),
          failedLine(a),
        ].filter(Boolean),
      }
    },
  },
  {
    id: 'ws10k',
    title: 'per call, 10,000 workspace files',
    async run() {
      const { Q, fixtures } = ctx
      const a = await callRows('ws10k', {
        kern: TRUE_BIN,
        n: Q ? 8 : 20,
        warmup: Q ? 2 : 3,
        sandbox: { workspace: fixtures.ws10k },
        stalls: true,
      })
      return {
        data: a,
        lines: [
          line(
            'per call, 10,000 workspace files',
            'median ms',
            a.ours.median,
            a.ref.median,
            'lower',
            0.1,
            '<= 0.1x',
            errs(a),
          ),
          line('', 'node CPU ms per call', a.ours.cpuMsPerCall, a.ref.cpuMsPerCall, 'lower', null, '(all threads)'),
          line(
            '',
            'max event-loop stall ms',
            a.ours.stallMaxMs,
            a.ref.stallMaxMs,
            'none',
            null,
            'ours <= 5 ms',
            null,
            a.ours.stallMaxMs != null ? a.ours.stallMaxMs <= 5 : null,
          ),
          line(
            '',
            '  same, less CPU wait ms',
            a.ours.ownStallMaxMs,
            a.ref.ownStallMaxMs,
            'none',
            null,
            'ours <= 5 ms',
            null,
            a.ours.ownStallMaxMs != null ? a.ours.ownStallMaxMs <= 5 : null,
          ),
          line('', '  ELD histogram max ms', a.ours.eldMaxMs, a.ref.eldMaxMs, 'none', null, '(cross-check)'),
          failedLine(a),
        ].filter(Boolean),
      }
    },
  },
  {
    id: 'parallel64',
    title: '64 parallel calls on one session (do-nothing kern)',
    async run() {
      return parallelRow('parallel64', TRUE_BIN, ctx.Q ? 3 : 5, '64 parallel calls, do-nothing kern')
    },
  },
  {
    id: 'flood',
    title: '256 MiB stdout flood, 64 MiB cap (fake kern: head -c 256MiB /dev/zero)',
    async run() {
      const cap = 64 * MiB
      const a = await oneShotRows('flood', 'flood', { kern: ctx.fixtures.floodKern, specFor: () => ({ cap }) })
      const s = summarize(a, ['ms', 'growth'])
      const capped = (i) => a[i].runs.length > 0 && a[i].runs.every((r) => r.stdoutBytes === cap && r.truncated)
      return {
        data: a,
        summary: s,
        lines: [
          line(
            '256 MiB flood, 64 MiB cap [fake kern]',
            'median ms',
            s.ours.ms,
            s.ref.ms,
            'lower',
            0.6,
            '<= 0.6x',
            errs(a),
          ),
          line(
            '',
            'peak RSS growth MiB (max)',
            mib(s.ours.growthMax),
            mib(s.ref.growthMax),
            'none',
            null,
            'ours <= 96 MiB',
            null,
            s.ours.growthMax != null ? s.ours.growthMax <= cap + 32 * MiB : null,
          ),
          line(
            '',
            'kept 64 MiB, truncated',
            capped('ours'),
            capped('ref'),
            'none',
            null,
            'ours yes',
            null,
            capped('ours'),
          ),
        ],
      }
    },
  },
  {
    id: 'stream',
    title: 'streaming 100,000 chunks through onStdout (fake kern writer)',
    async run() {
      const n = 100000
      const a = await oneShotRows('stream', 'stream', { kern: ctx.fixtures.chunkKern.bin, specFor: () => ({ n }) })
      const s = summarize(a, ['ms', 'linesPerS', 'callbacks'])
      const all = (i) =>
        a[i].runs.length > 0 && a[i].runs.every((r) => r.inOrder && r.deliveredLines === n && r.resultStdoutMatches)
      const lost = (i) => a[i].runs.map((r) => r.expectedBytes - r.deliveredBytes)
      return {
        data: a,
        summary: s,
        lines: [
          line(
            'stream 100,000 chunks via onStdout [fake kern]',
            'chunks/s (median)',
            s.ours.linesPerS,
            s.ref.linesPerS,
            'higher',
            null,
            'report',
            errs(a),
          ),
          line('', 'all delivered, in order', all('ours'), all('ref'), 'none', null, 'ours yes', null, all('ours')),
          line('', 'bytes lost (max)', max(lost('ours')), max(lost('ref')), 'none', null, ''),
          line('', 'onStdout calls (median)', s.ours.callbacks, s.ref.callbacks, 'none', null, ''),
        ],
      }
    },
  },
  {
    id: 'streamslow',
    title: 'streaming 100,000 chunks to a slow consumer (JS thread busy 300 ms, then 20 us per chunk)',
    async run() {
      const n = 100000
      const a = await oneShotRows('streamslow', 'stream', {
        kern: ctx.fixtures.chunkKern.bin,
        specFor: () => ({ n, blockMs: 300, perChunkUs: 20 }),
      })
      const all = (i) =>
        a[i].runs.length > 0 && a[i].runs.every((r) => r.inOrder && r.deliveredLines === n && r.resultStdoutMatches)
      const lost = (i) => a[i].runs.map((r) => r.expectedBytes - r.deliveredBytes)
      const s = summarize(a, ['ms', 'callbacks'])
      return {
        data: a,
        summary: s,
        lines: [
          line(
            'stream to a slow consumer [fake kern]',
            'median ms',
            s.ours.ms,
            s.ref.ms,
            'lower',
            null,
            'report',
            errs(a),
          ),
          line('', 'all delivered, in order', all('ours'), all('ref'), 'none', null, 'ours yes', null, all('ours')),
          line('', 'bytes lost (max)', max(lost('ours')), max(lost('ref')), 'none', null, ''),
        ],
      }
    },
  },
]

module.exports = { name: 'binding', title: 'the binding on fake kerns (no box)', setup, rows }
