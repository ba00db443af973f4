'use strict'
// Worker side (run in a fresh `node benchmark/worker.js` process): machine snapshots and forks of
// a machine holding 200 MiB of files, against `tar cf` of the same tree in the box.

const fs = require('fs')
const os = require('os')
const path = require('path')
const { now } = require('../lib/probe')

/** 100 files of 1 MiB and 2,000 of 50 KiB under /opt/data: 200 MiB, big and small files. */
const POPULATE =
  'mkdir -p /opt/data/big /opt/data/small && ' +
  'for i in $(seq 1 100); do head -c 1048576 /dev/urandom > /opt/data/big/$i; done && ' +
  'for i in $(seq 1 2000); do head -c 51200 /dev/urandom > /opt/data/small/$i; done'

module.exports = {
  /** Per round: snapshot() (time, size), tar of the tree in the box (time, size), fork() and
   * fork({ count: 3 }) (time until every fork runs), each fork closed and snapshot deleted. */
  async machineFork(spec) {
    const kernel = require(spec.module)
    const store = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-snap-'))
    const sbx = await new kernel.Sandbox({ prewarm: 0, timeoutS: 300, snapshotDir: store }).open()
    const out = { snapshot: [], size: [], tar: [], tarBytes: [], fork: [], fork3: [], failed: 0 }
    try {
      const m = await sbx.machine()
      const filled = await m.exec(POPULATE, { timeoutS: 300 })
      if (filled.exitCode !== 0) throw new Error(`populate failed: ${filled.stderr}`)
      // The image's baseline walk is made once per image and store: not part of a snapshot's cost.
      await (await m.snapshot()).delete()
      for (let i = 0; i < spec.warmup + spec.n; i++) {
        const keep = i >= spec.warmup
        let t = now()
        const s = await m.snapshot()
        const snapMs = now() - t
        t = now()
        const tar = await m.exec('tar cf - /opt/data 2>/dev/null | wc -c')
        const tarMs = now() - t
        t = now()
        const [one] = await m.fork()
        const forkMs = now() - t
        t = now()
        const three = await m.fork({ count: 3 })
        const fork3Ms = now() - t
        const seen = await one.exec('ls /opt/data/small | wc -l')
        if (tar.exitCode !== 0 || seen.stdout.trim() !== '2000' || three.length !== 3) out.failed++
        for (const f of [one, ...three]) await f.close()
        await s.delete()
        if (keep) {
          out.snapshot.push(snapMs)
          out.size.push(s.sizeBytes)
          out.tar.push(tarMs)
          out.tarBytes.push(Number(tar.stdout.trim()))
          out.fork.push(forkMs)
          out.fork3.push(fork3Ms)
        }
      }
      return out
    } finally {
      await sbx.close()
      fs.rmSync(store, { recursive: true, force: true })
    }
  },
}
