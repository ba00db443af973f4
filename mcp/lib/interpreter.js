'use strict'
// The code-running side of the server: one kern-sandbox session (the workspace), warm kernels on
// it, and how each language runs. Python, JavaScript and TypeScript go through a warm kernel of
// their language unless the server runs with the kernel off (then a fresh box per call); bash is
// always a fresh box.

const crypto = require('node:crypto')
const fs = require('node:fs')
const path = require('node:path')
const { Sandbox, SandboxError, resolveLanguage } = require('kern-sandbox')

/** Above this, code goes to a workspace file rather than argv (one argv string is limited to
 * 128 KiB by Linux). */
const INLINE_MAX = 100 * 1024
/** Where the box sees the workspace. */
const BOX_WORKSPACE = '/workspace'

/** Runs bash where the image has it, else sh, saying so on stderr. $1 is the script (`-c`) or
 * its file. */
const SHELL_WRAP = (inline) => {
  const run = (sh) => (inline ? `${sh} -c "$1"` : `${sh} "$1"`)
  return (
    `if command -v bash >/dev/null 2>&1; then exec ${run('bash')}; fi; ` +
    `echo '[kern-sandbox-mcp] no bash in this image: running with sh' >&2; exec ${run('sh')}`
  )
}

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
    if (lang.kernel) {
      if (this.#config.kernel) return this.#inKernel(lang.name, code, call)
      return { result: await sbx.runCode(code, { ...call, language: lang.name }), warmKernel: false, stateLost: null }
    }
    return { result: await this.#shellBox(sbx, code, call), warmKernel: false, stateLost: null }
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

  /** bash (sh where the image has no bash) in a fresh box. */
  async #shellBox(sbx, code, call) {
    if (Buffer.byteLength(code) <= INLINE_MAX)
      return sbx.run(['sh', '-c', SHELL_WRAP(true), 'kern-sandbox-mcp', code], call)
    return this.#withCellFile(sbx, code, 'sh', (file) =>
      sbx.run(['sh', '-c', SHELL_WRAP(false), 'kern-sandbox-mcp', file], call),
    )
  }

  /** Runs `use(boxPath)` with `code` in a hidden workspace file, removed afterwards. */
  async #withCellFile(sbx, code, ext, use) {
    const name = `.kern-mcp-cell-${crypto.randomBytes(6).toString('hex')}.${ext}`
    await sbx.writeFile(name, code)
    try {
      return await use(`${BOX_WORKSPACE}/${name}`)
    } finally {
      // One name of ours at the workspace root, so no path of the box's is followed; unlink()
      // removes a symlink put in its place, not its target. Whatever else the box put there
      // (a directory) stays: the call's own result matters more than the cleanup.
      try {
        fs.rmSync(path.join(sbx.workspacePath, name), { force: true })
      } catch {
        // left for the session's close
      }
    }
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

module.exports = { Interpreter, SHELL_WRAP, STATE_LOST_BEFORE, STATE_LOST_NOW }
