'use strict'
// files.watchDir: E2B's directory watch over the machine's watch: events named relative to the
// watched directory, in the order they happened, for `timeoutMs` (E2B's 60 s by default, 0 for
// as long as the sandbox lives), then `onExit`.

const path = require('node:path')
const { InvalidArgumentError, TimeoutError, FileNotFoundError } = require('./errors.js')

const FILE_CLASSES = { ERR_NOT_FOUND: FileNotFoundError }

/** E2B's default for a watch's `timeoutMs`. */
const WATCH_TIMEOUT_MS = 60_000
/** Events waiting for `onEvent` (a slow callback, a flood): past this many, the watch ends with an
 * error rather than hold an unbounded queue. */
const MAX_PENDING = 10_000
/** The longest delay setTimeout holds. */
const MAX_TIMER_MS = 2 ** 31 - 1

/** Calls a user callback, awaiting a promise it returns; what it throws stays the caller's. */
async function call(fn, ...args) {
  try {
    await fn(...args)
  } catch {
    // The watch goes on, as E2B's does when a callback throws.
  }
}

class WatchHandle {
  #stop

  constructor(stop) {
    this.#stop = stop
  }

  /** Stops watching; `onExit` is called (with no error). */
  async stop() {
    await this.#stop()
  }
}

async function watchDir(box, abs, onEvent, opts, toEntry) {
  if (typeof onEvent !== 'function') throw new InvalidArgumentError('onEvent must be a function')
  const onExit = opts.onExit
  if (onExit != null && typeof onExit !== 'function') throw new InvalidArgumentError('onExit must be a function')
  const timeoutMs = opts.timeoutMs ?? WATCH_TIMEOUT_MS
  if (typeof timeoutMs !== 'number' || !(timeoutMs >= 0)) {
    throw new InvalidArgumentError(`timeoutMs must be a number of milliseconds (0 for none), got ${String(timeoutMs)}`)
  }
  let queue = Promise.resolve()
  let pending = 0
  let ended = false
  let watcher = null
  let timer = null
  let unregister = null
  const end = async (err) => {
    if (ended) return
    ended = true
    clearTimeout(timer)
    unregister?.()
    await watcher?.close().catch(() => {})
    await queue
    if (onExit) await call(onExit, err)
  }
  const deliver = async (ev) => {
    const event = { name: path.posix.relative(abs, ev.path), type: ev.type }
    if (opts.includeEntry) {
      // Best effort, as E2B's: gone by now (a remove, a rename away) leaves `entry` undefined.
      const e = await box.machine.stat(ev.path).catch(() => null)
      if (e) event.entry = toEntry(e)
    }
    if (!ended) await call(onEvent, event)
  }
  watcher = await box.guard(
    () =>
      box.machine.watch(
        abs,
        (ev) => {
          if (ended) return
          if (++pending > MAX_PENDING) {
            end(new InvalidArgumentError(`more than ${MAX_PENDING} events wait for onEvent: the watch of ${abs} ended`))
            return
          }
          queue = queue.then(() => deliver(ev)).finally(() => pending--)
        },
        { recursive: Boolean(opts.recursive) },
      ),
    FILE_CLASSES,
  )
  unregister = box.onKill(() => end())
  if (timeoutMs > 0 && timeoutMs <= MAX_TIMER_MS) {
    timer = setTimeout(
      () => end(new TimeoutError(`the watch of ${abs} reached its timeoutMs (${timeoutMs} ms)`)),
      timeoutMs,
    )
    // Not unref'd: like E2B's open watch stream, a watch keeps Node alive until it ends (stop(),
    // the sandbox's kill, or this timeout), so awaiting its onExit works.
  }
  return new WatchHandle(() => end())
}

module.exports = { watchDir, WatchHandle }
