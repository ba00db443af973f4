'use strict'
// Sandbox: a session on one workspace; every runCode()/run() a fresh box. What each method does
// for a caller is documented once, in index.d.ts; the comments here say how it is done.

const { NativeSandbox } = require('./native.js')
const { SandboxError, coded, callNative, fromNative } = require('./errors.js')
const {
  DEFAULTS,
  EXPOSED,
  NULLABLE_CAPS,
  nativeOptions,
  isPolicy,
  checkCallback,
  checkType,
  optionsBag,
  checkSignal,
  toBytes,
  checkPath,
  bytesOption,
} = require('./options.js')
const { chunkSink, eventSink, nativeCall, cancellable } = require('./calls.js')
const { finishResult } = require('./results.js')
const { Kernel, kernelLanguage, IPYTHON } = require('./kernel.js')
const { openMachine, agentPath, MachineSnapshot } = require('./machine.js')
const { resolveLanguage } = require('./languages.js')
const { prepareCell } = require('./jscell.js')
const { diagnose, facts } = require('./host/diagnose.js')

/** Causes that fail every box on this host, not just some calls: a seccomp filter or an AppArmor
 * profile may allow what kern does, a masked /proc never does. */
const FAILS_EVERY_BOX = new Set(['proc_masked', 'userns_disabled', 'userns_restricted'])

class Sandbox {
  #native
  /** The host facts a failed box start is diagnosed from: read after the session's first
   * startup_failed fault, never before (a call whose box starts pays nothing). */
  #hostFacts = null

  constructor(opts = {}) {
    opts = opts ?? {}
    if (typeof opts !== 'object') throw coded('ERR_INVALID_OPTION', 'Sandbox options must be an object')
    for (const key of EXPOSED) {
      const v = opts[key]
      this[key] = v === undefined || (v === null && !NULLABLE_CAPS.has(key)) ? (DEFAULTS[key] ?? null) : v
    }
    checkCallback('onStdout', opts.onStdout)
    checkCallback('onStderr', opts.onStderr)
    checkCallback('onRequest', opts.onRequest)
    this.onStdout = opts.onStdout ?? null
    this.onStderr = opts.onStderr ?? null
    this.onRequest = opts.onRequest ?? null
    this.#native = callNative(() => new NativeSandbox(nativeOptions(opts)))
  }

  get workspacePath() {
    return this.#native.workspacePath
  }

  get readyBoxes() {
    return this.#native.readyBoxes
  }

  // `setup`'s output streams through the session's callbacks. A network policy's boxes need the
  // agent (their relay to the session's egress proxy), found where a machine's is.
  async open() {
    const agent = isPolicy(this.network) ? agentPath() : undefined
    await callNative(() =>
      this.#native.open(chunkSink(this.onStdout), chunkSink(this.onStderr), agent, eventSink(this.onRequest)),
    )
    return this
  }

  async close() {
    await this.#native.close()
  }

  async [Symbol.asyncDispose]() {
    await this.close()
  }

  // JavaScript and TypeScript are prepared here, on the host (lib/jscell.js), and then run by the
  // native side's JavaScript runner.
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

  /** A call's deadline: its own, else the session's. */
  #timeoutS(opts) {
    const timeoutS = opts.timeoutS ?? this.timeoutS
    if (typeof timeoutS !== 'number') throw coded('ERR_INVALID_OPTION', 'timeoutS must be a positive number of seconds')
    return timeoutS
  }

  async #call(opts, invoke) {
    const timeoutS = this.#timeoutS(opts)
    const r = await nativeCall(
      opts,
      this,
      (id) => this.#native.cancel(id),
      (callId, out, err) => invoke({ timeoutS, callId }, out, err),
    )
    if (r.fault && r.fault.type === 'startup_failed') r.fault = this.#explain(r.fault.message) ?? r.fault
    else if (!r.fault && r.exitCode === 125) r.fault = this.#setupFailed(r.stderr)
    return finishResult(r, opts.onResult)
  }

  /** A startup_failed fault for kern's text when the host's facts name its cause (a masked /proc,
   * a seccomp filter, user namespaces turned off, ...): it says the cause and the fix and carries
   * the cause's stable `code`, then kern's own text. Null when no cause is named. */
  #explain(kernText) {
    this.#hostFacts ??= facts()
    const d = diagnose(kernText, this.#hostFacts)
    if (!d) return null
    return { type: 'startup_failed', code: d.code, message: `${d.cause}. Fix: ${d.fix}. kern said: ${kernText}` }
  }

  /** kern's in-box setup ends a box with 125 after its started channel spoke, so such a box is an
   * ordinary result (docs/results.md). Its first line is kern's `sandbox setup failed: ...` only
   * when the workload never ran, which the host's facts prove when they name a cause that fails
   * every box here (a masked /proc refuses every box its procfs): then it is the startup_failed
   * fault it is. Anything else stays an ordinary exit 125. */
  #setupFailed(stderr) {
    const first = String(stderr).slice(0, 4096).trimStart().split('\n', 1)[0]
    if (!first.startsWith('kern: sandbox setup failed: ')) return null
    const fault = this.#explain(first)
    return fault && FAILS_EVERY_BOX.has(fault.code) ? fault : null
  }

  async kernel(opts = {}) {
    opts = optionsBag('kernel', opts)
    const timeoutS = this.#timeoutS(opts)
    const language = kernelLanguage(opts.language ?? 'python')
    if (opts.image != null) checkType('image', opts.image, 'string')
    // A Python kernel with IPython-style cells (shell escapes, magics), for kern-sandbox/e2b: a
    // symbol key, so it is no public option and no misspelt one turns it on.
    const ipython = language.native === 'python' && opts[IPYTHON] === true
    let native
    try {
      native = await callNative(() => this.#native.kernel(timeoutS, language.native, opts.image ?? undefined, ipython))
    } catch (e) {
      throw this.#explainStart(e)
    }
    return new Kernel(native, this, (callId) => this.#native.cancel(callId), language)
  }

  async machine(opts = {}) {
    try {
      return await openMachine(this, this.#native, opts)
    } catch (e) {
      throw this.#explainStart(e)
    }
  }

  async snapshots() {
    const list = await callNative(() => this.#native.snapshots())
    const remove = (id) => callNative(() => this.#native.deleteSnapshot(id))
    return list.map((info) => new MachineSnapshot(info, remove))
  }

  /** A kernel's or machine's box that did not start is an error, not a fault: when the host's
   * facts name the cause of kern's words in it, the error says the cause and the fix first. Same
   * class and code; only the message grows. */
  #explainStart(e) {
    const said =
      e instanceof SandboxError &&
      e.code === 'ERR_SANDBOX' &&
      /(?:kern: sandbox setup failed|error: sandbox): .*/.exec(e.message)
    const explained = said && this.#explain(said[0])
    return explained ? coded(e.code, `${explained.message.split(' kern said: ')[0]} ${e.message}`, { cause: e }) : e
  }

  async writeFile(path, data) {
    checkPath('path', path)
    await callNative(() => this.#native.writeFile(path, toBytes(data)))
  }

  async readFile(path, opts = {}) {
    checkPath('path', path)
    const maxBytes = bytesOption('readFile', opts)
    return await callNative(() => this.#native.readFile(path, maxBytes))
  }

  async listFiles(subdir = '') {
    checkPath('subdir', subdir ?? '')
    try {
      return await this.#native.listFiles(subdir ?? '')
    } catch (e) {
      throw fromNative(e)
    }
  }

  // Synchronous, as 0.1.1's: Node's thread waits while the native side archives.
  snapshot(dest, opts = {}) {
    checkPath('dest', dest)
    const maxBytes = bytesOption('snapshot', opts)
    callNative(() => this.#native.snapshot(dest, maxBytes))
  }

  restore(src, opts = {}) {
    checkPath('src', src)
    const maxBytes = bytesOption('restore', opts)
    callNative(() => this.#native.restore(src, maxBytes))
  }

  async snapshotAsync(dest, opts = {}) {
    await this.#archiveAsync('snapshotAsync', 'dest', dest, opts)
  }

  async restoreAsync(src, opts = {}) {
    await this.#archiveAsync('restoreAsync', 'src', src, opts)
  }

  // `signal` reaches the native work through a call id, as a runCode's does.
  async #archiveAsync(method, name, path, opts) {
    checkPath(name, path)
    opts = optionsBag(method, opts)
    const maxBytes = bytesOption(method, opts)
    await cancellable(
      checkSignal(opts.signal),
      (id) => this.#native.cancel(id),
      (callId) => this.#native[method](path, maxBytes, callId),
    )
  }
}

module.exports = { Sandbox }
