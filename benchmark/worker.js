'use strict'
// One measurement in a fresh Node process, so RSS peaks, heaps and event-loop state never leak
// from one measurement into the next. The runner (lib/runner.js) starts it as
// `node worker.js '<json spec>'` with KERN_BIN set for the row; spec.mode names a mode of one of
// the modules under measure/ (one per family); the result is the last stdout line, prefixed with
// RESULT_TAG.

const RESULT_TAG = '@@RESULT '

const MODULES = ['calls', 'binding', 'snapshot', 'kernels', 'e2b', 'machines', 'forks', 'pool', 'proxy']

function modes() {
  const all = {}
  for (const m of MODULES) {
    for (const [name, fn] of Object.entries(require(`./measure/${m}`))) {
      if (all[name]) throw new Error(`two measure modules define the mode ${name}`)
      all[name] = fn
    }
  }
  return all
}

async function main() {
  let result
  try {
    const spec = JSON.parse(process.argv[2])
    const mode = modes()[spec.mode]
    if (!mode) throw new Error(`no measure mode ${spec.mode}`)
    result = await mode(spec)
  } catch (e) {
    result = { error: String((e && e.stack) || e) }
  }
  process.stdout.write(`\n${RESULT_TAG}${JSON.stringify(result)}\n`)
  process.exit(0)
}

main()
