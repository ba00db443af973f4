'use strict'
// CommandHandle: E2B's handle on a running command or PTY (from `commands.run(..., { background:
// true })`, `commands.connect`, `pty.create`, `pty.connect`), over one machine Process.

const { StringDecoder } = require('node:string_decoder')
const { InvalidArgumentError, TimeoutError, CommandExitError, killedError } = require('./errors.js')

/** Output a handle keeps for its `stdout`/`stderr` getters, per stream, when the sandbox gives no
 * bound: the machine's own capture is what `wait()` returns; this only mirrors it while the
 * command runs. */
const KEEP_CHARS = 10 * 1024 * 1024

/** A string stream for E2B's text callbacks: characters split across chunks kept whole, the text
 * kept (bounded) for the handle's getters. */
class TextStream {
  #decoder = new StringDecoder('utf8')
  #callback
  #keep
  text = ''

  constructor(callback, keep) {
    this.#callback = callback
    this.#keep = keep
  }

  push(chunk) {
    this.#emit(this.#decoder.write(chunk))
  }

  end() {
    this.#emit(this.#decoder.end())
  }

  #emit(s) {
    if (!s) return
    if (this.text.length < this.#keep) this.text += s.slice(0, this.#keep - this.text.length)
    if (this.#callback) settle(() => this.#callback(s))
  }
}

/** Calls a user callback; what it throws or rejects with never reaches the command's plumbing. */
function settle(fn) {
  try {
    const r = fn()
    if (r && typeof r.catch === 'function') r.catch(() => {})
  } catch {
    // A failing callback is the caller's: the command runs on (E2B's handle does the same).
  }
}

/** The callbacks given to the machine's spawn()/attach() before the handle exists: output that
 * arrives before the handle is made waits here, so none is lost. */
class Relay {
  #held = []
  #to = null

  /** For spawn()/attach(). A PTY's output comes through onData only; a plain process's through
   * onStdout/onStderr (its onData would repeat them). */
  callbacks(pty) {
    const pass = (stream) => (chunk) => (this.#to ? this.#to(chunk, stream) : this.#held.push([chunk, stream]))
    return pty ? { onData: pass('pty') } : { onStdout: pass('out'), onStderr: pass('err') }
  }

  connect(to) {
    this.#to = to
    for (const [chunk, stream] of this.#held.splice(0)) to(chunk, stream)
  }
}

class CommandHandle {
  #process
  #out
  #err
  #onPty
  #disconnected = false
  #done
  #result = null
  #pty

  /** `process`: the machine's Process; `relay`: the Relay its callbacks went to; `how`:
   * `{ onStdout, onStderr, onPty, pty, timeoutMs, killed(), keep }` (`keep`: the most characters of
   * each stream kept while it runs). */
  constructor(process, relay, how) {
    this.#process = process
    this.#pty = Boolean(how.pty)
    const keep = how.keep ?? KEEP_CHARS
    this.#out = new TextStream(how.onStdout, keep)
    this.#err = new TextStream(how.onStderr, keep)
    this.#onPty = how.onPty
    this.#done = this.#finish(how)
    this.#done.catch(() => {}) // wait() reports it; an unawaited handle raises nothing
    relay.connect((chunk, stream) => this.#data(chunk, stream))
  }

  /** The process id in the sandbox. */
  get pid() {
    return this.#process.pid
  }

  #data(chunk, stream) {
    if (this.#disconnected) return
    if (this.#pty) {
      if (stream === 'pty' && this.#onPty) {
        const bytes = new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength)
        settle(() => this.#onPty(bytes))
      }
      return
    }
    if (stream === 'out') this.#out.push(chunk)
    else if (stream === 'err') this.#err.push(chunk)
  }

  async #finish({ timeoutMs, killed }) {
    const r = await this.#process.wait()
    this.#out.end()
    this.#err.end()
    if (killed()) throw killedError()
    if (r.fault && r.fault.type === 'timeout') {
      throw new TimeoutError(
        `command ${this.pid} timed out after ${timeoutMs} ms: pass a larger 'timeoutMs' (0 for none) to give it longer`,
      )
    }
    // A PTY's output went to onData only, as in E2B: its stdout stays empty.
    const result = {
      exitCode: r.exitCode,
      error: r.fault ? r.fault.message : r.exitCode !== 0 ? `exit status ${r.exitCode}` : undefined,
      stdout: this.#pty ? '' : r.stdout,
      stderr: this.#pty ? '' : r.stderr,
    }
    this.#result = result
    if (result.exitCode !== 0 || r.fault) throw new CommandExitError(result)
    return result
  }

  /** undefined while it runs. */
  get exitCode() {
    return this.#result ? this.#result.exitCode : undefined
  }

  get error() {
    return this.#result ? this.#result.error : undefined
  }

  /** What it printed so far (all of it once it ended). */
  get stdout() {
    return this.#result ? this.#result.stdout : this.#out.text
  }

  get stderr() {
    return this.#result ? this.#result.stderr : this.#err.text
  }

  /** Its result once it exits; CommandExitError on a non-zero exit, TimeoutError past its
   * `timeoutMs`. */
  wait() {
    return this.#done
  }

  /** Stops the callbacks; the command keeps running (reach it again with `commands.connect`). */
  async disconnect() {
    this.#disconnected = true
    this.#process.detach()
  }

  /** SIGKILL; false when it had already ended. */
  async kill() {
    return await this.#process.kill('SIGKILL')
  }

  /** Writes to its stdin (the command must have been started with `stdin: true`). */
  async sendStdin(data) {
    await stdinWrite(this.#process, data)
  }

  /** Closes its stdin: the command reads EOF. */
  async closeStdin() {
    await this.#process.end()
  }
}

async function stdinWrite(process, data) {
  if (typeof data !== 'string' && !(data instanceof Uint8Array)) {
    throw new InvalidArgumentError(`stdin data must be a string or a Uint8Array, got ${typeof data}`)
  }
  await process.write(typeof data === 'string' ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength))
}

module.exports = { CommandHandle, Relay, stdinWrite }
