'use strict'
// Kernel: a warm interpreter in one long-lived box (Sandbox#kernel()). Its API is documented in
// index.d.ts; the comments here say how it is done.

const { SandboxError, coded } = require('./errors.js')
const { show, optionsBag } = require('./options.js')
const { nativeCall } = require('./calls.js')
const { richLine, finishResult, deliver } = require('./results.js')
const { prepareCell, warm } = require('./jscell.js')
const { LANGUAGES, resolveLanguage } = require('./languages.js')

/** The kernel() option key that asks for IPython-style Python cells (kern-sandbox/e2b's contexts). */
const IPYTHON = Symbol.for('kern-sandbox.ipython')

/** The language a kernel runs `name` in (lib/languages.js); a JavaScript one starts warming the
 * host-side cell preparation. */
function kernelLanguage(name = 'python') {
  const lang = resolveLanguage(name, { kernel: true })
  if (lang.native === 'javascript') warm(lang.typescript)
  return lang
}

class Kernel {
  #native
  #sandbox
  #cancel
  #language

  constructor(native, sandbox, cancel, language = LANGUAGES.python) {
    this.#native = native
    this.#sandbox = sandbox
    this.#cancel = cancel
    this.#language = language
  }

  get language() {
    return this.#language.name
  }

  get alive() {
    return this.#native.alive
  }

  // A JavaScript/TypeScript cell is prepared here, on the host. Results the driver sends while the
  // cell runs reach `onResult` at once and are kept, so finishResult does not deliver them twice.
  async runCode(code, opts = {}) {
    opts = optionsBag('runCode', opts)
    if (typeof code !== 'string') throw new SandboxError(`code must be a string, got ${show(code)}`)
    if (opts.timeoutS != null && typeof opts.timeoutS !== 'number') {
      throw coded('ERR_INVALID_OPTION', 'timeoutS must be a positive number of seconds')
    }
    if (this.#language.native === 'javascript') {
      if (code.includes('\0')) throw new SandboxError('code must be a string with no NUL byte')
      code = prepareCell(code, { typescript: !!this.#language.typescript })
    }
    const delivered = []
    let settled = false
    const onResult = opts.onResult
      ? (text) => {
          if (settled) return
          const got = richLine(text, null)
          if (got && got.result) {
            delivered.push(got.result)
            deliver(opts.onResult, got.result)
          }
        }
      : undefined
    try {
      const r = await nativeCall(opts, this.#sandbox, this.#cancel, (callId, out, err) =>
        this.#native.runCode(code, { timeoutS: opts.timeoutS ?? undefined, callId }, out, err, onResult),
      )
      for (const x of delivered) x.executionCount = r.executionCount ?? null
      return finishResult(r, opts.onResult, delivered)
    } finally {
      settled = true // a result the TSFN delivers late is already in `results`
    }
  }

  async close() {
    await this.#native.close()
  }

  async [Symbol.asyncDispose]() {
    await this.close()
  }
}

module.exports = { Kernel, kernelLanguage, IPYTHON }
