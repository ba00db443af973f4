'use strict'
// The code-running side of the server: one kern-sandbox session (the workspace), warm kernels on
// it, and how each language runs. Python, JavaScript and TypeScript go through a warm kernel of
// their language unless the server runs with the kernel off (then a fresh box per call); bash is
// always a fresh box.

const { Sandbox, SandboxError, resolveLanguage } = require('kern-sandbox')

const STATE_LOST_BEFORE =
  'the warm kernel had been torn down (an earlier timeout, cap or crash) and was restarted: variables from earlier calls are gone'
const STATE_LOST_NOW =
  'this fault tore the warm kernel down: variables from earlier calls are gone, the next call starts a fresh kernel'

class Interpreter {
  #config
  #sandbox = null
  #opening = null
  /** language -> Promise<Kernel> */
  #kernels = new Map()
  #closed = false

  constructor(config) {
    this.#config = config
  }

  get warmKernel() {
    return this.#config.kernel
  }

  /** The open session, opened (with its setup) on first use. A failed open is retried by the
   * next call. */
  async session() {
    if (this.#closed) throw new SandboxError('the server is shutting down')
    if (this.#sandbox) return this.#sandbox
    if (!this.#opening) {
      this.#opening = this.#open().finally(() => {
        this.#opening = null
      })
    }
    return this.#opening
  }

  async #open() {
    const c = this.#config
    const sbx = new Sandbox({
      image: c.image,
      setup: c.setup ?? undefined,
      workspace: c.workspace ?? undefined,
      memoryMb: c.memoryMb,
      timeoutS: c.timeoutS,
      profiles: c.profiles ?? undefined,
      network: false,
    })
    try {
      await sbx.open()
    } catch (e) {
      await sbx.close().catch(() => {})
      throw e
    }
    if (this.#closed) {
      await sbx.close()
      throw new SandboxError('the server is shutting down')
    }
    this.#sandbox = sbx
    return sbx
  }

  /** Runs `code`. Resolves to `{ result, warmKernel, stateLost }`; rejects with the signal's
   * reason when cancelled, or a SandboxError when nothing could run. */
  async run(code, language, opts) {
    const sbx = await this.session()
    const call = { timeoutS: opts.timeoutS, signal: opts.signal, onStdout: opts.onStdout, onStderr: opts.onStderr }
    const lang = resolveLanguage(language)
    if (lang.kernel && this.#config.kernel) return this.#inKernel(lang.name, code, call)
    // bash, and every language with the kernel off: a fresh box, as the library runs it.
    return { result: await sbx.runCode(code, { ...call, language: lang.name }), warmKernel: false, stateLost: null }
  }

  async #inKernel(language, code, call) {
    let stateLost = null
    let kernel = await this.#kernel(language)
    if (!kernel.alive) {
      kernel = await this.#replace(language, kernel)
      stateLost = STATE_LOST_BEFORE
    }
    let result
    try {
      result = await kernel.runCode(code, call)
    } catch (e) {
      // A kernel that died between our check and the cell: one retry on a fresh one.
      if (!(e instanceof SandboxError) || kernel.alive || (call.signal && call.signal.aborted)) throw e
      kernel = await this.#replace(language, kernel)
      stateLost = STATE_LOST_BEFORE
      result = await kernel.runCode(code, call)
    }
    // Left in place: the next call finds it dead, replaces it and says so too.
    if (!kernel.alive) stateLost = STATE_LOST_NOW
    return { result, warmKernel: true, stateLost }
  }

  /** A live kernel in place of `dead`; concurrent calls that found the same dead kernel share
   * one replacement. */
  async #replace(language, dead) {
    const current = this.#kernels.get(language)
    if (current && (await current.catch(() => null)) === dead) this.#kernels.delete(language)
    await dead.close().catch(() => {})
    return this.#kernel(language)
  }

  /** The live kernel for `language`, started on first use. */
  #kernel(language) {
    let k = this.#kernels.get(language)
    if (!k) {
      k = this.#startKernel(language)
      this.#kernels.set(language, k)
      k.catch(() => {
        if (this.#kernels.get(language) === k) this.#kernels.delete(language)
      })
    }
    return k
  }

  async #startKernel(language) {
    const sbx = await this.session()
    // An image without node rejects a JS kernel with a SandboxError that says so: the reply.
    return sbx.kernel({ language, timeoutS: this.#config.timeoutS })
  }

  /** Ends every warm kernel: the next call starts fresh ones. Resolves to how many were live. */
  async reset() {
    const kernels = [...this.#kernels.values()]
    this.#kernels.clear()
    let live = 0
    for (const p of kernels) {
      const k = await p.catch(() => null)
      if (k && k.alive) live++
      if (k) await k.close().catch(() => {})
    }
    return live
  }

  async close() {
    this.#closed = true
    await this.reset()
    const sbx = this.#sandbox ?? (this.#opening ? await this.#opening.catch(() => null) : null)
    this.#sandbox = null
    if (sbx) await sbx.close().catch(() => {})
  }
}

module.exports = { Interpreter, STATE_LOST_BEFORE, STATE_LOST_NOW }
