'use strict'
// How much of what the box hands back reaches the client. The box is untrusted and may print
// gigabytes or produce thousands of results: every reply is bounded here, sized for a model's
// context rather than for the box's output cap, and says when it was clipped.

const LIMITS = Object.freeze({
  /** Characters of stdout, and of stderr, in one reply. */
  streamChars: 20_000,
  /** Characters of one text-shaped rich result (HTML, markdown, JSON, chart data). */
  richChars: 8_000,
  /** Characters of text in one reply, all blocks together (the notes after them excepted). */
  replyChars: 60_000,
  /** Base64 characters of one image; a larger one is left out. */
  imageB64: 3_000_000,
  /** Base64 characters of all images in one reply. */
  replyImageB64: 6_000_000,
  /** Images in one reply. */
  replyImages: 8,
  /** Bytes read_file (and resources/read) load at most; a larger file is refused by size. */
  readBytes: 4 * 1024 * 1024,
  /** Entries list_files (and resources/list) return at most. */
  listEntries: 1_000,
  /** Live output sent as progress notifications per call, in characters. */
  liveChars: 200_000,
  /** Characters of one progress notification. */
  liveChunkChars: 4_000,
})

/** `text` cut to `max` characters, with the cut said in the text. */
function clip(text, max, what = 'output') {
  if (text.length <= max) return text
  return `${text.slice(0, max)}\n[${what} clipped: ${text.length - max} more characters not shown]`
}

/** `text` cut to its first and last parts: for a stream, where the end (a traceback, a final
 * answer) matters as much as the start. */
function clipMiddle(text, max, what) {
  if (text.length <= max) return text
  const head = Math.floor(max * 0.4)
  const tail = max - head
  return `${text.slice(0, head)}\n[${what} clipped: ${text.length - max} characters not shown]\n${text.slice(text.length - tail)}`
}

/** A running text budget for one reply. */
class TextBudget {
  #left
  clipped = false

  constructor(chars = LIMITS.replyChars) {
    this.#left = chars
  }

  /** `text` as far as the budget allows, or null once it is spent. */
  take(text) {
    if (this.#left <= 0) {
      this.clipped = true
      return null
    }
    if (text.length > this.#left) {
      this.clipped = true
      text = text.slice(0, this.#left)
    }
    this.#left -= text.length
    return text
  }
}

module.exports = { LIMITS, clip, clipMiddle, TextBudget }
