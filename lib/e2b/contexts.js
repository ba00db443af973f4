'use strict'
// Code contexts: each one warm kernel, independent of the others, started on first use. Python
// and bash contexts are Python kernels with IPython-style cells (a bash context's cells go to one
// long-lived bash in its kernel);
// JavaScript and TypeScript contexts are the package's JS kernels.

const { randomUUID } = require('node:crypto')
const path = require('node:path')
const { resolveLanguage } = require('../languages.js')
const { SandboxError, TimeoutError, InvalidArgumentError, NotFoundError, killedError, toE2B } = require('./errors.js')
const { ExecutionError, Execution, fromCore, lines, LineStream } = require('./execution.js')
const { deliver } = require('../results.js')

/** The box's home, where the workspace is bound: every context's default working directory. */
const HOME = '/home/user'
/** The longest delay setTimeout holds (about 24.8 days); a longer one would fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1
/** E2B's default for a cell's `timeoutMs`; 0 means none. */
const CELL_TIMEOUT_MS = 60_000
/** The kernels' own per-cell deadline, which tears a kernel down: a backstop far past any cell's
 * timeoutMs, which interrupts the cell instead and keeps the context's state. */
const KERNEL_BACKSTOP_S = 7 * 86_400

/** A language name as runCode/createCodeContext take it (any case, as E2B's SDK takes it) → the
 * context language it runs in (lib/languages.js); an unknown one is an InvalidArgumentError. */
function contextLanguage(language) {
  if (language == null) return 'python'
  try {
    return resolveLanguage(typeof language === 'string' ? language.toLowerCase() : language).name
  } catch (e) {
    throw toE2B(e)
  }
}

/** One context: its public identity, its kernel (started lazily, restarted when dead) and its
 * own execution count. */
class Entry {
  constructor(language, cwd) {
    this.id = randomUUID()
    this.language = language
    this.cwd = cwd
    this.count = 0
    this.kernel = null // Promise<Kernel> while starting or started
  }

  get context() {
    return { id: this.id, language: this.language, cwd: this.cwd }
  }
}

class Contexts {
  #start
  #host
  /** id → Entry, in creation order. */
  #entries = new Map()
  /** context language → the id of its default context. */
  #defaults = new Map()

  /** `start(language)`: a started core Kernel for that language. `host.killed`: whether the
   * sandbox was killed (requests it cut short reject with E2B's TimeoutError). */
  constructor(start, host) {
    this.#start = start
    this.#host = host
    // E2B lists a default Python and a default JavaScript context from the start.
    for (const l of ['python', 'javascript']) this.#default(l)
  }

  #default(language) {
    const id = this.#defaults.get(language)
    if (id && this.#entries.has(id)) return this.#entries.get(id)
    const e = new Entry(language, HOME)
    this.#entries.set(e.id, e)
    this.#defaults.set(language, e.id)
    return e
  }

  /** Starts the default Python kernel now, so the first cell finds it warm. */
  warm() {
    this.#kernel(this.#default('python')).catch(() => {}) // the first runCode reports a failure
  }

  async create({ language, cwd } = {}) {
    const l = contextLanguage(language)
    let dir = HOME
    if (cwd != null) {
      if (typeof cwd !== 'string' || !cwd || cwd.includes('\0'))
        throw new InvalidArgumentError('cwd must be a non-empty path')
      dir = path.posix.resolve(HOME, cwd)
    }
    const e = new Entry(l, dir)
    this.#entries.set(e.id, e)
    try {
      await this.#kernel(e)
    } catch (err) {
      this.#entries.delete(e.id)
      throw err
    }
    return e.context
  }

  list() {
    return [...this.#entries.values()].map((e) => e.context)
  }

  #find(ctx) {
    const id = typeof ctx === 'string' ? ctx : ctx && typeof ctx === 'object' ? ctx.id : undefined
    if (typeof id !== 'string') throw new InvalidArgumentError('expected a context or a context id')
    const e = this.#entries.get(id)
    if (!e) throw new NotFoundError(`no code context with id ${id}`)
    return e
  }

  /** A fresh kernel for the context: its state is gone, its id and working directory stay. */
  async restart(ctx) {
    const e = this.#find(ctx)
    const old = e.kernel
    e.kernel = null
    e.count = 0
    if (old)
      await old.then(
        (k) => k.close(),
        () => {},
      )
    await this.#kernel(e)
  }

  async remove(ctx) {
    const e = this.#find(ctx)
    this.#entries.delete(e.id)
    if (e.kernel)
      await e.kernel.then(
        (k) => k.close(),
        () => {},
      )
  }

  /** The entry a runCode runs in: the given context, or the language's default. */
  entry(context, language) {
    if (context != null) return this.#find(context)
    return this.#default(contextLanguage(language))
  }

  /** The entry's kernel, started (or restarted, when it died) as needed. */
  #kernel(e) {
    if (e.kernel) {
      return e.kernel.then((k) => {
        if (k.alive) return k
        e.kernel = null
        e.count = 0 // a restarted kernel counts its cells afresh, as after restartCodeContext
        return this.#kernel(e)
      })
    }
    const p = this.#startIn(e)
    e.kernel = p
    p.catch(() => {
      if (e.kernel === p) e.kernel = null // the next use tries again
    })
    return p
  }

  async #startIn(e) {
    const k = await this.#start(e.language).catch((err) => {
      throw this.#host.killed ? killedError(err) : toE2B(err)
    })
    if (e.cwd !== HOME) {
      const dir = JSON.stringify(e.cwd)
      const setup =
        e.language === 'python' || e.language === 'bash'
          ? `__import__('os').makedirs(${dir}, exist_ok=True); __import__('os').chdir(${dir})`
          : `require('fs').mkdirSync(${dir}, { recursive: true }); process.chdir(${dir})`
      const r = await k.runCode(setup).catch((err) => ({ error: { value: err.message } }))
      if (r.error) {
        await k.close()
        throw new SandboxError(`cannot use ${e.cwd} as the context's working directory: ${r.error.value}`)
      }
    }
    return k
  }

  /** Runs one cell in `e`, E2B's way: see Sandbox#runCode. */
  async run(e, code, opts) {
    const timeoutMs = opts.timeoutMs ?? CELL_TIMEOUT_MS
    const ac = new AbortController()
    let timedOut = false
    // Armed before the kernel is (re)started, so the deadline covers a slow start too. Past what
    // a timer can hold (or Infinity) means none: setTimeout would fire at once instead.
    const timer =
      timeoutMs > 0 && timeoutMs <= MAX_TIMER_MS ? setTimeout(() => ((timedOut = true), ac.abort()), timeoutMs) : null
    let kernel
    try {
      kernel = await Promise.race([
        this.#kernel(e),
        new Promise((_, reject) => ac.signal.addEventListener('abort', () => reject(ac.signal.reason), { once: true })),
      ])
    } catch (x) {
      clearTimeout(timer)
      if (this.#host.killed) throw killedError(x)
      if (timedOut)
        throw new TimeoutError(`Execution timed out after ${timeoutMs} ms while the context's kernel was starting`)
      throw toE2B(x)
    }
    const out = opts.onStdout ? new LineStream(opts.onStdout, false) : null
    const err = opts.onStderr ? new LineStream(opts.onStderr, true) : null
    const seen = new Map()
    const e2b = (core) => {
      let r = seen.get(core)
      if (!r) seen.set(core, (r = fromCore(core)))
      return r
    }
    const envs = opts.envs && e.language !== 'bash' ? envCells(e.language, opts.envs) : null
    const hidden = (cell) => kernel.runCode(cell, { timeoutS: KERNEL_BACKSTOP_S }).catch(() => {})
    if (envs) hidden(envs.before) // cells run in call order: this one, the user's, then `after`
    // A bash context's cells go to one shell that lives as long as the context (its state carries).
    const source =
      e.language === 'bash' ? `_ipy_bash(${JSON.stringify(code)}, ${JSON.stringify(stringValues(opts.envs))})` : code
    let r
    try {
      r = await kernel.runCode(source, {
        signal: ac.signal,
        timeoutS: KERNEL_BACKSTOP_S,
        onStdout: out && ((c) => out.write(c)),
        onStderr: err && ((c) => err.write(c)),
        onResult: opts.onResult && ((core) => deliver(opts.onResult, e2b(core))),
      })
    } catch (x) {
      if (this.#host.killed) throw killedError(x)
      if (timedOut) {
        // A cell that ignored the interrupt got its kernel torn down: say so, not "state kept".
        const kept = kernel.alive
          ? 'the cell was interrupted and the context keeps its state'
          : 'the cell did not stop when interrupted, so the context was restarted and its state is lost'
        throw new TimeoutError(
          `Execution timed out after ${timeoutMs} ms: ${kept}; pass a larger 'timeoutMs' (0 for none) to give cells longer`,
        )
      }
      throw toE2B(x)
    } finally {
      clearTimeout(timer)
      out?.end()
      err?.end()
      if (envs && envs.after) hidden(envs.after)
    }
    // The machine's close() ends its kernels: a cell cut short by kill() is E2B's TimeoutError.
    if (r.fault && this.#host.killed) throw killedError()
    if (r.fault) throw new SandboxError(`the context's kernel was stopped: ${r.fault.message}`)
    e.count += 1
    const error = r.error ? new ExecutionError(r.error.name, r.error.value, r.error.traceback) : undefined
    if (error && opts.onError) deliver(opts.onError, error)
    return new Execution(
      r.results.map(e2b),
      { stdout: lines(r.stdout), stderr: lines(withoutTraceback(r.stderr, r.error)) },
      error,
      e.count,
    )
  }

  /** Closes every context's kernel (the sandbox's kill). */
  async closeAll() {
    const ks = [...this.#entries.values()].map((e) => e.kernel).filter(Boolean)
    await Promise.all(
      ks.map((p) =>
        p.then(
          (k) => k.close(),
          () => {},
        ),
      ),
    )
  }
}

/** stderr without the error's traceback at its end: as in Jupyter, it is the error, not output.
 * (Python's IPython-style driver leaves it out itself; the JavaScript kernel prints it.) */
function withoutTraceback(stderr, error) {
  const tb = error && error.traceback
  if (!tb) return stderr
  for (const tail of [`${tb}\n`, tb]) if (stderr.endsWith(tail)) return stderr.slice(0, -tail.length)
  return stderr
}

function stringValues(envs) {
  const clean = {}
  for (const [k, v] of Object.entries(envs || {})) clean[k] = String(v)
  return clean
}

/** The hidden cells around a cell that give it its `envs`: Python's driver applies them to the
 * next cell and restores them itself; a JavaScript cell is followed by one that restores them. (A
 * bash context's shell sets them around the cell itself.) */
function envCells(language, envs) {
  const json = JSON.stringify(stringValues(envs))
  if (language === 'python') return { before: `#%kern-envs ${json}`, after: null }
  const slot = "globalThis[Symbol.for('kern-sandbox.e2b.envs')]"
  return {
    before: `(() => { const e = ${json}; ${slot} = Object.fromEntries(Object.keys(e).map((k) => [k, process.env[k]])); Object.assign(process.env, e) })();`,
    after: `(() => { const s = ${slot} || {}; for (const [k, v] of Object.entries(s)) { if (v === undefined) delete process.env[k]; else process.env[k] = v } delete ${slot} })();`,
  }
}

module.exports = { Contexts, contextLanguage, HOME, KERNEL_BACKSTOP_S }
