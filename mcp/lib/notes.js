'use strict'
// kern's own notes (the "caps not enforced on this host" warning and its kin) come first on a
// box's stderr. They are about the host, not the model's code: they are taken out of what the
// model sees and written once to the server's own stderr, for the person who runs it.

/** A line kern wrote about itself rather than the workload's output. */
function isKernNote(line) {
  const l = line.trimStart()
  return (
    l.startsWith('kern: warning:') ||
    l.startsWith('kern: note:') ||
    (l.startsWith('kern: ') && l.includes('not enforced')) ||
    l.startsWith('kern: security-profile=')
  )
}

/** Logs each distinct note once per process. */
class NoteLog {
  #seen = new Set()
  #write

  constructor(write = (text) => process.stderr.write(text)) {
    this.#write = write
  }

  log(note) {
    if (this.#seen.has(note)) return
    this.#seen.add(note)
    this.#write(`kern-sandbox-mcp: ${note}\n`)
  }

  /** `stderr` without the notes that lead it; the notes go to the log. Only the leading run is
   * taken: a line the code itself printed later is the code's output. */
  strip(stderr) {
    if (!stderr.startsWith('kern: ') && !/^\s+kern: /.test(stderr)) return stderr
    const lines = stderr.split('\n')
    let i = 0
    while (i < lines.length && isKernNote(lines[i])) this.log(lines[i++].trim())
    return lines.slice(i).join('\n')
  }

  /** A filter for live stderr chunks: holds back the first line(s) until they are known to be
   * notes (dropped) or output (passed on, with everything after). */
  liveFilter(forward) {
    let pending = ''
    let passing = false
    return (text) => {
      if (passing) return forward(text)
      pending += text
      let nl
      while ((nl = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, nl)
        if (!isKernNote(line)) break
        this.log(line.trim())
        pending = pending.slice(nl + 1)
      }
      // A partial first line that cannot become a note (or is already too long to be one) is output.
      const undecided = pending.indexOf('\n') < 0 && pending.length < 4096 && 'kern: '.startsWith(pending.trimStart().slice(0, 6))
      if (pending === '' || undecided) return
      passing = true
      const out = pending
      pending = ''
      forward(out)
    }
  }
}

module.exports = { isKernNote, NoteLog }
