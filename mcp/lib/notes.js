'use strict'
// kern's own notes (the "caps not enforced on this host" warning, the uid-map note and their kin)
// are about the host, not the model's code. kern-sandbox already keeps the ones kern prints before a
// box starts out of stderr (node prints each once on the server's stderr, as a KernWarning); what
// is left here (notes kern prints after a box ends) is taken out of what the model sees and written
// once to the server's own stderr, for the person who runs it.

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

/** kern has a handful of notes; the box can print lines that look like them. Past this many
 * distinct ones, nothing more is logged, so the box cannot grow the server's memory or its log. */
const SEEN_MAX = 64

/** Logs each distinct note once per process. */
class NoteLog {
  #seen = new Set()
  #write

  constructor(write = (text) => process.stderr.write(text)) {
    this.#write = write
  }

  log(note) {
    if (this.#seen.has(note) || this.#seen.size >= SEEN_MAX) return
    this.#seen.add(note)
    this.#write(`kern-sandbox-mcp: ${note.slice(0, 500)}\n`)
  }

  /** `stderr` without kern's note lines (kern writes them before the box starts and after it
   * ends, so they lead or trail the output); the notes go to the log. */
  strip(stderr) {
    if (!stderr.includes('kern: ')) return stderr
    const kept = []
    for (const line of stderr.split('\n')) {
      if (isKernNote(line)) this.log(line.trim())
      else kept.push(line)
    }
    return kept.join('\n')
  }

  /** A filter for live stderr chunks: the start of each line is held back while it may still be
   * a kern note, then dropped (a note) or passed on. */
  liveFilter(forward) {
    let pending = ''
    let atLineStart = true
    return (text) => {
      let out = ''
      let i = 0
      while (i < text.length) {
        const nl = text.indexOf('\n', i)
        const piece = nl < 0 ? text.slice(i) : text.slice(i, nl + 1)
        i += piece.length
        if (!atLineStart && !pending) {
          out += piece
          atLineStart = piece.endsWith('\n')
          continue
        }
        pending += piece
        if (pending.endsWith('\n')) {
          if (isKernNote(pending.slice(0, -1))) this.log(pending.trim())
          else out += pending
          pending = ''
          atLineStart = true
        } else if (!mayBecomeNote(pending)) {
          out += pending
          pending = ''
          atLineStart = false
        }
      }
      if (out) forward(out)
    }
  }
}

/** Whether an unfinished line could still turn out to be one of kern's notes. */
function mayBecomeNote(start) {
  const t = start.trimStart()
  return start.length < 4096 && (t.startsWith('kern: ') || 'kern: '.startsWith(t))
}

module.exports = { isKernNote, NoteLog }
