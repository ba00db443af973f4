'use strict'
// Each framework entry's declarations compile under `tsc --strict` against that framework's own
// published types (types/*-examples.*).

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const cp = require('node:child_process')

const tsc = require.resolve('typescript/bin/tsc')
const dir = path.join(__dirname, 'types')

/** The tsc project to run. */
function project(name) {
  return path.join(dir, name)
}

for (const [name, what] of [
  ['tsconfig.json', 'ai, openai-agents, langchain'],
  ['tsconfig.mastra.json', 'mastra'],
]) {
  test(`tsc --noEmit --strict compiles the framework entries against the framework types: ${what}`, async () => {
    const config = project(name)
    const { code, out } = await new Promise((resolve) => {
      const child = cp.spawn(process.execPath, [tsc, '-p', config, '--pretty', 'false'], { cwd: dir })
      let out = ''
      child.stdout.on('data', (d) => (out += d))
      child.stderr.on('data', (d) => (out += d))
      child.on('close', (code) => resolve({ code, out }))
    })
    assert.equal(code, 0, `tsc -p ${config}:\n${out}`)
  })
}
