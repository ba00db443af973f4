'use strict'
// Runs each adapter test body twice: on the fake machine (fake-machine.js, always) and on the real
// `sbx.machine()` (skipped with a reason while Sandbox.prototype.machine does not exist). The
// adapters reach machines only through `new Sandbox(opts).open()` + `sbx.machine()` or a machine
// the caller passes, so swapping the prototype method is all the fake needs.

const test = require('node:test')
const net = require('node:net')
const helpers = require('../helpers.js')
const kern = helpers.kern
const { fakeMachine } = require('./fake-machine.js')

const realMachine = Object.prototype.hasOwnProperty.call(kern.Sandbox.prototype, 'machine')
  ? kern.Sandbox.prototype.machine
  : null

const VARIANTS = [
  {
    name: 'fake machine',
    method: function (o) {
      return fakeMachine(this, o)
    },
    skip: false,
  },
  {
    name: 'machine',
    method: realMachine,
    skip: realMachine ? false : 'Sandbox.prototype.machine does not exist yet (machines, issue 25)',
  },
]

/** `describe`-like: `body(ctx)` declares tests with ctx.test; each runs once per variant. */
function eachMachine(title, body) {
  for (const v of VARIANTS) {
    test.describe(`${title} (${v.name})`, { skip: v.skip }, () => {
      test.before(() => {
        kern.Sandbox.prototype.machine = v.method
      })
      test.after(() => {
        if (realMachine) kern.Sandbox.prototype.machine = realMachine
        else delete kern.Sandbox.prototype.machine
      })
      body({ variant: v.name, fake: v.method !== realMachine })
    })
  }
}

/** An open session and its machine, closed by the returned `close`. */
async function openMachine(opts = {}) {
  const sbx = await new kern.Sandbox({ timeoutS: 60, ...opts }).open()
  const machine = await sbx.machine()
  return { sbx, machine, close: () => sbx.close() }
}

/** A TCP port free on the host right now (the fake machine shares the host's network). */
function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer()
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
    s.on('error', reject)
  })
}

/** Polls `url` until it answers (a server just spawned), at most `tries` times. */
async function fetchWhenUp(url, tries = 100) {
  let last
  for (let i = 0; i < tries; i++) {
    try {
      return await fetch(url)
    } catch (e) {
      last = e
      await new Promise((r) => setTimeout(r, 100))
    }
  }
  throw last
}

module.exports = { eachMachine, openMachine, freePort, fetchWhenUp, kern, helpers, realMachine }
