'use strict'
// Worker side (run in a fresh `node benchmark/worker.js` process): kern-sandbox/e2b, a fresh
// Sandbox's first cell, then later cells.

const path = require('path')
const { now } = require('../lib/probe')

module.exports = {
  /** kern-sandbox/e2b: Sandbox.create() plus its first runCode('1 + 1'), per fresh sandbox (the
   * first one, which loads the modules, is a warmup); then later cells of the last sandbox. */
  async e2b(spec) {
    const { Sandbox } = require(path.join(spec.module, 'lib', 'e2b', 'entry.js'))
    const first = []
    let failed = 0
    let sbx = null
    for (let i = 0; i < spec.warmup + spec.n; i++) {
      if (sbx) await sbx.kill()
      const t = now()
      sbx = await Sandbox.create()
      const ex = await sbx.runCode('1 + 1')
      const ms = now() - t
      if (ex.text !== '2') failed++
      if (i >= spec.warmup) first.push(ms)
    }
    const later = []
    for (let i = 0; i < spec.cells; i++) {
      const t = now()
      const ex = await sbx.runCode('x = 1 + 1')
      later.push(now() - t)
      if (ex.error) failed++
    }
    await sbx.kill()
    return { first, later, failed }
  },
}
