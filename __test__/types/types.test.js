'use strict'
// index.d.ts is the public contract: the 0.1.1 README's examples and the 0.2 additions must compile
// under `tsc --noEmit --strict`, against "kern-sandbox" resolved the way consumers resolve it
// (the package's own exports map: node16 for Node, bundler for Vite/esbuild/webpack users; and
// node10, TypeScript's older resolution, which reads "types" and "typesVersions" instead).

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const cp = require('node:child_process')
const ts = require('typescript')

const tsc = require.resolve('typescript/bin/tsc')
const repo = path.resolve(__dirname, '..', '..')

// node10 has no self-reference by package name: a consumer project whose node_modules/kern-sandbox
// is this repo (a symlink, as `npm link` makes), so every resolution below walks node_modules.
const consumer = fs.mkdtempSync(path.join(os.tmpdir(), 'kern-types-'))
process.on('exit', () => fs.rmSync(consumer, { recursive: true, force: true }))
fs.mkdirSync(path.join(consumer, 'node_modules'))
fs.symlinkSync(repo, path.join(consumer, 'node_modules', 'kern-sandbox'), 'dir')

function compile(config, cwd = __dirname) {
  return new Promise((resolve) => {
    const child = cp.spawn(process.execPath, [tsc, '-p', path.join(cwd, config), '--pretty', 'false'], {
      cwd,
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

test('tsc --noEmit --strict compiles the CommonJS examples under node10: readme-examples.ts and e2b-examples.ts', async () => {
  // kern-sandbox/e2b reaches lib/e2b/entry.d.ts through typesVersions only (node10 ignores exports).
  const files = ['readme-examples.ts', 'e2b-examples.ts']
  for (const f of files) fs.copyFileSync(path.join(__dirname, f), path.join(consumer, f))
  const tsMajor = Number(ts.version.split('.')[0])
  const config = {
    compilerOptions: {
      strict: true,
      noEmit: true,
      target: 'es2022',
      module: 'commonjs',
      moduleResolution: 'node10',
      esModuleInterop: true,
      lib: ['es2022', 'esnext.disposable'],
      types: ['node'],
      typeRoots: [path.join(repo, 'node_modules', '@types')],
      skipLibCheck: false,
      noUnusedLocals: false,
      ...(tsMajor >= 6 ? { ignoreDeprecations: '6.0' } : {}),
    },
    files,
  }
  fs.writeFileSync(path.join(consumer, 'tsconfig.node10.json'), JSON.stringify(config))
  const { code, out } = await compile('tsconfig.node10.json', consumer)
  assert.equal(code, 0, `tsc (node10, TypeScript ${ts.version}):\n${out}`)
})

test('every subpath resolves to its declarations under node10, node16, nodenext and bundler, for require and import', () => {
  const from = path.join(consumer, 'use.ts')
  const declarations = (name, esm) =>
    path.join(repo, ...(name ? ['lib', name, 'entry'] : ['index'])) + (esm ? '.d.mts' : '.d.ts')
  const ignoreDeprecations = Number(ts.version.split('.')[0]) >= 6 ? '6.0' : undefined
  const modes = [
    // node10 has no resolution modes (tsc asks with none); it reads "types" and "typesVersions".
    ['node10', undefined, false],
    ['node16', ts.ModuleKind.CommonJS, false],
    ['node16', ts.ModuleKind.ESNext, true],
    ['nodenext', ts.ModuleKind.CommonJS, false],
    ['nodenext', ts.ModuleKind.ESNext, true],
    ['bundler', ts.ModuleKind.CommonJS, false],
    ['bundler', ts.ModuleKind.ESNext, true],
  ]
  for (const [resolution, mode, esm] of modes) {
    const options = ts.convertCompilerOptionsFromJson(
      {
        module: resolution === 'bundler' ? 'esnext' : resolution === 'node10' ? 'commonjs' : resolution,
        moduleResolution: resolution,
        ignoreDeprecations,
      },
      consumer,
    )
    assert.deepEqual(options.errors, [])
    for (const name of [null, 'e2b', 'ai', 'openai-agents', 'mastra', 'langchain']) {
      const spec = name ? `kern-sandbox/${name}` : 'kern-sandbox'
      const r = ts.resolveModuleName(spec, from, options.options, ts.sys, undefined, undefined, mode)
      const what = `${spec} (${resolution}, ${esm ? 'import' : 'require'})`
      assert.ok(r.resolvedModule, `${what} does not resolve`)
      assert.equal(r.resolvedModule.resolvedFileName, declarations(name, esm), what)
    }
  }
})
