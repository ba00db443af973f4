'use strict'
// KernSandboxBackend: a deep agents SandboxBackendProtocolV2 backend on a kern machine. It extends
// deepagents' BaseSandbox (whose file tools are derived from shell commands) and does natively in
// the machine what the machine does better: ls, read, readRaw, write, edit, grep, glob, delete,
// upload and download are file calls on the box (no shell quoting, no output parsing), execute is
// one machine process. Results follow BaseSandbox's: errors as values, never thrown to the agent.

const posix = require('node:path').posix
const crypto = require('node:crypto')
const {
  DEFAULT_OUTPUT_BYTES,
  DEFAULT_FILE_BYTES,
  checkPath,
  checkCount,
  isMissing,
  invalid,
  clipText,
  openMachine,
  closeMachine,
  splitOptions,
  statFollow,
} = require('../adapters.js')

/** Extensions deep agents treats as binary (the rest is text), as its backends do. */
const BINARY = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.heic': 'image/heic',
  '.heif': 'image/heif',
  '.mp3': 'audio/mpeg',
  '.wav': 'audio/wav',
  '.aiff': 'audio/aiff',
  '.aac': 'audio/aac',
  '.ogg': 'audio/ogg',
  '.flac': 'audio/flac',
  '.mp4': 'video/mp4',
  '.webm': 'video/webm',
  '.mpeg': 'video/mpeg',
  '.mpg': 'video/mpeg',
  '.mov': 'video/quicktime',
  '.avi': 'video/x-msvideo',
  '.pdf': 'application/pdf',
  '.zip': 'application/zip',
  '.gz': 'application/gzip',
  '.tar': 'application/x-tar',
}
const TEXT = {
  '.md': 'text/markdown',
  '.html': 'text/html',
  '.csv': 'text/csv',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
}
/** A glob walk stops after this many entries (flagged `truncated`), as deep agents' does. */
const MAX_GLOB_ENTRIES = 50_000
const GLOB_DEPTH = 64

function mimeOf(p) {
  const ext = posix.extname(p).toLowerCase()
  return BINARY[ext] ?? TEXT[ext] ?? 'text/plain'
}
const isBinary = (p) => posix.extname(p).toLowerCase() in BINARY

/** A deep agents glob (`*`, `**`, `?`, `[...]`, `{a,b}`) as a RegExp over relative paths. */
function globRegex(pattern) {
  let re = ''
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]
    if (c === '*') {
      if (pattern[i + 1] === '*') {
        i++
        if (pattern[i + 1] === '/') {
          i++
          re += '(?:.*/)?'
        } else re += '.*'
      } else re += '[^/]*'
    } else if (c === '?') re += '[^/]'
    else if (c === '[') {
      const end = pattern.indexOf(']', i + 1)
      if (end === -1) re += '\\['
      else {
        let cls = pattern.slice(i + 1, end).replace(/\\/g, '\\\\')
        if (cls.startsWith('!')) cls = `^${cls.slice(1)}`
        re += `[${cls}]`
        i = end
      }
    } else if (c === '{') {
      const end = pattern.indexOf('}', i + 1)
      if (end === -1) re += '\\{'
      else {
        re += `(?:${pattern
          .slice(i + 1, end)
          .split(',')
          .map((alt) => globRegex(alt).source.slice(1, -1))
          .join('|')})`
        i = end
      }
    } else re += c.replace(/[.+^$()|\\/]/g, '\\$&')
  }
  return new RegExp(`^${re}$`)
}

/** KernSandboxBackend on one copy of deepagents (each copy has its own BaseSandbox to extend).
 * Long only as the class it makes is: each method is short. */
function make({ BaseSandbox, normalizeReadPagination }) {
  class KernSandboxBackend extends BaseSandbox {
    /**
     * @param {object} [options] kern-sandbox Sandbox options, plus `id`, `machine` (Machine
     *   options), `initialFiles` (path → string or bytes, written at initialize), `timeoutS` (per
     *   execute), `maxOutputBytes` (execute output cap, default 1 MiB)
     */
    constructor(options = {}) {
      super()
      const { machineOptions, sandboxOptions } = splitOptions(options)
      const { id, initialFiles, timeoutS, maxOutputBytes, ...kernOptions } = sandboxOptions
      if (initialFiles !== undefined && (typeof initialFiles !== 'object' || initialFiles === null)) {
        throw invalid('initialFiles must be an object of path → content')
      }
      this.id = id ?? `kern-${crypto.randomUUID()}`
      this._kernOptions = kernOptions
      this._machineOptions = machineOptions
      this._initialFiles = initialFiles ?? {}
      this._timeoutS = timeoutS === undefined ? undefined : checkCount(timeoutS, 'timeoutS')
      this._maxOutputBytes = checkCount(maxOutputBytes, 'maxOutputBytes', DEFAULT_OUTPUT_BYTES)
      this._sbx = null
      this._machine = null
      this._starting = null
    }

    /** A started backend: `await KernSandboxBackend.create({ ...options, initialFiles })`. */
    static async create(options) {
      const backend = new this(options)
      await backend.initialize()
      return backend
    }

    /** True from initialize() until close() (or the machine's death). */
    get isRunning() {
      return Boolean(this._machine && this._machine.alive)
    }

    /** The machine; throws before initialize(). */
    get machine() {
      if (!this._machine) throw invalid('the KernSandboxBackend is not initialized: call initialize()')
      return this._machine
    }

    /** Starts the machine and writes initialFiles. A second call waits for the first. */
    async initialize() {
      if (this.isRunning) return
      if (!this._starting) {
        this._starting = (async () => {
          const { sbx, machine } = await openMachine(this._kernOptions, this._machineOptions)
          this._sbx = sbx
          this._machine = machine
          const files = Object.entries(this._initialFiles).map(([p, c]) => [
            p,
            typeof c === 'string' ? new TextEncoder().encode(c) : c,
          ])
          const results = await this.uploadFiles(files)
          const failed = results.filter((r) => r.error)
          if (failed.length) {
            await this.close()
            throw invalid(`initialFiles: ${failed.map((r) => `${r.path} (${r.error})`).join(', ')}`)
          }
        })().finally(() => {
          this._starting = null
        })
      }
      await this._starting
    }

    /** Ends the machine and its Sandbox. Idempotent. */
    async close() {
      const sbx = this._sbx
      const machine = this._machine
      this._sbx = null
      this._machine = null
      await closeMachine(machine, sbx)
    }

    /** Makes a machine port reachable from the host (127.0.0.1); idempotent per port. */
    async exposePort(port) {
      return this.machine.exposePort(checkCount(port, 'port', undefined, { max: 65535 }))
    }

    async [Symbol.asyncDispose]() {
      await this.close()
    }

    _at(p) {
      return posix.resolve(this.machine.workdir, checkPath(p))
    }

    /** One shell command; its stdout, then its stderr, at most maxOutputBytes in all. (The result's
     * capture, not live callbacks: those are best-effort and could drop a chunk.) */
    async execute(command) {
      if (typeof command !== 'string' || command.trim() === '') {
        return { output: 'Error: command must be a non-empty string', exitCode: 1, truncated: false }
      }
      if (command.includes('\0')) return { output: 'Error: command contains a NUL byte', exitCode: 1, truncated: false }
      const r = await this.machine.exec(command, {
        maxOutputBytes: this._maxOutputBytes,
        ...(this._timeoutS !== undefined ? { timeoutS: this._timeoutS } : {}),
      })
      const joined = r.stderr ? `${r.stdout}${r.stdout && !r.stdout.endsWith('\n') ? '\n' : ''}${r.stderr}` : r.stdout
      const clipped = clipText(joined, this._maxOutputBytes)
      const truncated = r.truncated || clipped.clipped
      let output = clipped.text
      if (truncated) output += `\n[output truncated at ${this._maxOutputBytes} bytes]`
      if (r.fault) output += `\n[${r.fault.type}: ${r.fault.message}]`
      return { output, exitCode: r.exitCode, truncated }
    }

    async uploadFiles(files) {
      const out = []
      for (const [p, content] of files) {
        let at
        try {
          at = this._at(p)
        } catch {
          out.push({ path: p, error: 'invalid_path' })
          continue
        }
        try {
          if (!(content instanceof Uint8Array)) throw invalid('content must be bytes')
          if (content.length > DEFAULT_FILE_BYTES) throw invalid('content too large')
          const e = await statFollow(this.machine, at)
          if (e && e.type === 'dir') {
            out.push({ path: p, error: 'is_directory' })
            continue
          }
          await this.machine.writeFile(at, Buffer.from(content.buffer, content.byteOffset, content.byteLength))
          out.push({ path: p, error: null })
        } catch (e) {
          out.push({ path: p, error: fileError(e) })
        }
      }
      return out
    }

    async downloadFiles(paths) {
      const out = []
      for (const p of paths) {
        let at
        try {
          at = this._at(p)
        } catch {
          out.push({ path: p, content: null, error: 'invalid_path' })
          continue
        }
        try {
          const e = await statFollow(this.machine, at)
          if (e === null) out.push({ path: p, content: null, error: 'file_not_found' })
          else if (e.type === 'dir') out.push({ path: p, content: null, error: 'is_directory' })
          else {
            const buf = await this.machine.readFile(at, { maxBytes: DEFAULT_FILE_BYTES })
            out.push({ path: p, content: new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength), error: null })
          }
        } catch (e) {
          out.push({ path: p, content: null, error: fileError(e) })
        }
      }
      return out
    }

    async ls(path) {
      let at
      try {
        at = this._at(path)
        const e = await statFollow(this.machine, at)
        if (e === null) return { files: [] }
        if (e.type !== 'dir') return { error: `'${path}' is not a directory` }
        const entries = await this.machine.list(at, { depth: 1 })
        const files = []
        for (const x of entries) {
          const dir =
            x.type === 'dir' || (x.type === 'symlink' && (await statFollow(this.machine, x.path))?.type === 'dir')
          files.push({
            path: dir ? `${x.path}/` : x.path,
            is_dir: dir,
            size: dir ? 0 : x.size,
            modified_at: new Date(x.mtime).toISOString(),
          })
        }
        files.sort((a, b) => a.path.localeCompare(b.path))
        return { files }
      } catch (e) {
        return { error: `Error listing '${path}': ${e.message}` }
      }
    }

    async read(filePath, offset = 0, limit = 500) {
      const mimeType = mimeOf(filePath)
      try {
        const at = this._at(filePath)
        const e = await statFollow(this.machine, at)
        if (e === null) return { error: `File '${filePath}' not found` }
        if (e.type === 'dir') return { error: `'${filePath}' is a directory` }
        const buf = await this.machine.readFile(at, { maxBytes: DEFAULT_FILE_BYTES })
        if (isBinary(filePath)) return { content: new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength), mimeType }
        const page = normalizeReadPagination(offset, limit)
        if (page.limit === 0) return { content: '', mimeType }
        const text = buf.toString('utf8')
        const lines = text === '' ? [] : text.replace(/\n$/, '').split('\n')
        const end = Math.min(page.offset + page.limit, lines.length)
        const rows = lines.slice(page.offset, end)
        const content = rows.length ? `${rows.join('\n')}\n` : ''
        if (page.offset >= lines.length) return { content, mimeType }
        return {
          content,
          mimeType,
          totalLines: lines.length,
          startLine: page.offset + 1,
          endLine: end,
          ...(end < lines.length ? { nextOffset: end } : {}),
        }
      } catch (e) {
        return { error: `Error reading '${filePath}': ${e.message}` }
      }
    }

    async readRaw(filePath) {
      try {
        const at = this._at(filePath)
        const e = await statFollow(this.machine, at)
        if (e === null || e.type === 'dir') return { error: `File '${filePath}' not found` }
        const buf = await this.machine.readFile(at, { maxBytes: DEFAULT_FILE_BYTES })
        const time = new Date(e.mtime).toISOString()
        const bytes = new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength)
        return {
          data: {
            content: isBinary(filePath) ? bytes : buf.toString('utf8'),
            mimeType: mimeOf(filePath),
            created_at: time,
            modified_at: time,
          },
        }
      } catch (e) {
        return { error: `Error reading '${filePath}': ${e.message}` }
      }
    }

    async write(filePath, content) {
      if (typeof content !== 'string') return { error: `Failed to write to ${filePath}: content must be a string` }
      const bytes = isBinary(filePath) ? Buffer.from(content, 'base64') : Buffer.from(content, 'utf8')
      const [r] = await this.uploadFiles([[filePath, bytes]])
      if (r.error) return { error: `Failed to write to ${filePath}: ${r.error}` }
      return { path: filePath, filesUpdate: null }
    }

    async edit(filePath, oldString, newString, replaceAll = false) {
      if (typeof oldString !== 'string' || typeof newString !== 'string') {
        return { error: 'oldString and newString must be strings' }
      }
      const [d] = await this.downloadFiles([filePath])
      if (d.error) return { error: `Error: File '${filePath}' not found` }
      const text = Buffer.from(d.content).toString('utf8')
      let next
      let occurrences
      if (oldString === '') {
        if (text !== '') return { error: 'oldString must not be empty unless the file is empty' }
        if (newString === '') return { path: filePath, filesUpdate: null, occurrences: 0 }
        next = newString
        occurrences = 1
      } else {
        const first = text.indexOf(oldString)
        if (first === -1) return { error: `String not found in file '${filePath}'` }
        if (replaceAll) {
          occurrences = text.split(oldString).length - 1
          next = text.split(oldString).join(newString)
        } else {
          if (text.indexOf(oldString, first + oldString.length) !== -1) {
            return { error: `Multiple occurrences found in '${filePath}'. Use replaceAll=true to replace all.` }
          }
          occurrences = 1
          next = text.slice(0, first) + newString + text.slice(first + oldString.length)
        }
      }
      if (next === text) return { path: filePath, filesUpdate: null, occurrences }
      const [u] = await this.uploadFiles([[filePath, Buffer.from(next, 'utf8')]])
      if (u.error) return { error: `Failed to write edited file '${filePath}': ${u.error}` }
      return { path: filePath, filesUpdate: null, occurrences }
    }

    async delete(filePath) {
      try {
        const at = this._at(filePath)
        try {
          await this.machine.stat(at)
        } catch (e) {
          if (isMissing(e)) return { error: `Error: '${filePath}' not found` }
          throw e
        }
        await this.machine.remove(at)
        return { path: filePath, filesUpdate: null }
      } catch (e) {
        return { error: `Error deleting file '${filePath}': ${e.message}` }
      }
    }

    /** Literal (not regex) search in the machine by grep, argv only; binary files skipped. */
    async grep(pattern, path = '/', glob = null, maxCount = null) {
      if (typeof pattern !== 'string' || pattern === '' || pattern.includes('\0')) {
        return { error: 'pattern must be a non-empty string' }
      }
      try {
        const at = this._at(path ?? '/')
        if ((await statFollow(this.machine, at)) === null) return { matches: [] }
        const argv = glob
          ? [
              'find',
              '-L',
              at,
              '-type',
              'f',
              '-name',
              checkPath(glob, 'glob'),
              '-exec',
              'grep',
              '-HnFZ',
              '-e',
              pattern,
              '{}',
              '+',
            ]
          : ['grep', '-rHnFZ', '-e', pattern, at]
        const cap = 16 * 1024 * 1024
        const r = await this.machine.exec(argv, {
          maxOutputBytes: cap,
          ...(this._timeoutS ? { timeoutS: this._timeoutS } : {}),
        })
        const matches = []
        for (const line of r.stdout.split('\n')) {
          const nul = line.indexOf('\0')
          if (nul === -1) continue
          const file = line.slice(0, nul)
          const m = /^(\d+):([\s\S]*)$/.exec(line.slice(nul + 1))
          if (!m || isBinary(file)) continue
          matches.push({ path: file, line: Number(m[1]), text: m[2] })
          if (maxCount && matches.length > maxCount) break
        }
        if (maxCount && matches.length > maxCount) return { matches: matches.slice(0, maxCount), truncated: true }
        return r.truncated ? { matches, truncated: true } : { matches }
      } catch (e) {
        return { error: `Error searching '${path}': ${e.message}` }
      }
    }

    /** Glob matching on the machine's listing of `path`: relative paths, directories included. */
    async glob(pattern, path = '/') {
      if (typeof pattern !== 'string' || pattern === '') return { error: 'pattern must be a non-empty string' }
      try {
        const base = this._at(path ?? '/')
        const e = await statFollow(this.machine, base)
        if (e === null || e.type !== 'dir') return { files: [] }
        const re = globRegex(pattern.replace(/^\//, ''))
        const entries = await this.machine.list(base, { depth: GLOB_DEPTH })
        const truncated = entries.length > MAX_GLOB_ENTRIES
        const files = []
        for (const x of truncated ? entries.slice(0, MAX_GLOB_ENTRIES) : entries) {
          const rel = posix.relative(base, x.path)
          if (!re.test(rel)) continue
          const dir = x.type === 'dir'
          files.push({ path: rel, is_dir: dir, size: dir ? 0 : x.size, modified_at: new Date(x.mtime).toISOString() })
        }
        files.sort((a, b) => a.path.localeCompare(b.path))
        return truncated ? { files, truncated } : { files }
      } catch (err) {
        return { error: `Error matching '${pattern}' in '${path}': ${err.message}` }
      }
    }
  }
  return { KernSandboxBackend }
}

/** A machine error as deep agents' FileOperationError. */
function fileError(e) {
  switch (e && e.code) {
    case 'ERR_NOT_FOUND':
      return 'file_not_found'
    case 'ERR_IS_A_DIRECTORY':
      return 'is_directory'
    case 'ERR_INVALID_ARGUMENT':
    case 'ERR_INVALID_OPTION':
    case 'ERR_NOT_A_DIRECTORY':
      return 'invalid_path'
    default:
      return 'permission_denied'
  }
}

module.exports = { make, globRegex }
