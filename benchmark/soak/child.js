'use strict'
// The scenarios that run in a Node process of their own (proxy, box-egress, cycles), so that what
// they measure of a process is theirs alone: how soak.js starts one and reads its result, and the
// child's entry point.

const cp = require('node:child_process')

/** Runs the scenario `file` in a child Node (`--expose-gc`) with `args`; resolves to the JSON of
 * the child's last output line, or to null when it gave none (`problems` then says why). */
function runChild(name, file, args, { timeout, env = process.env }) {
  const { problems } = require('./context')
  const argv = ['--expose-gc', file, ...args]
  return new Promise((resolve) => {
    cp.execFile(process.execPath, argv, { maxBuffer: 16 << 20, timeout, env }, (err, stdout, stderr) => {
      let r = null
      try {
        r = JSON.parse(stdout.trim().split('\n').pop())
      } catch {
        problems.push(`${name}: the child gave no result (${err ? err.message : 'no output'}): ${stderr.slice(-400)}`)
      }
      resolve(r)
    })
  })
}

/** The child's side: when `mod` is the program Node runs, `main(argv)`, then exit 0 (1 with the
 * error printed when it rejects). */
function childMain(mod, main) {
  if (require.main !== mod) return
  main(process.argv.slice(2)).then(
    () => process.exit(0),
    (e) => {
      console.error(e)
      process.exit(1)
    },
  )
}

module.exports = { runChild, childMain }
