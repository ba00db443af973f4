'use strict'
// One native call's plumbing: callbacks made safe for the native side, AbortSignal wired to
// cancel(callId), native errors mapped.

const { fromNative } = require('./errors.js')
const { deliver } = require('./results.js')
const { checkCallback, checkSignal } = require('./options.js')
const { reportKernNotes } = require('./notes.js')

/** Wraps a chunk callback for the native side: a throw (or a rejected promise) from user code
 * must never escape into Node, where it would be fatal from a threadsafe-function call; a
 * callback's failure does not break the capture either (result.stdout still has it all). */
function chunkSink(fn) {
  if (fn == null) return undefined
  return (chunk) => deliver(fn, chunk)
}

/** Wraps an `onRequest` callback for the native side, as chunkSink does a chunk callback: what it
 * throws or rejects with is ignored. */
function eventSink(fn) {
  if (fn == null) return undefined
  return (event) => deliver(fn, event)
}

let nextCallId = 1

/** One box or kernel call: its callbacks resolved against the session's (`session.onStdout`,
 * `onStderr`), its AbortSignal wired to `cancel(callId)`, its native errors mapped. `invoke(callId,
 * onStdout, onStderr)` starts it and returns the native promise. */
async function nativeCall(opts, session, cancel, invoke) {
  checkCallback('onResult', opts.onResult)
  const signal = checkSignal(opts.signal)
  if (signal && signal.aborted) throw signal.reason
  const onStdout = opts.onStdout !== undefined ? opts.onStdout : session.onStdout
  const onStderr = opts.onStderr !== undefined ? opts.onStderr : session.onStderr
  checkCallback('onStdout', onStdout)
  checkCallback('onStderr', onStderr)
  return cancellable(signal, cancel, (callId) => invoke(callId, chunkSink(onStdout), chunkSink(onStderr)))
}

/** Starts native work under a fresh call id that `signal` cancels through `cancel(callId)`; an
 * already aborted signal rejects before anything starts. */
async function cancellable(signal, cancel, start) {
  if (signal && signal.aborted) throw signal.reason
  const callId = signal ? nextCallId++ : undefined
  const onAbort = () => cancel(callId)
  try {
    const pending = start(callId)
    if (signal) signal.addEventListener('abort', onAbort, { once: true })
    return await pending
  } catch (e) {
    throw fromNative(e, signal)
  } finally {
    if (signal) signal.removeEventListener('abort', onAbort)
    reportKernNotes()
  }
}

module.exports = { chunkSink, eventSink, nativeCall, cancellable }
