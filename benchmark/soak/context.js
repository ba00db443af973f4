'use strict'
// What every soak scenario shares: the kern under test, the marker every command carries, the
// output cap, the soak's own directory, the tallies and problems the report reads, and the random
// draws. Required by soak.js after its re-exec and its flags, so the marker names this process.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')

const ROOT = path.resolve(__dirname, '..', '..')
const standin = path.join(ROOT, 'target', 'release', 'kern-standin')
const KERN = process.env.KERN_BIN
const realpathOr = (p) => {
  try {
    return fs.realpathSync(p)
  } catch {
    return p
  }
}
const KERN_KIND = realpathOr(KERN) === realpathOr(standin) ? 'stand-in' : 'real kern'

const kern = require(ROOT)

// Every command the soak runs carries this string: in argv (so kern's and the box's command lines
// show it, and `kern ps` lists it) and in python code (as a comment).
const MARKER = `ksoak${process.pid}x${crypto.randomBytes(3).toString('hex')}`
const MAX_OUT = 32 * 1024
const SOAK_DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'kern-soak-'))

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const rnd = (n) => crypto.randomInt(n)
const pick = (arr) => arr[rnd(arr.length)]

/** A kind drawn from `mix` ([kind, weight] pairs) in proportion to its weight. */
function weighted(mix) {
  let x = rnd(mix.reduce((a, [, w]) => a + w, 0))
  for (const [k, w] of mix) {
    if (x < w) return k
    x -= w
  }
  return mix[0][0]
}

function sh(script) {
  return ['sh', '-c', `${script}; : ${MARKER}`]
}

/** Bytes and calls the sessions' and calls' callbacks saw. */
const counters = { stdoutBytes: 0, stderrBytes: 0, callbackThrows: 0, perCallChunks: 0 }

/** Per `phase:kind`: { n, bad, ms }. */
const tally = {}
const problems = []
const state = { hungCalls: 0 }

module.exports = {
  /** soak.js's parsed flags. */
  args: null,
  ROOT,
  standin,
  KERN,
  KERN_KIND,
  kern,
  MARKER,
  MAX_OUT,
  SOAK_DIR,
  sleep,
  rnd,
  pick,
  weighted,
  sh,
  counters,
  tally,
  problems,
  state,
}
