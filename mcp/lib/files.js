'use strict'
// Workspace files for the model (read_file, list_files) and for the client (resources): what a
// file's bytes are (text, an image, other binary), bounded reads, bounded listings.

const { LIMITS } = require('./bounds.js')

/** Image formats by their first bytes: MCP image blocks and resource blobs carry these. */
const MAGIC = [
  {
    mime: 'image/png',
    test: (b) => b.length >= 8 && b.readUInt32BE(0) === 0x89504e47 && b.readUInt32BE(4) === 0x0d0a1a0a,
  },
  { mime: 'image/jpeg', test: (b) => b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff },
  { mime: 'image/gif', test: (b) => b.length >= 6 && /^GIF8[79]a$/.test(b.toString('latin1', 0, 6)) },
  {
    mime: 'image/webp',
    test: (b) => b.length >= 12 && b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WEBP',
  },
]
/** Other binary formats worth naming when a model asks to read one. */
const KNOWN_BINARY = [
  { what: 'a PDF document', test: (b) => b.toString('latin1', 0, 5) === '%PDF-' },
  { what: 'a zip archive (also xlsx, docx, jar, ...)', test: (b) => b.length >= 4 && b.readUInt32BE(0) === 0x504b0304 },
  { what: 'a gzip stream', test: (b) => b.length >= 2 && b[0] === 0x1f && b[1] === 0x8b },
  { what: 'an ELF executable', test: (b) => b.length >= 4 && b.readUInt32BE(0) === 0x7f454c46 },
  { what: 'a SQLite database', test: (b) => b.toString('latin1', 0, 15) === 'SQLite format 3' },
  {
    what: 'a NumPy array (.npy)',
    test: (b) => b.length >= 6 && b[0] === 0x93 && b.toString('latin1', 1, 6) === 'NUMPY',
  },
  { what: 'a Parquet file', test: (b) => b.toString('latin1', 0, 4) === 'PAR1' },
]

const utf8 = new TextDecoder('utf-8', { fatal: true })

/** What `bytes` hold: `{ kind: 'image', mime }`, `{ kind: 'text', text }` or
 * `{ kind: 'binary', what }`. */
function classify(bytes) {
  const image = MAGIC.find((m) => m.test(bytes))
  if (image) return { kind: 'image', mime: image.mime }
  if (!bytes.includes(0)) {
    try {
      return { kind: 'text', text: utf8.decode(bytes) }
    } catch {
      // not UTF-8: binary below
    }
  }
  const known = KNOWN_BINARY.find((k) => k.test(bytes))
  return { kind: 'binary', what: known ? known.what : 'binary data (not UTF-8 text)' }
}

/** A workspace file's bytes, refused by size above the read cap. */
async function readCapped(sbx, path) {
  return sbx.readFile(path, { maxBytes: LIMITS.readBytes })
}

/** The files under `subdir`, at most the listing cap; `more` counts the rest. */
async function listCapped(sbx, subdir = '') {
  const all = await sbx.listFiles(subdir)
  all.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
  return { files: all.slice(0, LIMITS.listEntries), more: Math.max(0, all.length - LIMITS.listEntries) }
}

function sizeText(n) {
  if (n < 1024) return `${n} B`
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`
  return `${(n / 1024 / 1024).toFixed(1)} MiB`
}

module.exports = { classify, readCapped, listCapped, sizeText }
