'use strict'
// Sandbox: a session on one workspace; every runCode()/run() a fresh box.

const { NativeSandbox } = require('./native.js')
const { SandboxError, coded, callNative, fromNative } = require('./errors.js')
const {
  DEFAULTS,
  EXPOSED,
  NULLABLE_CAPS,
  nativeOptions,
  checkCallback,
  checkType,
  optionsBag,
  checkSignal,
  toBytes,
  checkPath,
  bytesOption,
} = require('./options.js')
const { chunkSink, nativeCall, cancellable } = require('./calls.js')
const { finishResult } = require('./results.js')
const { Kernel, kernelLanguage } = require('./kernel.js')
const { resolveLanguage } = require('./languages.js')
const { prepareCell } = require('./jscell.js')

/** A configured kernel sandbox. Files persist in the workspace across calls; every
 * runCode()/run() is a fresh, network-off box. */
class Sandbox {
  #native

  constructor(opts = {}) {
    opts = opts ?? {}
    if (typeof opts !== 'object') throw coded('ERR_INVALID_OPTION', 'Sandbox options must be an object')
    for (const key of EXPOSED) {
      const v = opts[key]
      this[key] = v === undefined || (v === null && !NULLABLE_CAPS.has(key)) ? (DEFAULTS[key] ?? null) : v
    }
    checkCallback('onStdout', opts.onStdout)
    checkCallback('onStderr', opts.onStderr)
    this.onStdout = opts.onStdout ?? null
    this.onStderr = opts.onStderr ?? null
    this.#native = callNative(() => new NativeSandbox(nativeOptions(opts)))
  }

  /** The host path of the open workspace (null until open()). */
  get workspacePath() {
    return this.#native.workspacePath
  }

  /** Creates or checks the workspace and runs `setup`. Resolves to this sandbox. */
  async open() {
    await callNative(() => this.#native.open(chunkSink(this.onStdout), chunkSink(this.onStderr)))
    return this
  }

  /** Stops calls still running and deletes the workspace if the session created it. Idempotent. */
  async close() {
    await this.#native.close()
  }

  async [Symbol.asyncDispose]() {
    await this.close()
  }

  /** Runs `code` in a fresh box: python (default), bash, or JavaScript/TypeScript ('node',
   * 'javascript' / 'js', 'typescript' / 'ts'). Python and JavaScript hand back rich results. */
  async runCode(code, opts = {}) {
    opts = optionsBag('runCode', opts)
    if (typeof code !== 'string') throw new TypeError(`code must be a string, got ${typeof code}`)
    const lang = resolveLanguage(opts.language ?? 'python')
    if (lang.native === 'javascript' && code.includes('\0')) {
      throw new SandboxError('command/code must be strings with no NUL byte')
    }
    const body = lang.native === 'javascript' ? prepareCell(code, { typescript: lang.typescript }) : code
    return this.#call(opts, (call, out, err) => this.#native.runCode(body, lang.native, call, out, err))
  }

  /** Runs an argv array (never a shell string) in a fresh box. */
  async run(command, opts = {}) {
    if (typeof command === 'string') {
      throw new SandboxError('run() takes an argv ARRAY, not a string. Use run(["sh","-c","..."]).')
    }
    if (!Array.isArray(command) || command.length === 0) {
      throw new SandboxError('run() needs a non-empty command array')
    }
    // A plain loop: some() skips the holes of a sparse array.
    for (let i = 0; i < command.length; i++) {
      if (typeof command[i] !== 'string') throw new SandboxError('command/code must be strings with no NUL byte')
    }
    return this.#call(optionsBag('run', opts), (call, out, err) => this.#native.run(command, call, out, err))
  }

  async #call(opts, invoke) {
    const timeoutS = opts.timeoutS ?? this.timeoutS
    if (typeof timeoutS !== 'number') throw coded('ERR_INVALID_OPTION', 'timeoutS must be a positive number of seconds')
    const r = await nativeCall(
      opts,
      this,
      (id) => this.#native.cancel(id),
      (callId, out, err) => invoke({ timeoutS, callId }, out, err),
    )
    return finishResult(r, opts.onResult)
  }

  /** Starts a warm interpreter in one long-lived box on this session's workspace: Python
   * (default), or node for 'javascript' / 'typescript'. Cells share memory and cost well under a
   * millisecond, but are not isolated from each other. `image` replaces the session's image for
   * this kernel only. */
  async kernel(opts = {}) {
    opts = optionsBag('kernel', opts)
    const timeoutS = opts.timeoutS ?? this.timeoutS
    if (typeof timeoutS !== 'number') throw coded('ERR_INVALID_OPTION', 'timeoutS must be a positive number of seconds')
    const language = kernelLanguage(opts.language ?? 'python')
    if (opts.image != null) checkType('image', opts.image, 'string')
    const native = await callNative(() => this.#native.kernel(timeoutS, language.native, opts.image ?? undefined))
    return new Kernel(native, this, (callId) => this.#native.cancel(callId), language)
  }

  /** Writes a Buffer or string to a workspace-relative path (contained, regular files only). */
  async writeFile(path, data) {
    checkPath('path', path)
    await callNative(() => this.#native.writeFile(path, toBytes(data)))
  }

  /** Reads a workspace-relative path; `maxBytes` refuses larger files without reading them. */
  async readFile(path, opts = {}) {
    checkPath('path', path)
    const maxBytes = bytesOption('readFile', opts)
    return await callNative(() => this.#native.readFile(path, maxBytes))
  }

  /** Regular files under the workspace (or `subdir`), `.deps` excluded. */
  async listFiles(subdir = '') {
    checkPath('subdir', subdir ?? '')
    try {
      return await this.#native.listFiles(subdir ?? '')
    } catch (e) {
      throw fromNative(e)
    }
  }

  /** Writes a .tar.gz checkpoint of the workspace files to `dest` (synchronous). `maxBytes`
   * bounds the files' total size (default 4 GiB), so a sparse file the box planted fails fast. */
  snapshot(dest, opts = {}) {
    checkPath('dest', dest)
    const maxBytes = bytesOption('snapshot', opts)
    callNative(() => this.#native.snapshot(dest, maxBytes))
  }

  /** Extracts a checkpoint into the workspace, refusing anything but plain files and
   * directories inside it (synchronous). `maxBytes` bounds the decompressed size (default 4 GiB). */
  restore(src, opts = {}) {
    checkPath('src', src)
    const maxBytes = bytesOption('restore', opts)
    callNative(() => this.#native.restore(src, maxBytes))
  }

  /** snapshot() off the event loop: the same archive, limits and refusals, in a worker thread.
   * `signal` aborts it (the partial archive is removed); so does close(). */
  async snapshotAsync(dest, opts = {}) {
    checkPath('dest', dest)
    opts = optionsBag('snapshotAsync', opts)
    const maxBytes = bytesOption('snapshotAsync', opts)
    await cancellable(
      checkSignal(opts.signal),
      (id) => this.#native.cancel(id),
      (callId) => this.#native.snapshotAsync(dest, maxBytes, callId),
    )
  }

  /** restore() off the event loop: the same checks and refusals, in worker threads. `signal`
   * aborts it (members already written stay, as after a refusal); so does close(). */
  async restoreAsync(src, opts = {}) {
    checkPath('src', src)
    opts = optionsBag('restoreAsync', opts)
    const maxBytes = bytesOption('restoreAsync', opts)
    await cancellable(
      checkSignal(opts.signal),
      (id) => this.#native.cancel(id),
      (callId) => this.#native.restoreAsync(src, maxBytes, callId),
    )
  }
}

module.exports = { Sandbox }
