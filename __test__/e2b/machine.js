'use strict'
// The machine kern-sandbox/e2b's tests run on: the real one (issue 25) when this build has
// `Sandbox.prototype.machine`, else the fake of fake-machine.js (commands under bubblewrap on the
// host, kernels the session's own). `REAL` says which, for the tests only a real machine can pass.
require('../helpers.js')
const kern = require('../..')

const REAL = typeof kern.Sandbox.prototype.machine === 'function'
if (!REAL) {
  const { fakeMachine } = require('./fake-machine.js')
  kern.Sandbox.prototype.machine = function (o) {
    return fakeMachine(this, o)
  }
}

/** node:test's `skip` for a test that needs a real machine (isolation, a kernel in the machine). */
const needsMachine = REAL ? false : 'needs a real machine (issue 25): this build has only the fake'

module.exports = { REAL, needsMachine }
