'use strict'
// Workspace snapshots: snapshot() of 200 MiB + 2,000 small files, and restore() of the archive
// our snapshot wrote, into an empty workspace. Ours against 0.1.1, taking turns.

const fs = require('fs')
const path = require('path')
const fx = require('../lib/fixtures')
const { ctx, IMPLS, TRUE_BIN, worker, baseEnv, oneShotRows, log, sync } = require('../lib/runner')
const { MiB, mib, errs, line, summarize } = require('../lib/table')

function setup(need) {
  const { fixtures, TMP } = ctx
  if (need('snapshot') || need('restore')) {
    fixtures.snapWs = fx.snapshotData(path.join(TMP, 'ws-snapshot'))
    fixtures.snapDu = fx.du(fixtures.snapWs)
  }
}

const rows = [
  {
    id: 'snapshot',
    title: 'snapshot of 200 MiB + 2,000 small files',
    async run() {
      const { TMP, fixtures } = ctx
      const dest = (impl) => path.join(TMP, `snap-${impl}.tar.gz`)
      // Warm the page cache and produce the archive the restore row uses (ours; the reference
      // must be able to read it, checked there).
      const warm = await worker(
        {
          mode: 'snapshot',
          impl: 'ours',
          module: IMPLS.ours,
          workspace: fixtures.snapWs,
          dest: path.join(TMP, 'restore-src.tar.gz'),
        },
        baseEnv(TRUE_BIN),
      )
      if (warm.error) {
        log(`  our snapshot failed, the restore row will use the reference's archive: ${warm.error.split('\n')[0]}`)
        await worker(
          {
            mode: 'snapshot',
            impl: 'ref',
            module: IMPLS.ref,
            workspace: fixtures.snapWs,
            dest: path.join(TMP, 'restore-src.tar.gz'),
          },
          baseEnv(TRUE_BIN),
        )
      }
      fixtures.restoreSrc = path.join(TMP, 'restore-src.tar.gz')
      sync()
      const a = await oneShotRows('snapshot', 'snapshot', {
        kern: TRUE_BIN,
        specFor: (impl) => ({ workspace: fixtures.snapWs, dest: dest(impl) }),
        after: (impl) => {
          fs.rmSync(dest(impl), { force: true })
          sync()
        },
      })
      const s = summarize(a, ['ms', 'growth', 'archiveBytes'])
      return {
        data: a,
        summary: s,
        lines: [
          line('snapshot 200 MiB + 2,000 files', 'median ms', s.ours.ms, s.ref.ms, 'lower', 0.2, '<= 0.2x', errs(a)),
          line(
            '',
            'peak RSS growth MiB (max)',
            mib(s.ours.growthMax),
            mib(s.ref.growthMax),
            'none',
            null,
            'ours <= 64 MiB',
            null,
            s.ours.growthMax != null ? s.ours.growthMax <= 64 * MiB : null,
          ),
          line(
            '',
            'archive MiB',
            mib(s.ours.archiveBytes),
            mib(s.ref.archiveBytes),
            'lower',
            1.05,
            '<= 1.05x',
            errs(a),
          ),
        ],
      }
    },
  },
  {
    id: 'restore',
    title: 'restore of that snapshot (into an empty workspace)',
    async run() {
      const { TMP, fixtures } = ctx
      if (!fixtures.restoreSrc || !fs.existsSync(fixtures.restoreSrc)) {
        fixtures.restoreSrc = path.join(TMP, 'restore-src.tar.gz')
        const w = await worker(
          { mode: 'snapshot', impl: 'ours', module: IMPLS.ours, workspace: fixtures.snapWs, dest: fixtures.restoreSrc },
          baseEnv(TRUE_BIN),
        )
        if (w.error)
          await worker(
            { mode: 'snapshot', impl: 'ref', module: IMPLS.ref, workspace: fixtures.snapWs, dest: fixtures.restoreSrc },
            baseEnv(TRUE_BIN),
          )
      }
      const target = (impl) => path.join(TMP, `ws-restore-${impl}`)
      const a = await oneShotRows('restore', 'restore', {
        kern: TRUE_BIN,
        specFor: (impl) => ({ workspace: target(impl), src: fixtures.restoreSrc }),
        after: () => sync(),
      })
      const s = summarize(a, ['ms', 'growth', 'restoredFiles', 'restoredBytes'])
      const complete = (i) =>
        a[i].runs.length > 0 &&
        a[i].runs.every((r) => r.restoredFiles === fixtures.snapDu.files && r.restoredBytes === fixtures.snapDu.bytes)
      return {
        data: a,
        summary: s,
        lines: [
          line('restore of that snapshot', 'median ms', s.ours.ms, s.ref.ms, 'lower', 0.3, '<= 0.3x', errs(a)),
          line('', 'peak RSS growth MiB (max)', mib(s.ours.growthMax), mib(s.ref.growthMax), 'none', null, ''),
          line(
            '',
            'all files restored',
            complete('ours'),
            complete('ref'),
            'none',
            null,
            'ours complete',
            null,
            complete('ours'),
          ),
        ],
      }
    },
  },
]

module.exports = { name: 'snapshot', title: 'workspace snapshot and restore', setup, rows }
