'use strict'
// The framework examples run offline, as a user runs them: `node examples/<name>`. While
// Sandbox#machine is not merged, preload-fake.js supplies the fake machine; once it is, the
// preload does nothing and the examples run on real machines.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const cp = require('node:child_process')
require('../helpers.js') // sets KERN_BIN (a real kern or the stand-in)

const repo = path.resolve(__dirname, '..', '..')

function runExample(file) {
  return new Promise((resolve) => {
    const child = cp.spawn(
      process.execPath,
      ['-r', path.join(__dirname, 'preload-fake.js'), path.join(repo, 'examples', file)],
      {
        cwd: repo,
        env: process.env,
      },
    )
    let out = ''
    let err = ''
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => (err += d))
    child.on('close', (code) => resolve({ code, out, err }))
  })
}

const EXPECT = {
  'openai-agents.mjs': [
    /write -> Created fib\.py/,
    /Process exited with code 0\nOutput:\n55\nfrom the manifest/,
    /agent: fib\(10\) is 55\./,
  ],
  'mastra.mjs': [/Wrote 53 bytes to \/stats\.py/, /run -> 6/, /after edit -> 5/, /files -> .*stats\.py/],
  'langchain.mjs': [/write_file -> Successfully wrote/, /execute -> Cairo/, /read_file -> .*Oslo,4 \| Lima,19/],
  'ai-sdk.mjs': [
    /shell -> exit 0: 4 sales\.csv/,
    /python -> 62, \[bar chart, \d+ base64 bytes\]/,
    /model: Sales total 62/,
  ],
}

for (const [file, patterns] of Object.entries(EXPECT)) {
  test(`examples/${file} runs offline`, async () => {
    const { code, out, err } = await runExample(file)
    assert.equal(code, 0, `${out}\n${err}`)
    for (const p of patterns) assert.match(out, p)
  })
}
