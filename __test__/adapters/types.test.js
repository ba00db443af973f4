'use strict'
// Each framework entry's declarations compile under `tsc --strict` against that framework's own
// published types (types/*-examples.*). Until machines land, index.d.ts has no Machine: the
// contract is added then by types/machine-contract.d.ts (an augmentation), and only then.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const cp = require('node:child_process')

const tsc = require.resolve('typescript/bin/tsc')
const dir = path.join(__dirname, 'types')
const repo = path.resolve(__dirname, '..', '..')

/** The tsc project to run: `name` itself, or (while index.d.ts has no Machine) a temporary one
 * extending it with the contract's augmentation added to its files. */
function project(name) {
  const hasMachine = /\bclass Machine\b/.test(fs.readFileSync(path.join(repo, 'index.d.ts'), 'utf8'))
  if (hasMachine) return path.join(dir, name)
  const base = JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8').replace(/^\s*\/\/.*$/gm, ''))
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kst-adapter-types-'))
  const config = path.join(tmp, name)
  fs.writeFileSync(
    config,
    JSON.stringify({
      extends: path.join(dir, name),
      compilerOptions: { typeRoots: [path.join(repo, 'node_modules', '@types')] },
      files: [...base.files, 'machine-contract.d.ts'].map((f) => path.join(dir, f)),
    }),
  )
  process.on('exit', () => fs.rmSync(tmp, { recursive: true, force: true }))
  return config
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
