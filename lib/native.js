'use strict'
// The native core: the generated loader (binding.js), with a message that says what to do when no
// binary loads, and the exit-time cleanup that process.exit() would otherwise skip.

const pkg = require('../package.json')

function loadNative() {
  const where = `${process.platform}-${process.arch}`
  if (process.platform !== 'linux') {
    throw new Error(
      `kern-sandbox runs on Linux only (kern is a Linux kernel sandbox); this is ${where}. ` +
        'On Windows use WSL2, on macOS a Linux VM.',
    )
  }
  try {
    return require('../binding.js')
  } catch (e) {
    // binding.js chains each attempt as `cause`, newest first: list them in the order tried, less
    // its WASI fallbacks (this package ships none).
    const tried = []
    for (let c = e.cause; c; c = c.cause) {
      const line = String(c.message).split('\n')[0]
      if (!/wasi|wasm32/i.test(line)) tried.unshift(`  - ${line}`)
    }
    if (!tried.length) tried.push(`  - ${String(e.message).split('\n')[0]}`)
    if (process.report) process.report.excludeNetwork = true
    const glibc = process.report && process.report.getReport().header.glibcVersionRuntime
    const platformPkg = `${pkg.name}-linux-${process.arch}-${glibc ? 'gnu' : 'musl'}@${pkg.version}`
    const err = new Error(
      `kern-sandbox: no native binary loads on ${where} (${glibc ? `glibc ${glibc}` : 'musl'}). ` +
        `Tried:\n${tried.join('\n')}\nFix: ` +
        (['x64', 'arm64'].includes(process.arch)
          ? `npm installs the prebuilt binary as the optional dependency ${platformPkg}; reinstall ` +
            'without --no-optional / --omit=optional (a lockfile made on another platform can lack ' +
            'it: remove node_modules and package-lock.json, then npm install), '
          : 'prebuilt binaries exist for Linux x64 and arm64 (glibc 2.17+ or musl) only; ') +
        'or build from source in a checkout with `npm run build` (needs Rust).',
    )
    err.cause = e
    throw err
  }
}

const native = loadNative()
// A call's result object, made by V8 from an object literal: the native side passes the values,
// in the order of these fields, where setting them one napi call at a time took longer.
native.shapeResults(
  ['stdout', 'stderr', 'exitCode', 'durationMs', 'fault', 'files', 'truncated', 'rich', 'executionCount'],
  (stdout, stderr, exitCode, durationMs, fault, files, truncated, rich, executionCount) => ({
    stdout,
    stderr,
    exitCode,
    durationMs,
    fault,
    files,
    truncated,
    rich,
    executionCount,
  }),
)
// process.exit() skips napi's env cleanup hooks; the 'exit' event still fires, so boxes and
// temp workspaces are cleaned up from here too (a normal exit runs both; the second is a no-op).
process.once('exit', () => native.cleanupNow())

module.exports = native
