'use strict'
// Worker side (run in a fresh `node benchmark/worker.js` process): workspace snapshot and
// restore, with their peak RSS growth.

const fs = require('fs')
const { now, rssWindow, openSandbox } = require('../lib/probe')

module.exports = {
  async snapshot(spec) {
    const s = await openSandbox(spec, { workspace: spec.workspace })
    fs.rmSync(spec.dest, { force: true })
    const w = rssWindow()
    const t = now()
    s.snapshot(spec.dest)
    const ms = now() - t
    const rss = w.end()
    await s.close()
    return { ms, ...rss, archiveBytes: fs.statSync(spec.dest).size }
  },

  async restore(spec) {
    fs.rmSync(spec.workspace, { recursive: true, force: true })
    fs.mkdirSync(spec.workspace, { recursive: true })
    const s = await openSandbox(spec, { workspace: spec.workspace })
    const w = rssWindow()
    const t = now()
    s.restore(spec.src)
    const ms = now() - t
    const rss = w.end()
    await s.close()
    const { du } = require('../lib/fixtures')
    const got = du(spec.workspace)
    fs.rmSync(spec.workspace, { recursive: true, force: true })
    return { ms, ...rss, restoredFiles: got.files, restoredBytes: got.bytes }
  },
}
