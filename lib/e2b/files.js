'use strict'
// sandbox.files: E2B's filesystem API over the sandbox's machine: absolute paths anywhere in the
// box, relative ones from /home/user (E2B's user's home). Writes create their parents.

const path = require('node:path')
const { Blob } = require('node:buffer')
const { InvalidArgumentError, FileNotFoundError } = require('./errors.js')
const { HOME } = require('./contexts.js')
const { watchDir } = require('./watch.js')

/** A missing path is E2B's FileNotFoundError here. */
const FILE_CLASSES = { ERR_NOT_FOUND: FileNotFoundError }
const FORMATS = ['text', 'bytes', 'blob', 'stream']
/** E2B's FileType values. */
const FILE_TYPES = new Set(['file', 'dir', 'symlink'])

/** A sandbox path as the absolute one it names. */
function boxPath(p, what = 'path') {
  if (typeof p !== 'string' || p === '')
    throw new InvalidArgumentError(`${what} must be a non-empty string, got ${JSON.stringify(p)}`)
  if (p.includes('\0')) throw new InvalidArgumentError(`${what} ${JSON.stringify(p)} must not contain a NUL byte`)
  return path.posix.resolve(HOME, p)
}

function permissions(mode, type) {
  const bits = 'rwxrwxrwx'
  let s = type === 'dir' ? 'd' : type === 'symlink' ? 'l' : '-'
  for (let i = 0; i < 9; i++) s += mode & (1 << (8 - i)) ? bits[i] : '-'
  return s
}

/** E2B keeps a file's metadata as extended attributes named this, then the key. */
const METADATA_XATTR = 'user.e2b.'

/** The metadata a machine entry's `user.e2b.*` attributes hold; undefined for none. */
function metadataOf(e) {
  const out = {}
  for (const [k, v] of Object.entries(e.xattrs ?? {})) {
    if (k.startsWith(METADATA_XATTR)) out[k.slice(METADATA_XATTR.length)] = v
  }
  return Object.keys(out).length ? out : undefined
}

/** E2B's EntryInfo for a machine entry. */
function entryInfo(e) {
  const metadata = metadataOf(e)
  const type = FILE_TYPES.has(e.type) ? e.type : undefined
  const info = {
    name: e.name,
    type,
    path: e.path,
    size: e.size,
    mode: e.mode & 0o7777,
    permissions: permissions(e.mode, e.type),
    owner: e.owner,
    group: e.group,
    modifiedTime: new Date(e.mtime),
  }
  // E2B gives the target as an absolute path: a relative one is from the link's directory.
  if (e.symlinkTarget != null) info.symlinkTarget = path.posix.resolve(path.posix.dirname(e.path), e.symlinkTarget)
  if (metadata) info.metadata = { ...metadata }
  return info
}

/** Orders paths as a depth-first walk does: component by component, a parent before its children. */
function comparePaths(a, b) {
  const x = a.split('/')
  const y = b.split('/')
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    if (x[i] !== y[i]) return x[i] < y[i] ? -1 : 1
  }
  return x.length - y.length
}

/** What `write` takes: a string, bytes, an ArrayBuffer, a Blob or a ReadableStream. */
async function bytesOf(data) {
  if (typeof data === 'string') return Buffer.from(data, 'utf8')
  if (Buffer.isBuffer(data)) return data
  if (ArrayBuffer.isView(data)) return Buffer.from(data.buffer, data.byteOffset, data.byteLength)
  if (data instanceof ArrayBuffer) return Buffer.from(data)
  if (data instanceof Blob) return Buffer.from(await data.arrayBuffer())
  if (data && typeof data.getReader === 'function') {
    const parts = []
    for await (const chunk of data) parts.push(typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk))
    return Buffer.concat(parts)
  }
  throw new InvalidArgumentError('data must be a string, an ArrayBuffer, a typed array, a Blob or a ReadableStream')
}

/** What E2B's metadata keys may hold (they travel there as HTTP header names: RFC 9110 tokens). */
const METADATA_KEY = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
/** What its values may hold (header values: printable ASCII and spaces, no control characters). */
const METADATA_VALUE = /^[ -~]*$/

function checkMetadata(m) {
  if (m == null) return undefined
  if (typeof m !== 'object' || Array.isArray(m)) throw new InvalidArgumentError('metadata must be an object of strings')
  const out = {}
  for (const [k, v] of Object.entries(m)) {
    if (!METADATA_KEY.test(k)) {
      throw new InvalidArgumentError(
        `metadata key ${JSON.stringify(k)} must be non-empty and made of letters, digits and !#$%&'*+-.^_\`|~ only`,
      )
    }
    if (typeof v !== 'string') throw new InvalidArgumentError(`metadata ${JSON.stringify(k)} must be a string`)
    if (!METADATA_VALUE.test(v)) {
      throw new InvalidArgumentError(
        `metadata ${JSON.stringify(k)} must be printable ASCII (no control characters or newlines)`,
      )
    }
    out[k.toLowerCase()] = v // E2B's sandbox lowercases the keys
  }
  return out
}

class Filesystem {
  #box

  /** `box`: the sandbox's machine access (see lib/e2b/sandbox.js). */
  constructor(box) {
    this.#box = box
  }

  #call(start) {
    return this.#box.guard(start, FILE_CLASSES)
  }

  /** Reads a file: `format` 'text' (default), 'bytes' (Uint8Array), 'blob' or 'stream'. */
  async read(p, opts = {}) {
    const abs = boxPath(p)
    const format = opts?.format ?? 'text'
    if (!FORMATS.includes(format)) {
      throw new InvalidArgumentError(
        `format must be 'text', 'bytes', 'blob' or 'stream', got ${JSON.stringify(format)}`,
      )
    }
    const buf = await this.#call(() => this.#box.machine.readFile(abs))
    if (format === 'text') return buf.toString('utf8')
    const bytes = new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength)
    if (format === 'bytes') return bytes
    if (format === 'blob') return new Blob([bytes])
    return new ReadableStream({
      start(controller) {
        controller.enqueue(bytes)
        controller.close()
      },
    })
  }

  /** Writes a file (creating its parents), or each `{ path, data }` of an array. */
  async write(p, data, opts) {
    if (Array.isArray(p)) return this.writeFiles(p, data)
    // E2B's wording for a call with neither a path nor files, and for one with both.
    if (p == null || p === '') throw new InvalidArgumentError('Path or files are required')
    if (Array.isArray(data)) {
      throw new InvalidArgumentError(
        'Cannot specify both path and array of files. You have to specify either path and data for a single ' +
          'file or an array for multiple files.',
      )
    }
    const metadata = checkMetadata(opts?.metadata)
    const abs = boxPath(p)
    const bytes = await bytesOf(data)
    const owner = await this.#owner(opts)
    // The file's metadata becomes exactly what this write gives (none clears what it had).
    const xattrs = Object.fromEntries(Object.entries(metadata ?? {}).map(([k, v]) => [METADATA_XATTR + k, v]))
    await this.#call(() => this.#box.machine.writeFile(abs, bytes, { owner, xattrs, clearXattrs: METADATA_XATTR }))
    const info = { name: path.posix.basename(abs), type: 'file', path: abs }
    if (metadata) info.metadata = { ...metadata }
    return info
  }

  /** Writes each `{ path, data }`, in order. */
  async writeFiles(files, opts) {
    if (!Array.isArray(files)) throw new InvalidArgumentError('files must be an array of { path, data }')
    const out = []
    for (const f of files) {
      if (f == null || typeof f !== 'object') throw new InvalidArgumentError('each file must be { path, data }')
      out.push(await this.write(f.path, f.data, opts))
    }
    return out
  }

  /** The entries of a directory, `depth` levels down (default 1). */
  async list(p, opts = {}) {
    const abs = boxPath(p)
    const depth = opts?.depth ?? 1
    if (!Number.isInteger(depth) || depth < 1) {
      // E2B's wording ("depth should be at least one") leads.
      throw new InvalidArgumentError(`depth should be at least one (a whole number), got ${String(depth)}`)
    }
    const entries = await this.#call(() => this.#box.machine.list(abs, { depth }))
    // E2B's order: depth first, each directory followed by what is under it, names sorted.
    entries.sort((a, b) => comparePaths(a.path, b.path))
    return entries.map((e) => entryInfo(e))
  }

  async exists(p) {
    const abs = boxPath(p)
    try {
      await this.#call(() => this.#box.machine.stat(abs))
      return true
    } catch (e) {
      if (e instanceof FileNotFoundError) return false
      throw e
    }
  }

  /** The EntryInfo of one path (a symlink itself); FileNotFoundError when nothing is there. */
  async getInfo(p) {
    const abs = boxPath(p)
    const e = await this.#call(() => this.#box.machine.stat(abs))
    return entryInfo(e)
  }

  /** Removes a file, a symlink or a directory with everything in it; a missing path is fine. */
  async remove(p) {
    const abs = boxPath(p)
    try {
      await this.#call(() => this.#box.machine.remove(abs))
    } catch (e) {
      if (!(e instanceof FileNotFoundError)) throw e
    }
  }

  /** Creates a directory and its parents; false when it already existed. */
  async makeDir(p, opts) {
    const abs = boxPath(p)
    const owner = await this.#owner(opts)
    return await this.#call(() => this.#box.machine.mkdir(abs, { owner }))
  }

  /** Moves a file or directory; resolves to the EntryInfo at its new path. */
  async rename(oldPath, newPath) {
    const from = boxPath(oldPath, 'oldPath')
    const to = boxPath(newPath, 'newPath')
    await this.#call(() => this.#box.machine.rename(from, to))
    return this.getInfo(to)
  }

  /** Watches a directory: `onEvent({ name, type, entry? })` per change, names relative to it. */
  async watchDir(p, onEvent, opts = {}) {
    const abs = boxPath(p)
    return watchDir(this.#box, abs, onEvent, opts ?? {}, (e) => entryInfo(e))
  }

  /** Who owns what a write or makeDir creates: E2B's `user` option (default `user`), where the
   * machine runs processes as the users asked for; else (one uid mapped into the box, or a
   * workspace the user cannot write) root, as the commands are. */
  async #owner(opts) {
    const user = opts?.user ?? 'user'
    if (typeof user !== 'string' || user === '') throw new InvalidArgumentError('user must be a user name')
    return (await this.#box.switchesUser()) ? user : undefined
  }
}

module.exports = { Filesystem, boxPath }
