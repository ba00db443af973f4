'use strict'
// index.d.ts is the public contract: the 0.1.1 README's examples and the 0.2 additions must compile
// under `tsc --noEmit --strict`, against "kern-sandbox" resolved the way consumers resolve it
// (the package's own exports map: node16 for Node, bundler for Vite/esbuild/webpack users).

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const cp = require('node:child_process')

const tsc = require.resolve('typescript/bin/tsc')

function compile(config) {
  return new Promise((resolve) => {
    const child = cp.spawn(process.execPath, [tsc, '-p', path.join(__dirname, config), '--pretty', 'false'], {
      cwd: __dirname,
    })
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => (out += d))
    child.on('close', (code) => resolve({ code, out }))
  })
}

for (const [config, what] of [
  [
    'tsconfig.json',
    'node16: readme-examples.ts and e2b-examples.ts (CommonJS), esm-examples.mts and e2b-esm-examples.mts (ESM)',
  ],
  ['tsconfig.bundler.json', 'bundler resolution: esm-examples.mts and e2b-esm-examples.mts'],
]) {
  test(`tsc --noEmit --strict compiles the examples, ${what}`, async () => {
    const { code, out } = await compile(config)
    assert.equal(code, 0, `tsc -p __test__/types/${config} (TypeScript ${require('typescript').version}):\n${out}`)
  })
}
