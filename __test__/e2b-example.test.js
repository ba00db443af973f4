'use strict'
// examples/e2b-coding-agent.js runs offline, as a user runs it: an E2B coding-agent loop (files,
// tests, a fix, a background dev server reached through getHost, a cell and a command reaching it).

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const cp = require('node:child_process')
require('./helpers') // sets KERN_BIN (a real kern or the stand-in)

const repo = path.resolve(__dirname, '..')

test('examples/e2b-coding-agent.js runs the loop end to end', async () => {
  const { code, out, err } = await new Promise((resolve) => {
    const child = cp.spawn(process.execPath, [path.join(repo, 'examples', 'e2b-coding-agent.js')], {
      cwd: repo,
      env: process.env,
    })
    let out = ''
    let err = ''
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => (err += d))
    child.on('close', (c) => resolve({ code: c, out, err }))
  })
  assert.equal(code, 0, `${out}\n${err}`)
  for (const p of [
    /files -> app\.py, test_app\.py/,
    /run 1 -> tests fail \(exit 1\): AssertionError: 9 != 12/,
    /run 2 -> tests pass/,
    /preview http:\/\/127\.0\.0\.1:\d+\/ -> \{"total": 12\}/,
    /in-sandbox request -> \{"total": 12\}/,
    /cell -> 24/,
    /listed -> pid \d+: python3 app\.py 8000 in \/home\/user\/project/,
    /server stopped -> exit 137/,
  ]) {
    assert.match(out, p)
  }
})
