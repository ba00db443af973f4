'use strict'
// sandbox.files: E2B's filesystem API over the session's workspace, which the box sees at
// /home/user. Paths are absolute under /home/user or relative to it; anything else is refused
// here, and the native side resolves what is left beneath the workspace (openat2, no symlink
// followed), so nothing outside it is ever touched.

const path = require('node:path')
const { Blob } = require('node:buffer')
const { InvalidArgumentError, NotFoundError } = require('./errors.js')
const { HOME } = require('./contexts.js')

/** A path as the workspace-relative one the native side takes ("" is /home/user itself). */
function relative(p, what = 'path') {
  if (typeof p !== 'string' || p === '') throw new InvalidArgumentError(`${what} must be a non-empty string`)
  if (p.includes('\0')) throw new InvalidArgumentError(`${what} must not contain a NUL byte`)
  const abs = path.posix.resolve(HOME, p)
  if (abs === HOME) return ''
  if (!abs.startsWith(`${HOME}/`)) {
    throw new InvalidArgumentError(
      `${what} ${JSON.stringify(p)} is outside ${HOME}: kern-sandbox/e2b's filesystem is the sandbox's ` +
        `workspace, at ${HOME} (give an absolute path under it, or one relative to it)`,
    )
  }
  return abs.slice(HOME.length + 1)
}

const boxPath = (rel) => (rel ? `${HOME}/${rel}` : HOME)

/** E2B's EntryInfo for a native entry. A symlink is reported as a file with its target. */
function entryInfo(n) {
  const info = {
    name: n.name || path.posix.basename(HOME),
    type: n.type === 'dir' ? 'dir' : 'file',
    path: boxPath(n.path),
    size: n.size,
    mode: n.mode,
    permissions: permissions(n.mode, n.type),
    modifiedTime: new Date(n.modifiedMs),
  }
  if (n.symlinkTarget != null) info.symlinkTarget = n.symlinkTarget
  return info
}

function permissions(mode, type) {
  const bits = 'rwxrwxrwx'
  let s = type === 'dir' ? 'd' : type === 'symlink' ? 'l' : '-'
  for (let i = 0; i < 9; i++) s += mode & (1 << (8 - i)) ? bits[i] : '-'
  return s
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

class Filesystem {
  #native
  #guard

  /** `guard(promise)`: the sandbox's wrapper of a request (maps errors, and a kill mid-flight). */
  constructor(native, guard) {
    this.#native = native
    this.#guard = guard
  }

  /** Reads a file: `format` 'text' (default), 'bytes' (Uint8Array), 'blob' or 'stream'. */
  async read(p, opts = {}) {
    const rel = relative(p)
    const format = opts?.format ?? 'text'
    if (!['text', 'bytes', 'blob', 'stream'].includes(format)) {
      throw new InvalidArgumentError(
        `format must be 'text', 'bytes', 'blob' or 'stream', got ${JSON.stringify(format)}`,
      )
    }
    const buf = await this.#guard(() => this.#native.readFile(rel, undefined))
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
  async write(p, data) {
    if (Array.isArray(p)) {
      const out = []
      for (const f of p) out.push(await this.write(f?.path, f?.data))
      return out
    }
    const rel = relative(p)
    if (!rel) throw new InvalidArgumentError(`cannot write to ${HOME} itself: it is a directory`)
    const bytes = await bytesOf(data)
    await this.#guard(() => this.#native.writeFile(rel, bytes))
    return { name: path.posix.basename(rel), type: 'file', path: boxPath(rel) }
  }

  /** The entries of a directory (`depth` levels down, default 1). */
  async list(p, opts = {}) {
    const rel = relative(p)
    const depth = opts?.depth ?? 1
    if (!Number.isInteger(depth) || depth < 1) throw new InvalidArgumentError('depth must be a whole number from 1')
    const entries = await this.#guard(() => this.#native.listDir(rel, depth))
    return entries.map(entryInfo)
  }

  async exists(p) {
    const rel = relative(p)
    return (await this.#guard(() => this.#native.stat(rel))) !== null
  }

  /** The EntryInfo of one path; NotFoundError when nothing is there. */
  async getInfo(p) {
    const rel = relative(p)
    const n = await this.#guard(() => this.#native.stat(rel))
    if (n === null) throw new NotFoundError(`no such file or directory: ${boxPath(rel)}`)
    return entryInfo(n)
  }

  /** Removes a file or a directory with everything in it. */
  async remove(p) {
    const rel = relative(p)
    if (!rel) throw new InvalidArgumentError(`cannot remove ${HOME} itself`)
    await this.#guard(() => this.#native.remove(rel))
  }

  /** Creates a directory and its parents; false when it already existed. */
  async makeDir(p) {
    return await this.#guard(() => this.#native.makeDir(relative(p)))
  }

  /** Moves a file or directory; resolves to the EntryInfo at its new path. */
  async rename(oldPath, newPath) {
    const from = relative(oldPath, 'oldPath')
    const to = relative(newPath, 'newPath')
    if (!from || !to) throw new InvalidArgumentError(`cannot rename ${HOME} itself`)
    await this.#guard(() => this.#native.rename(from, to))
    return this.getInfo(boxPath(to))
  }
}

module.exports = { Filesystem, relative }
