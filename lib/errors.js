'use strict'
// The error classes and the one place native errors become them.

const { reportKernNotes } = require('./notes.js')

/** A programmer or configuration error, thrown: bad argument, refused mount, kern missing.
 * What the sandbox does to a workload (timeout, blocked syscall, kill) is data on the result. */
class SandboxError extends Error {
  constructor(message, options) {
    super(message, options)
    this.name = 'SandboxError'
  }
}

/** A requested host mount (or workspace) was refused as unsafe. */
class MountRefused extends SandboxError {
  constructor(message, options) {
    super(message, options)
    this.name = 'MountRefused'
  }
}

function abortError() {
  return new DOMException('This operation was aborted', 'AbortError')
}

/** Maps a native error (tagged `[ERR_…] message`) onto our classes, once, for every method. */
function fromNative(e, signal) {
  if (!(e instanceof Error)) return e
  const tagged = /^\[(ERR_[A-Z_]+)\] ([\s\S]*)$/.exec(e.message)
  if (tagged) {
    const [, code, message] = tagged
    if (code === 'ERR_ABORTED') return signal && signal.aborted ? signal.reason : abortError()
    const err = code === 'ERR_MOUNT_REFUSED' ? new MountRefused(message) : new SandboxError(message)
    err.code = code
    return err
  }
  // napi-rs could not convert an option: name it.
  const field = / on (\w+)\.(\w+)$/.exec(e.message)
  if (field) {
    const err = new SandboxError(`invalid option ${field[2]}: ${e.message.slice(0, field.index)}`)
    err.code = 'ERR_SANDBOX'
    return err
  }
  return e
}

/** Calls into the native side; what it throws, or its promise rejects with, maps onto our classes,
 * and kern's notes are reported once it settles. Methods await the promise, so they still show in
 * async stack traces. */
function callNative(call) {
  let r
  try {
    r = call()
  } catch (e) {
    throw fromNative(e)
  }
  return r instanceof Promise
    ? r
        .then(undefined, (e) => {
          throw fromNative(e)
        })
        .finally(reportKernNotes)
    : r
}

module.exports = { SandboxError, MountRefused, abortError, fromNative, callNative }
