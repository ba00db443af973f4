'use strict'
// One cargo build of one executable, for the build scripts of the programs that ship beside the
// .node (build-agent.js, build-egress.js): cargo's JSON messages name the file it produced.

const cp = require('node:child_process')

/** Runs `cargo <args> --message-format json-render-diagnostics` in `cwd` and returns the path of
 * the executable `name` it built (diagnostics still reach the terminal). */
function cargoExecutable(cwd, args, name) {
  const all = [...args, '--message-format', 'json-render-diagnostics']
  const r = cp.spawnSync('cargo', all, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
  if (r.status !== 0) throw new Error(`cargo ${all.join(' ')} failed (exit ${r.status})`)
  const exe = r.stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l))
    .filter((m) => m.reason === 'compiler-artifact' && m.target.name === name && m.executable)
    .map((m) => m.executable)
    .pop()
  if (!exe) throw new Error(`cargo built no ${name} executable`)
  return exe
}

module.exports = { cargoExecutable }
