'use strict'
// Property test of the JS half of the result channel: the lines a box writes back (a one-shot
// call's results file, a kernel's result and error frames) are parsed and vetted by
// lib/results.js. Whatever the bytes, parsing never throws, never trusts a non-string value,
// and garbage yields no results. The Rust half (frames, line splitting) is fuzzed in fuzz/.
// Seeded, so a failure names the case that reproduces it.

const test = require('node:test')
const assert = require('node:assert/strict')
const { Result } = require('./helpers').kern
const { richLine, richOf, finishResult } = require('../lib/results.js')

/** xorshift32: a small seeded generator, so every run checks the same cases. */
function prng(seed) {
  let x = seed >>> 0 || 1
  return (n) => {
    x ^= x << 13
    x >>>= 0
    x ^= x >>> 17
    x ^= x << 5
    x >>>= 0
    return x % n
  }
}

/** Checks one vetted line: null, a Result of strings, or an error of three strings. */
function checkVetted(got, what) {
  if (got === null) return
  assert.equal(typeof got, 'object', what)
  if (got.result) {
    assert.ok(got.result instanceof Result, what)
    assert.equal(Object.getPrototypeOf(got.result.data), Object.prototype, what)
    for (const [k, v] of Object.entries(got.result.data)) assert.equal(typeof v, 'string', `${what}: data[${k}]`)
    assert.equal(typeof got.result.isMainResult, 'boolean', what)
    // The accessors never throw, whatever the box sent.
    for (const f of ['text', 'html', 'markdown', 'svg', 'json', 'latex', 'javascript', 'png', 'jpeg'])
      void got.result[f]
    assert.ok(Array.isArray(got.result.formats()), what)
    JSON.stringify(got.result)
  } else {
    assert.ok(got.error, what)
    for (const k of ['name', 'value', 'traceback']) assert.equal(typeof got.error[k], 'string', `${what}: error.${k}`)
  }
}

const SHAPES = [
  () => ({ data: { 'text/plain': '1' }, main: true }),
  () => ({ data: { 'text/plain': 1, 'image/png': null, x: { y: 1 }, z: ['a'] } }),
  () => ({ data: [] }),
  () => ({ data: 'text' }),
  () => ({ data: null, error: { name: 'E', value: 'v', traceback: 't' } }),
  () => ({ error: { name: 1, value: null, traceback: ['x'] } }),
  () => ({ error: 'boom' }),
  () => ({ error: [] }),
  () => JSON.parse('{"data":{"__proto__":"x","constructor":"y","text/plain":"ok"},"main":"true"}'),
  () => JSON.parse('{"__proto__":{"data":{"text/plain":"polluted"}}}'),
  () => ({ data: { 'image/png': '!!!not base64!!!', 'image/jpeg': '' } }),
  () => 42,
  () => null,
  () => [1, 2],
  () => 'just a string',
]

test('random bytes as result lines: never a throw, never a result', () => {
  const rnd = prng(0x5eed)
  for (let i = 0; i < 20000; i++) {
    const len = rnd(4) === 0 ? rnd(2000) : rnd(40)
    const bytes = Buffer.alloc(len)
    for (let j = 0; j < len; j++) bytes[j] = rnd(256)
    // What the host hands JS: lossy UTF-8 of the box's bytes.
    const text = bytes.toString('utf8')
    const what = `case ${i}: ${bytes.toString('base64')}`
    let parsed = true
    try {
      JSON.parse(text)
    } catch {
      parsed = false
    }
    const got = richLine(text, 1)
    checkVetted(got, what)
    if (!parsed) assert.equal(got, null, what)
  }
})

test('hostile JSON shapes and their random corruptions are vetted, not trusted', () => {
  const rnd = prng(0xc0ffee)
  for (let i = 0; i < 5000; i++) {
    let text = JSON.stringify(SHAPES[rnd(SHAPES.length)]())
    // Now and then flip, cut or splice a few bytes.
    for (let m = rnd(3); m > 0; m--) {
      const at = rnd(text.length + 1)
      const op = rnd(3)
      if (op === 0) text = text.slice(0, at)
      else if (op === 1) text = text.slice(0, at) + String.fromCharCode(rnd(128)) + text.slice(at + 1)
      else text = text.slice(0, at) + text.slice(rnd(text.length + 1))
    }
    checkVetted(richLine(text, i), `case ${i}: ${JSON.stringify(text)}`)
  }
  assert.equal({}.data, undefined, 'no prototype was polluted')
})

test('a whole results set of garbage ends in results: [] and error: null, and the result still builds', () => {
  const rnd = prng(0xbad)
  for (let i = 0; i < 500; i++) {
    const lines = Array.from({ length: rnd(20) }, () => {
      const b = Buffer.alloc(rnd(80))
      for (let j = 0; j < b.length; j++) b[j] = rnd(256)
      return '#' + b.toString('utf8') // '#' first: never valid JSON
    })
    const { results, error } = richOf(lines, 3)
    assert.deepEqual(results, [])
    assert.equal(error, null)
    const r = finishResult({ stdout: '', stderr: '', exitCode: 0, durationMs: 1, rich: lines, executionCount: 3 })
    assert.deepEqual(r.results, [])
    assert.equal(r.error, null)
    assert.equal(r.success, true)
  }
})
