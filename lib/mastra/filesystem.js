'use strict'
// KernFilesystem: Mastra's WorkspaceFilesystem over a KernSandbox's machine files. Its namespace
// is rooted at `basePath` (default the sandbox's working directory, /workspace): `/src/a.ts` is
// /workspace/src/a.ts in the machine, where the sandbox's commands also run. Every call goes to
// the machine (its files are resolved in the box, symlinks as the box sees them).

const posix = require('node:path').posix
const crypto = require('node:crypto')
const { checkPath, isMissing, invalid, statFollow, DEFAULT_FILE_BYTES } = require('../adapters.js')

/** KernFilesystem on one copy of @mastra/core/workspace (see process.js).
 * Long only as the class it makes is: each method is short. */
function make(
  {
    MastraFilesystem,
    FileNotFoundError,
    DirectoryNotFoundError,
    FileExistsError,
    IsDirectoryError,
    NotDirectoryError,
    DirectoryNotEmptyError,
    StaleFileError,
    WorkspaceReadOnlyError,
  },
  { KernSandbox },
) {
  const MIME = {
    '.txt': 'text/plain',
    '.md': 'text/markdown',
    '.html': 'text/html',
    '.css': 'text/css',
    '.js': 'text/javascript',
    '.mjs': 'text/javascript',
    '.ts': 'text/typescript',
    '.json': 'application/json',
    '.py': 'text/x-python',
    '.csv': 'text/csv',
    '.svg': 'image/svg+xml',
    '.png': 'image/png',
    '.jpg': 'image/jpeg',
    '.jpeg': 'image/jpeg',
    '.gif': 'image/gif',
    '.pdf': 'application/pdf',
  }

  function toBuffer(content) {
    if (typeof content === 'string') return Buffer.from(content, 'utf8')
    if (content instanceof Uint8Array) return Buffer.from(content.buffer, content.byteOffset, content.byteLength)
    throw invalid('content must be a string, Buffer or Uint8Array')
  }

  class KernFilesystem extends MastraFilesystem {
    /** @param {{ sandbox: KernSandbox, basePath?: string, readOnly?: boolean, id?: string }} options */
    constructor(options = {}) {
      const { sandbox, basePath, readOnly, id, ...rest } = options
      if (!(sandbox instanceof KernSandbox)) throw invalid('KernFilesystem needs { sandbox: a KernSandbox }')
      if (basePath !== undefined && !checkPath(basePath, 'basePath').startsWith('/')) {
        throw invalid('basePath must be an absolute path in the machine')
      }
      super({ name: 'KernFilesystem', ...rest })
      this.id = id ?? `kern-fs-${crypto.randomUUID()}`
      this.name = 'KernFilesystem'
      this.provider = 'kern'
      this.status = 'pending'
      this.readOnly = Boolean(readOnly)
      this.sandbox = sandbox
      this._basePath = basePath
      this.displayName = 'kern machine'
      this.description = 'Files of the local kern machine the commands run in.'
    }

    /** The machine directory this filesystem's `/` is. */
    get basePath() {
      return this._basePath ?? this.sandbox.workingDirectory
    }

    async init() {
      await this.sandbox.ensureRunning()
      await this.sandbox.machine.mkdir(this.basePath)
    }

    getInstructions() {
      return `Paths are rooted at ${this.basePath} in the sandbox's machine: "/notes.md" is ${posix.join(this.basePath, 'notes.md')}, the directory commands run in.`
    }

    /** A namespace path to its machine path; `..` cannot climb above the base. */
    _at(p) {
      const rel = posix.normalize(`/${checkPath(p)}`)
      return rel === '/' ? this.basePath : posix.join(this.basePath, rel)
    }

    _writable(p) {
      if (this.readOnly) throw new WorkspaceReadOnlyError(`write to ${p}`)
    }

    async _m() {
      await this.ensureReady()
      await this.sandbox.ensureRunning()
      return this.sandbox.machine
    }

    async _stat(m, p) {
      return statFollow(m, this._at(p))
    }

    async realpath(p) {
      const m = await this._m()
      let cur = this._at(p)
      for (let i = 0; i < 40; i++) {
        const e = await m.stat(cur).catch((err) => {
          if (isMissing(err)) throw new FileNotFoundError(p)
          throw err
        })
        if (e.type !== 'symlink') break
        cur = posix.resolve(posix.dirname(cur), e.symlinkTarget)
      }
      const base = this.basePath
      return cur === base ? '/' : cur.startsWith(`${base}/`) ? cur.slice(base.length) : cur
    }

    async readFile(p, options = {}) {
      const m = await this._m()
      const e = await this._stat(m, p)
      if (e === null) throw new FileNotFoundError(p)
      if (e.type === 'dir') throw new IsDirectoryError(p)
      const buf = await m.readFile(this._at(p), { maxBytes: DEFAULT_FILE_BYTES })
      return options.encoding ? buf.toString(options.encoding) : buf
    }

    async writeFile(p, content, options = {}) {
      this._writable(p)
      const m = await this._m()
      const at = this._at(p)
      const data = toBuffer(content)
      const parent = await statFollow(m, posix.dirname(at))
      if (parent === null && options.recursive === false) throw new DirectoryNotFoundError(posix.dirname(p))
      if (parent !== null && parent.type !== 'dir') throw new NotDirectoryError(posix.dirname(p))
      const existing = await statFollow(m, at)
      if (existing !== null) {
        if (existing.type === 'dir') throw new IsDirectoryError(p)
        if (options.overwrite === false) throw new FileExistsError(p)
      }
      if (options.expectedMtime) {
        const actual = existing === null ? null : new Date(existing.mtime)
        if (actual === null || actual.getTime() !== options.expectedMtime.getTime()) {
          throw new StaleFileError(p, options.expectedMtime, actual ?? new Date(0))
        }
      }
      await m.writeFile(at, data)
    }

    async appendFile(p, content) {
      this._writable(p)
      const m = await this._m()
      const e = await this._stat(m, p)
      if (e !== null && e.type === 'dir') throw new IsDirectoryError(p)
      const before = e === null ? Buffer.alloc(0) : await m.readFile(this._at(p), { maxBytes: DEFAULT_FILE_BYTES })
      await m.writeFile(this._at(p), Buffer.concat([before, toBuffer(content)]))
    }

    async deleteFile(p, options = {}) {
      this._writable(p)
      const m = await this._m()
      let e
      try {
        e = await m.stat(this._at(p))
      } catch (err) {
        if (isMissing(err)) {
          if (options.force) return
          throw new FileNotFoundError(p)
        }
        throw err
      }
      if (e.type === 'dir') throw new IsDirectoryError(p)
      await m.remove(this._at(p))
    }

    async copyFile(src, dest, options = {}) {
      this._writable(dest)
      const m = await this._m()
      const e = await this._stat(m, src)
      if (e === null) throw new FileNotFoundError(src)
      if (e.type === 'dir') {
        if (!options.recursive) throw new IsDirectoryError(src)
        const flag = options.overwrite === false ? '-n' : '-f'
        const r = await m.exec(['cp', '-a', flag, '-T', this._at(src), this._at(dest)])
        if (r.exitCode !== 0) throw new Error(`copy ${src} to ${dest} failed: ${r.stderr.trim()}`)
        return
      }
      const d = await this._stat(m, dest)
      if (d !== null && d.type === 'dir') throw new IsDirectoryError(dest)
      if (d !== null && options.overwrite === false) throw new FileExistsError(dest)
      await m.writeFile(this._at(dest), await m.readFile(this._at(src), { maxBytes: DEFAULT_FILE_BYTES }), {
        mode: e.mode & 0o7777,
      })
    }

    async moveFile(src, dest, options = {}) {
      this._writable(src)
      this._writable(dest)
      const m = await this._m()
      const e = await this._stat(m, src)
      if (e === null) throw new FileNotFoundError(src)
      const d = await this._stat(m, dest)
      if (d !== null && options.overwrite === false) throw new FileExistsError(dest)
      await m.mkdir(posix.dirname(this._at(dest)))
      await m.rename(this._at(src), this._at(dest))
    }

    async mkdir(p, options = {}) {
      this._writable(p)
      const m = await this._m()
      const e = await this._stat(m, p)
      if (e !== null) {
        if (e.type !== 'dir') throw new FileExistsError(p)
        return
      }
      if (options.recursive === false && (await this._stat(m, posix.dirname(posix.normalize(`/${p}`)))) === null) {
        throw new DirectoryNotFoundError(posix.dirname(p))
      }
      await m.mkdir(this._at(p))
    }

    async rmdir(p, options = {}) {
      this._writable(p)
      const m = await this._m()
      const e = await this._stat(m, p)
      if (e === null) {
        if (options.force) return
        throw new DirectoryNotFoundError(p)
      }
      if (e.type !== 'dir') throw new NotDirectoryError(p)
      if (!options.recursive && (await m.list(this._at(p), { depth: 1 })).length > 0)
        throw new DirectoryNotEmptyError(p)
      await m.remove(this._at(p))
    }

    async readdir(p, options = {}) {
      const m = await this._m()
      const at = this._at(p)
      const e = await statFollow(m, at)
      if (e === null) throw new DirectoryNotFoundError(p)
      if (e.type !== 'dir') throw new NotDirectoryError(p)
      const depth = options.recursive ? Math.max(1, (options.maxDepth ?? 100) + 1) : 1
      const exts =
        options.extension === undefined
          ? null
          : [].concat(options.extension).map((x) => (x.startsWith('.') ? x : `.${x}`))
      const out = []
      for (const x of await m.list(at, { depth })) {
        const rel = posix.relative(at, x.path)
        let type = x.type === 'dir' ? 'directory' : 'file'
        if (x.type === 'symlink') {
          const t = await statFollow(m, x.path)
          type = t !== null && t.type === 'dir' ? 'directory' : 'file'
        }
        if (exts && type === 'file' && !exts.includes(posix.extname(x.name))) continue
        out.push({
          name: rel,
          type,
          ...(type === 'file' && x.type !== 'symlink' ? { size: x.size } : {}),
          ...(x.type === 'symlink' ? { isSymlink: true, symlinkTarget: x.symlinkTarget } : {}),
        })
      }
      return out
    }

    async exists(p) {
      const m = await this._m()
      return (await this._stat(m, p)) !== null
    }

    async stat(p) {
      const m = await this._m()
      const e = await this._stat(m, p)
      if (e === null) throw new FileNotFoundError(p)
      const type = e.type === 'dir' ? 'directory' : 'file'
      const norm = posix.normalize(`/${p}`)
      return {
        name: posix.basename(norm) || '/',
        path: norm,
        type,
        size: type === 'directory' ? 0 : e.size,
        createdAt: new Date(e.mtime),
        modifiedAt: new Date(e.mtime),
        ...(type === 'file' && MIME[posix.extname(norm).toLowerCase()]
          ? { mimeType: MIME[posix.extname(norm).toLowerCase()] }
          : {}),
      }
    }

    async getInfo() {
      return {
        id: this.id,
        name: this.name,
        provider: this.provider,
        status: this.status,
        readOnly: this.readOnly,
        metadata: { basePath: this._basePath ?? null, sandbox: this.sandbox.id },
      }
    }
  }

  return { KernFilesystem }
}

module.exports = { make }
