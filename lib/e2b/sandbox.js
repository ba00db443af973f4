'use strict'
// Sandbox: E2B's code-interpreter sandbox (`Sandbox.create()`, `runCode`, contexts, files,
// commands) on this package's native session: one workspace, bound at /home/user in every box,
// a warm kernel per code context, a fresh box per command. Network off unless asked for.

const { randomBytes } = require('node:crypto')
const { NativeSandbox } = require('../native.js')
const { DEFAULTS, nativeOptions } = require('../options.js')
const { callNative } = require('../errors.js')
const { SandboxError, InvalidArgumentError, NotFoundError, killedError, toE2B } = require('./errors.js')
const { Contexts, coreKernel, HOME, KERNEL_BACKSTOP_S } = require('./contexts.js')
const { kernelLanguage } = require('../kernel.js')
const { Filesystem } = require('./files.js')
const { Commands } = require('./commands.js')

/** E2B's default sandbox lifetime. */
const LIFETIME_MS = 300_000
/** The longest lifetime a Node timer holds (about 24.8 days). */
const MAX_LIFETIME_MS = 2 ** 31 - 1
/** E2B's own template names: here they mean the default image. */
const E2B_TEMPLATES = new Set(['code-interpreter-v1', 'code-interpreter-beta', 'code-interpreter', 'base'])
/** This package's Sandbox options that the E2B options set, so `kern` may not. */
const OWNED = ['image', 'env', 'network', 'boxWorkspace']

/** Live sandboxes of this process, for `Sandbox.connect` and `Sandbox.kill`. */
const live = new Map()

function checkLifetime(ms, what) {
  if (typeof ms !== 'number' || !(ms > 0) || ms > MAX_LIFETIME_MS) {
    throw new InvalidArgumentError(`${what} must be a positive number of milliseconds, at most ${MAX_LIFETIME_MS}`)
  }
  return ms
}

function stringRecord(v, what) {
  if (v == null) return {}
  if (typeof v !== 'object' || Array.isArray(v)) throw new InvalidArgumentError(`${what} must be an object of strings`)
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, String(x)]))
}

/** The core Sandbox options an E2B `create` amounts to. */
function coreOptions(template, opts) {
  const kern = opts.kern ?? {}
  if (typeof kern !== 'object' || Array.isArray(kern))
    throw new InvalidArgumentError('kern must be an object of kern-sandbox Sandbox options')
  for (const k of OWNED) {
    if (kern[k] !== undefined) {
      throw new InvalidArgumentError(
        `kern.${k} is set by the E2B options (template, envs, allowInternetAccess, /home/user): use those`,
      )
    }
  }
  const allow = opts.allowInternetAccess ?? false
  if (typeof allow !== 'boolean') throw new InvalidArgumentError('allowInternetAccess must be a boolean')
  return {
    trackFiles: false, // E2B reports no per-call file changes; spare the bookkeeping
    ...kern,
    image: template === undefined || E2B_TEMPLATES.has(template) ? DEFAULTS.image : template,
    // E2B's user has its home at /home/user: `~` and $HOME mean the workspace there too.
    env: { HOME, ...stringRecord(opts.envs, 'envs') },
    network: allow,
    boxWorkspace: HOME,
  }
}

class Sandbox {
  #native
  #contexts
  #killed = false
  #timer = null
  #endAt = 0
  #startedAt = new Date()
  #template
  #image

  /** Use `Sandbox.create()`. */
  constructor(native, { template, image, metadata, timeoutMs }) {
    this.#native = native
    this.#template = template
    this.#image = image
    this.sandboxId = `kern${randomBytes(10).toString('hex')}`
    this.metadata = metadata
    const host = this
    this.#contexts = new Contexts((language) => this.#startKernel(language), {
      get killed() {
        return host.#killed
      },
    })
    const guard = (start) => this.#request(start)
    this.files = new Filesystem(native, guard)
    this.commands = new Commands(native, guard, () => Math.max(this.#endAt - Date.now(), 1))
    this.#arm(timeoutMs)
    live.set(this.sandboxId, this)
  }

  /** Creates a sandbox: `create(template?, opts?)` or `create(opts?)`. Resolves once its
   * workspace is ready; the default Python context starts meanwhile. */
  static async create(template, opts) {
    if (template !== undefined && typeof template !== 'string') [template, opts] = [undefined, template]
    opts = opts ?? {}
    if (typeof opts !== 'object' || Array.isArray(opts)) throw new InvalidArgumentError('options must be an object')
    const timeoutMs = checkLifetime(opts.timeoutMs ?? LIFETIME_MS, 'timeoutMs')
    const core = coreOptions(template, opts)
    const metadata = stringRecord(opts.metadata, 'metadata') // checked before anything is opened
    let native
    try {
      native = callNative(() => new NativeSandbox(nativeOptions(core)))
      await callNative(() => native.open(undefined, undefined))
    } catch (e) {
      throw toE2B(e)
    }
    const sbx = new Sandbox(native, {
      template: template ?? 'code-interpreter-v1',
      image: core.image,
      metadata,
      timeoutMs,
    })
    sbx.#contexts.warm()
    return sbx
  }

  /** The live sandbox of this process with that id (E2B reconnects over the network; here a
   * sandbox lives in the process that created it). */
  static async connect(sandboxId) {
    const s = live.get(sandboxId)
    if (!s)
      throw new NotFoundError(
        `sandbox ${sandboxId} not found (it was killed, timed out, or belongs to another process)`,
      )
    return s
  }

  /** Kills the live sandbox with that id; false when there is none. */
  static async kill(sandboxId) {
    const s = live.get(sandboxId)
    if (!s) return false
    await s.kill()
    return true
  }

  /** Runs `code` in a context (default: the default context of `language`, Python if absent). */
  async runCode(code, opts = {}) {
    opts = opts ?? {}
    if (typeof code !== 'string') throw new InvalidArgumentError('code must be a string')
    if (opts.context && opts.language) {
      throw new InvalidArgumentError('pass either context or language to runCode, not both')
    }
    for (const k of ['onStdout', 'onStderr', 'onResult', 'onError']) {
      if (opts[k] != null && typeof opts[k] !== 'function') throw new InvalidArgumentError(`${k} must be a function`)
    }
    for (const k of ['timeoutMs', 'requestTimeoutMs']) {
      if (opts[k] != null && (typeof opts[k] !== 'number' || !(opts[k] >= 0))) {
        throw new InvalidArgumentError(`${k} must be a number of milliseconds, 0 for none`)
      }
    }
    if (opts.envs != null && (typeof opts.envs !== 'object' || Array.isArray(opts.envs))) {
      throw new InvalidArgumentError('envs must be an object of strings')
    }
    this.#alive()
    const entry = this.#contexts.entry(opts.context, opts.language)
    return this.#contexts.run(entry, code, opts)
  }

  /** Creates a context: its own kernel, in `cwd` (default /home/user). */
  async createCodeContext(opts = {}) {
    this.#alive()
    return this.#contexts.create(opts ?? {})
  }

  /** Every context, the default Python and JavaScript ones included. */
  async listCodeContexts() {
    this.#alive()
    return this.#contexts.list()
  }

  /** Restarts a context's kernel: its state is gone, it keeps its id. */
  async restartCodeContext(context) {
    this.#alive()
    await this.#contexts.restart(context)
  }

  async removeCodeContext(context) {
    this.#alive()
    await this.#contexts.remove(context)
  }

  /** Sets the sandbox's remaining lifetime, from now. */
  async setTimeout(timeoutMs) {
    this.#alive()
    this.#arm(checkLifetime(timeoutMs, 'timeoutMs'))
  }

  async isRunning() {
    return !this.#killed
  }

  async getInfo() {
    this.#alive()
    return {
      sandboxId: this.sandboxId,
      templateId: this.#image,
      name: this.#template,
      metadata: { ...this.metadata },
      startedAt: this.#startedAt,
      endAt: new Date(this.#endAt),
    }
  }

  /** Ends the sandbox: kernels and boxes stop, requests in flight reject with TimeoutError, and
   * the workspace is deleted (unless `kern.workspace` named one). Idempotent. */
  async kill() {
    if (this.#killed) return
    this.#killed = true
    clearTimeout(this.#timer)
    live.delete(this.sandboxId)
    // The session first: it also stops kernels still starting, which closeAll() would wait for.
    await this.#native.close()
    await this.#contexts.closeAll()
  }

  async [Symbol.asyncDispose]() {
    await this.kill()
  }

  #arm(ms) {
    clearTimeout(this.#timer)
    this.#endAt = Date.now() + ms
    this.#timer = setTimeout(() => this.kill().catch(() => {}), ms)
    this.#timer.unref() // a lifetime never keeps Node alive; exit cleans the boxes up
  }

  #alive() {
    if (this.#killed) throw new SandboxError(`sandbox ${this.sandboxId} was killed or reached the end of its lifetime`)
  }

  /** One native request: refused once killed; its errors as E2B's; cut short by kill(), E2B's
   * TimeoutError. */
  async #request(start) {
    this.#alive()
    try {
      return await callNative(start)
    } catch (e) {
      throw this.#killed ? killedError(e) : toE2B(e)
    }
  }

  /** A started kernel for a context language: Python (IPython-style cells) for 'python' and
   * 'bash', the package's JavaScript kernel for 'javascript' and 'typescript'. */
  async #startKernel(language) {
    this.#alive()
    const cancel = (id) => this.#native.cancel(id)
    // bash contexts run in the Python kernel (its shell escapes); a Python kernel takes IPython-style cells.
    const lang = kernelLanguage(language === 'bash' ? 'python' : language)
    const python = lang.native === 'python'
    try {
      const native = await callNative(() => this.#native.kernel(KERNEL_BACKSTOP_S, lang.native, undefined, python))
      return coreKernel(native, cancel, lang)
    } catch (e) {
      if (python || e.code !== 'ERR_NO_NODE') throw e
      throw new SandboxError(
        `${language} contexts run on node, and this sandbox's image (${this.#image}) has no node on PATH: ` +
          "use an image with both Python and Node, as E2B's code-interpreter template has",
        { cause: e, code: e.code },
      )
    }
  }
}

module.exports = { Sandbox }
