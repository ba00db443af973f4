'use strict'
// Install test (issue 4): pack the main package and this host's platform package exactly as a
// release does (scripts/pack.js), install both from the tarballs into an empty project with no
// network (npm --offline, an empty cache, a registry that does not answer), then require, ESM
// import, TypeScript and one runCode from there. The main package lists all four platform packages
// as optionalDependencies; none is on a registry here, so this also shows npm skips the ones it
// cannot have instead of failing. Needs the host addon (`npm run build`) and a kern: $KERN_BIN, else
// the stand-in (`npm run build:standin`).

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const cp = require('node:child_process')
const { repo, pkg, targets, hostTarget } = require('../scripts/targets.js')
const { pack } = require('../scripts/pack.js')
const { offlineRoot, dependencyTarballs } = require('./offline-npm.js')

const host = hostTarget()
const kernBin = process.env.KERN_BIN || path.join(repo, 'target', 'release', 'kern-standin')
const skip = !host
  ? `no release target for ${process.platform}-${process.arch}`
  : !fs.existsSync(path.join(repo, host.nodeFile))
    ? `${host.nodeFile} is not built (npm run build)`
    : false

const { root, npm, node, emptyProject } = offlineRoot('kern-install-')

let packed
let deps
let project

test("pack: the main package and this host's platform package", { skip }, () => {
  packed = pack({ artifacts: repo, out: path.join(root, 'tarballs'), targets: [host] })
  const manifest = JSON.parse(
    cp.execFileSync('tar', ['-xzOf', packed.main.file, 'package/package.json'], { encoding: 'utf8' }),
  )
  assert.deepEqual(manifest.optionalDependencies, Object.fromEntries(targets.map((t) => [t.packageName, pkg.version])))
  assert.deepEqual(manifest.dependencies, pkg.dependencies)
  assert.ok(packed.main.files.includes('binding.js'))
  assert.ok(!packed.main.files.some((f) => f.endsWith('.node')))
  assert.deepEqual(
    packed.platforms[0].files.sort(),
    ['README.md', host.nodeFile, 'kern-sandbox-agent', 'kern-sandbox-egress', 'package.json'].sort(),
  )
})

test(
  'npm install --offline from the tarballs (ours and our two dependencies): nothing else fetched, the right binary in place',
  { skip },
  () => {
    project = emptyProject('consumer')
    deps = dependencyTarballs(path.join(root, 'tarballs'))
    npm(['install', packed.main.file, packed.platforms[0].file, ...deps.map((d) => d.file)], project)
    const names = [pkg.name, host.packageName, ...deps.map((d) => d.name)].sort()
    const installed = fs.readdirSync(path.join(project, 'node_modules')).filter((n) => !n.startsWith('.'))
    assert.deepEqual(installed.sort(), names, 'the install pulled in something else')
    const lock = JSON.parse(fs.readFileSync(path.join(project, 'package-lock.json'), 'utf8'))
    assert.deepEqual(
      Object.keys(lock.packages).filter(Boolean).sort(),
      names.map((n) => `node_modules/${n}`),
    )
    assert.ok(fs.existsSync(path.join(project, 'node_modules', host.packageName, host.nodeFile)))
    const agent = path.join(project, 'node_modules', host.packageName, 'kern-sandbox-agent')
    assert.ok(fs.statSync(agent).mode & 0o111, 'the machine agent is installed executable')
    // Beside the .node, where the addon looks for it (src/locate.rs).
    const egress = path.join(project, 'node_modules', host.packageName, 'kern-sandbox-egress')
    assert.ok(fs.statSync(egress).mode & 0o111, 'the egress proxy is installed executable')
    assert.ok(
      !fs.existsSync(path.join(project, 'node_modules', pkg.name, host.nodeFile)),
      'the main package carries a binary',
    )
  },
)

test('require, ESM import and runCode work from the installed package', { skip }, () => {
  assert.ok(fs.existsSync(kernBin), `no kern to run against: ${kernBin} (set KERN_BIN or npm run build:standin)`)
  fs.writeFileSync(
    path.join(project, 'cjs.js'),
    `const kern = require('kern-sandbox')
const resolved = require.resolve('kern-sandbox')
kern.runCode('print(sum(range(100)))', { timeoutS: 60 }).then(async (r) => {
  const js = await kern.runCode('const xs: number[] = [1, 2, 3]; xs.map((x) => x * 2)', { language: 'typescript', timeoutS: 60 })
  const net = await kern.runCode('print(7)', { network: { allowOut: ['a.test'] }, timeoutS: 60 })
  console.log(JSON.stringify({ resolved, version: kern.version, stdout: r.stdout, success: r.success, fault: r.fault, ts: js.results.map((x) => x.text), net: net.stdout }))
})`,
  )
  fs.writeFileSync(
    path.join(project, 'esm.mjs'),
    `import kern, { runCode, Sandbox, version } from 'kern-sandbox'
const r = await runCode('print(6 * 7)', { timeoutS: 60 })
console.log(JSON.stringify({ resolved: import.meta.resolve('kern-sandbox'), same: kern.Sandbox === Sandbox, version, stdout: r.stdout, success: r.success }))`,
  )
  const cjs = node(['cjs.js'], project, { KERN_BIN: kernBin })
  assert.equal(cjs.status, 0, cjs.stderr)
  const c = JSON.parse(cjs.stdout)
  assert.equal(c.resolved, path.join(project, 'node_modules', pkg.name, 'index.js'))
  assert.deepEqual([c.version, c.stdout, c.success, c.fault], [pkg.version, '4950\n', true, null])
  assert.deepEqual(c.ts, ['[ 2, 4, 6 ]'], 'a TypeScript cell runs through the installed dependencies')
  assert.equal(c.net, '7\n', 'a network policy starts the installed kern-sandbox-egress')
  const esm = node(['esm.mjs'], project, { KERN_BIN: kernBin })
  assert.equal(esm.status, 0, esm.stderr)
  const e = JSON.parse(esm.stdout)
  assert.equal(e.resolved, `file://${path.join(project, 'node_modules', pkg.name, 'index.mjs')}`)
  assert.deepEqual([e.same, e.version, e.stdout, e.success], [true, pkg.version, '42\n', true])
  // `npx kern-sandbox doctor` runs the installed bin, whose box comes up through the installed addon.
  const bin = path.join(project, 'node_modules', '.bin', 'kern-sandbox')
  const doctor = cp.spawnSync(bin, ['doctor', '--json'], {
    cwd: project,
    encoding: 'utf8',
    env: { ...process.env, KERN_BIN: kernBin },
    timeout: 120_000,
  })
  assert.equal(doctor.status, 0, doctor.stderr + doctor.stdout)
  const report = JSON.parse(doctor.stdout)
  assert.equal(report.ok, true)
  assert.match(report.checks.find((c) => c.id === 'agent').why, /node_modules\/kern-sandbox-linux-/)
})

test(
  'kern-sandbox/e2b works from the installed package: require and import, a cell, a file, a command',
  { skip },
  () => {
    fs.writeFileSync(
      path.join(project, 'e2b.js'),
      `const { Sandbox, CommandExitError } = require('kern-sandbox/e2b')
;(async () => {
  const sbx = await Sandbox.create()
  const ex = await sbx.runCode('x = 6 * 7\\nprint("printed")\\nx')
  await sbx.files.write('hello.txt', 'from the host')
  const cmd = await sbx.commands.run('cat /home/user/hello.txt')
  await sbx.kill()
  console.log(JSON.stringify({ resolved: require.resolve('kern-sandbox/e2b'), text: ex.text, stdout: ex.logs.stdout, cmd: cmd.stdout, exitError: typeof CommandExitError }))
})()`,
    )
    fs.writeFileSync(
      path.join(project, 'e2b.mjs'),
      `import { Sandbox } from 'kern-sandbox/e2b'
import e2b from 'kern-sandbox/e2b'
const sbx = await Sandbox.create()
const ex = await sbx.runCode('!echo shell escape')
await sbx.kill()
console.log(JSON.stringify({ resolved: import.meta.resolve('kern-sandbox/e2b'), same: e2b.Sandbox === Sandbox, stdout: ex.logs.stdout }))`,
    )
    const cjs = node(['e2b.js'], project, { KERN_BIN: kernBin })
    assert.equal(cjs.status, 0, cjs.stderr)
    const c = JSON.parse(cjs.stdout)
    assert.equal(c.resolved, path.join(project, 'node_modules', pkg.name, 'lib', 'e2b', 'entry.js'))
    assert.deepEqual([c.text, c.stdout, c.cmd, c.exitError], ['42', ['printed\n'], 'from the host', 'function'])
    const esm = node(['e2b.mjs'], project, { KERN_BIN: kernBin })
    assert.equal(esm.status, 0, esm.stderr)
    const e = JSON.parse(esm.stdout)
    assert.equal(e.resolved, `file://${path.join(project, 'node_modules', pkg.name, 'lib', 'e2b', 'entry.mjs')}`)
    assert.deepEqual([e.same, e.stdout], [true, ['shell escape\n']])
  },
)

test(
  'every subpath resolves from the installed package: require to lib/<name>/entry.js, import to entry.mjs',
  { skip },
  () => {
    // Resolution only: the framework entries' peers are not installed here (resolving loads nothing).
    const subpaths = ['e2b', 'ai', 'openai-agents', 'mastra', 'langchain']
    fs.writeFileSync(
      path.join(project, 'resolve.mjs'),
      `import { createRequire } from 'node:module'
const require = createRequire(import.meta.url)
const subpaths = ${JSON.stringify(subpaths)}
console.log(JSON.stringify(subpaths.map((s) => [require.resolve('kern-sandbox/' + s), import.meta.resolve('kern-sandbox/' + s)])))`,
    )
    const r = node(['resolve.mjs'], project)
    assert.equal(r.status, 0, r.stderr)
    const installed = path.join(project, 'node_modules', pkg.name)
    assert.deepEqual(
      JSON.parse(r.stdout),
      subpaths.map((s) => [
        path.join(installed, 'lib', s, 'entry.js'),
        `file://${path.join(installed, 'lib', s, 'entry.mjs')}`,
      ]),
    )
    for (const s of subpaths)
      for (const f of ['entry.js', 'entry.mjs', 'entry.d.ts', 'entry.d.mts'])
        assert.ok(packed.main.files.includes(`lib/${s}/${f}`), `lib/${s}/${f} not in the tarball`)
  },
)

test(
  'TypeScript finds the installed types (nodenext: both entries; node10: the top-level "types" and typesVersions)',
  { skip },
  async () => {
    const tsc = require.resolve('typescript/bin/tsc')
    const tsMajor = Number(require('typescript').version.split('.')[0])
    fs.writeFileSync(
      path.join(project, 'use.ts'),
      `import kern = require('kern-sandbox')
import { Sandbox, type SandboxFaultType } from 'kern-sandbox'
export async function f(): Promise<SandboxFaultType | undefined> {
  await using sbx = await new Sandbox({ securityProfile: 'untrusted' }).open()
  const r = await kern.runCode('1', { signal: AbortSignal.timeout(1000) })
  await sbx.readFile('x', { maxBytes: 1 })
  return r.fault?.type
}
`,
    )
    fs.writeFileSync(
      path.join(project, 'use.mts'),
      `import kern, { runCode } from 'kern-sandbox'
const r = await runCode('print(1)')
export const ok: boolean = r.success && kern.version.length > 0
`,
    )
    fs.writeFileSync(
      path.join(project, 'use-e2b.mts'),
      `import { Sandbox, CommandExitError, type Execution } from 'kern-sandbox/e2b'
const sbx = await Sandbox.create({ timeoutMs: 60_000 })
const ex: Execution = await sbx.runCode('1 + 1', { onStdout: (m) => console.log(m.line) })
export const text: string | undefined = ex.text
export const isExit = (e: unknown): boolean => e instanceof CommandExitError && e.exitCode !== 0
await sbx.kill()
`,
    )
    fs.writeFileSync(
      path.join(project, 'use-e2b.cts'),
      `import e2b = require('kern-sandbox/e2b')
export const create = (): Promise<e2b.Sandbox> => e2b.Sandbox.create('code-interpreter-v1', { allowInternetAccess: false })
`,
    )
    // node10 has no exports map: kern-sandbox/e2b reaches lib/e2b/entry.d.ts through typesVersions.
    fs.writeFileSync(
      path.join(project, 'use-e2b.ts'),
      `import e2b = require('kern-sandbox/e2b')
import { Sandbox, type Execution } from 'kern-sandbox/e2b'
export async function f(): Promise<string | undefined> {
  const sbx: e2b.Sandbox = await Sandbox.create({ timeoutMs: 60_000 })
  const ex: Execution = await sbx.runCode('1 + 1')
  return ex.text
}
`,
    )
    const typeRoots = [path.join(repo, 'node_modules', '@types')]
    // skipLibCheck: index.d.ts itself is checked by types/types.test.js; here only resolution and use.
    const base = {
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      target: 'es2022',
      lib: ['es2022', 'esnext.disposable'],
      types: ['node'],
      typeRoots,
    }
    const configs = {
      nodenext: {
        compilerOptions: { ...base, module: 'nodenext', moduleResolution: 'nodenext' },
        files: ['use.ts', 'use.mts', 'use-e2b.mts', 'use-e2b.cts'],
      },
      node10: {
        compilerOptions: {
          ...base,
          module: 'commonjs',
          moduleResolution: 'node10',
          esModuleInterop: true,
          ...(tsMajor >= 6 ? { ignoreDeprecations: '6.0' } : {}),
        },
        files: ['use.ts', 'use-e2b.ts'],
      },
    }
    // Both at once: two cores, two compilers.
    const runs = Object.entries(configs).map(([name, config]) => {
      const file = path.join(project, `tsconfig.${name}.json`)
      fs.writeFileSync(file, JSON.stringify(config))
      return new Promise((resolve) => {
        cp.execFile(
          process.execPath,
          [tsc, '-p', file, '--pretty', 'false'],
          { cwd: project },
          (err, stdout, stderr) => {
            resolve({ name, code: err ? err.code : 0, out: `${stdout}${stderr}` })
          },
        )
      })
    })
    for (const r of await Promise.all(runs)) assert.equal(r.code, 0, `tsc (${r.name}):\n${r.out}`)
  },
)

test(
  "installed without the platform package (--omit=optional): require fails with the loader's message",
  { skip },
  () => {
    const bare = emptyProject('bare')
    npm(['install', '--omit=optional', packed.main.file, ...deps.map((d) => d.file)], bare)
    assert.ok(!fs.existsSync(path.join(bare, 'node_modules', host.packageName)))
    const r = node(['-e', "require('kern-sandbox')"], bare)
    assert.notEqual(r.status, 0)
    assert.match(r.stderr, new RegExp(`no native binary loads on linux-${process.arch}`))
    assert.ok(r.stderr.includes(`optional dependency ${host.packageName}@${pkg.version}`), r.stderr)
  },
)
