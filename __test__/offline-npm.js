'use strict'
// Offline installs for the install tests (this package's and mcp/'s): npm that cannot reach any
// registry (--offline, a fresh cache, a registry on a closed port), node without the loader
// override, and empty consumer projects, all under one temp root removed at exit.

const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const cp = require('node:child_process')

/** A temp root (removed at exit) and the tools that work in it. */
function offlineRoot(prefix) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  process.on('exit', () => fs.rmSync(root, { recursive: true, force: true }))

  /** npm with no way to reach a registry; fails the test on a non-zero exit. */
  function npm(args, cwd) {
    const env = { ...process.env }
    for (const k of Object.keys(env)) if (/^npm_(config|package|lifecycle)_/i.test(k)) delete env[k]
    const r = cp.spawnSync(
      'npm',
      [
        ...args,
        '--offline',
        '--no-audit',
        '--no-fund',
        '--cache',
        path.join(root, 'npm-cache'),
        '--registry',
        'http://127.0.0.1:9/',
        '--loglevel',
        'warn',
      ],
      { cwd, env, encoding: 'utf8', timeout: 120_000 },
    )
    assert.equal(r.status, 0, `npm ${args.join(' ')} failed:\n${r.stdout}\n${r.stderr}`)
    return r
  }

  function node(args, cwd, env = {}) {
    const e = { ...process.env, ...env }
    delete e.NAPI_RS_NATIVE_LIBRARY_PATH
    return cp.spawnSync(process.execPath, args, { cwd, env: e, encoding: 'utf8', timeout: 120_000 })
  }

  function emptyProject(name) {
    const dir = path.join(root, name)
    fs.mkdirSync(dir)
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name, version: '1.0.0', private: true }))
    return dir
  }

  return { root, npm, node, emptyProject }
}

/** Tarballs of the library's runtime dependencies (acorn, amaro), packed from the checkout's
 * node_modules into `out`: an offline install takes them beside the library's own tarballs. */
function dependencyTarballs(out) {
  const repo = path.join(__dirname, '..')
  const deps = Object.keys(require(path.join(repo, 'package.json')).dependencies || {})
  return deps.map((name) => {
    const r = cp.spawnSync(
      'npm',
      [
        'pack',
        path.join(repo, 'node_modules', name),
        '--ignore-scripts',
        '--pack-destination',
        out,
        '--json',
        '--loglevel',
        'warn',
      ],
      {
        encoding: 'utf8',
        timeout: 120_000,
      },
    )
    assert.equal(r.status, 0, `npm pack ${name} failed:\n${r.stderr}`)
    return { name, file: path.join(out, JSON.parse(r.stdout)[0].filename) }
  })
}

module.exports = { offlineRoot, dependencyTarballs }
