// One-shot runner: `node /workspace/.run-<tag>.js` runs the prepared cell in
// /workspace/.cell-<tag>.json with the process's own stdout, stderr and exit status, and writes
// its rich results to /workspace/.res-<tag>.json, one JSON per line.
function run() {
  const runPath = process.argv[1]
  const base = runPath.slice(0, runPath.lastIndexOf('/') + 1)
  const tag = runPath.slice(base.length + '.run-'.length, -'.js'.length)
  const lines = []
  process.argv.splice(1, 1)
  // What `node -e` code (0.1.x ran one-shot node that way) finds as its module's names.
  globalThis.__filename = '[eval]'
  globalThis.__dirname = '.'
  installGlobals(makeDisplay((data) => lines.push(resultJson(data, false))))
  process.on('exit', () => writeResults(base + '.res-' + tag + '.json', lines))
  const file = '<cell>'
  let cell
  const fail = (e) => {
    const { error, text } = describeError(e)
    lines.push(JSON.stringify({ error }))
    process.stderr.write(text)
    process.exitCode = 1
  }
  try {
    cell = JSON.parse(fs.readFileSync(base + '.cell-' + tag + '.json', 'utf8'))
    startCell(cell, file).then((value) => {
      if (value !== undefined) lines.push(resultJson(bundleOf(value), true))
    }, fail)
  } catch (e) {
    fail(e)
  }
}

/** The results, never written through a link or into a FIFO the cell planted at our path. */
function writeResults(path, lines) {
  if (!lines.length) return // no file: the host reads a missing one as no results
  const C = fs.constants
  try {
    const fd = fs.openSync(path, C.O_WRONLY | C.O_CREAT | C.O_TRUNC | C.O_NOFOLLOW | C.O_NONBLOCK, 0o600)
    try {
      fs.writeSync(fd, lines.join('\n'))
    } finally {
      fs.closeSync(fd)
    }
  } catch {
    // results are best-effort; the run's own output and status stand
  }
}

run()
