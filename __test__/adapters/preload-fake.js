'use strict'
// `node -r` preload for the examples while machines are not merged: gives Sandbox a `machine()`
// from fake-machine.js when it has none. A no-op once the real one exists.
require('../helpers.js')
const kern = require('../..')
const { fakeMachine } = require('./fake-machine.js')

if (typeof kern.Sandbox.prototype.machine !== 'function') {
  kern.Sandbox.prototype.machine = function (o) {
    return fakeMachine(this, o)
  }
}
