'use strict'
// Install test: both tarballs as a release makes them (the library through scripts/pack.js, this
// package through npm pack), installed with no registry reachable into a project that already
// holds the SDK's dependency tree (copied from mcp/node_modules: the registry's part of an install
// is not what is tested), then `npx kern-sandbox-mcp` driven by the SDK's own client.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const cp = require('node:child_process')
const { repo, pkg, hostTarget } = require('../../scripts/targets.js')
const { pack } = require('../../scripts/pack.js')
const { offlineRoot, dependencyTarballs } = require('../../__test__/offline-npm.js')
const { connect, textOf, run, pkgDir, helpers } = require('./client.js')

const mcpPkg = require('../package.json')
const host = hostTarget()
const skip = !host
  ? `no release target for ${process.platform}-${process.arch}`
  : !fs.existsSync(path.join(repo, host.nodeFile))
    ? `${host.nodeFile} is not built (npm run build)`
    : false

const { root, npm, emptyProject } = offlineRoot('kern-mcp-install-')
let project

test('the mcp tarball: its files, the bin, and the library at exactly this version', { skip }, () => {
  assert.equal(mcpPkg.version, pkg.version, 'kern-sandbox-mcp and kern-sandbox share a version')
  assert.equal(mcpPkg.dependencies['kern-sandbox'], pkg.version)
  assert.match(mcpPkg.dependencies['@modelcontextprotocol/sdk'], /^1\.\d+\.\d+$/)
  // The framework adapters' dev dependencies may pull MCP packages into the lockfile; what the
  // library itself installs (its non-dev entries) must not.
  const { packages } = require(path.join(repo, 'package-lock.json'))
  const shipped = Object.entries(packages).filter(([name, p]) => name.includes('@modelcontextprotocol') && !p.dev)
  assert.deepEqual(
    shipped.map(([name]) => name),
    [],
    "the library's installed dependencies carry no MCP SDK",
  )
})

test('installed offline from the tarballs, npx kern-sandbox-mcp serves a real MCP client', { skip }, async () => {
  const out = path.join(root, 'tarballs')
  const packed = pack({ artifacts: repo, out, targets: [host] })
  const mcpTgz = JSON.parse(
    cp.execFileSync('npm', ['pack', pkgDir, '--pack-destination', out, '--json', '--loglevel', 'warn'], {
      cwd: root,
      encoding: 'utf8',
    }),
  )[0]
  const files = mcpTgz.files.map((f) => f.path).sort()
  assert.ok(
    files.includes('bin/kern-sandbox-mcp.js') && files.includes('lib/server.js') && files.includes('README.md'),
    files.join(' '),
  )
  assert.ok(!files.some((f) => f.startsWith('__test__/') || f.startsWith('node_modules/')), files.join(' '))

  project = emptyProject('consumer')
  // The SDK's tree as `npm ci` in mcp/ left it, minus the link to this repo.
  const src = path.join(pkgDir, 'node_modules')
  fs.cpSync(src, path.join(project, 'node_modules'), {
    recursive: true,
    verbatimSymlinks: true,
    filter: (p) => p !== path.join(src, 'kern-sandbox') && p !== path.join(src, '.package-lock.json'),
  })
  const deps = dependencyTarballs(out).map((d) => d.file)
  npm(['install', packed.main.file, packed.platforms[0].file, ...deps, path.join(out, mcpTgz.filename)], project)
  const lib = path.join(project, 'node_modules', 'kern-sandbox')
  assert.ok(!fs.lstatSync(lib).isSymbolicLink(), 'kern-sandbox came from its tarball')
  assert.equal(require(path.join(lib, 'package.json')).version, pkg.version)
  assert.ok(fs.existsSync(path.join(project, 'node_modules', '.bin', 'kern-sandbox-mcp')))

  const help = cp.spawnSync('npx', ['--offline', '--no', '--', 'kern-sandbox-mcp', '--help'], {
    cwd: project,
    encoding: 'utf8',
    timeout: 60_000,
  })
  assert.equal(help.status, 0, help.stderr)
  assert.match(help.stdout, /--image IMAGE/)

  const s = await connect({
    command: 'npx',
    commandArgs: ['--offline', '--no', '--', 'kern-sandbox-mcp'],
    env: { KERN_BIN: helpers.kernBin },
    cwd: project,
  })
  try {
    const ok = await run(s.client, 'print(6 * 7)')
    assert.equal(ok.isError, false, textOf(ok))
    assert.match(textOf(ok), /^42$/m)
  } finally {
    await s.close()
  }
})
