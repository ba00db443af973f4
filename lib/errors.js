'use strict'
// The error classes (documented in index.d.ts) and the one place native errors become them. Code
// tells errors apart by their `code`, never by their message: messages may be reworded.

const { reportKernNotes } = require('./notes.js')

class SandboxError extends Error {
  constructor(message, options) {
    super(message, options)
    this.name = 'SandboxError'
    this.code = (options && options.code) || 'ERR_SANDBOX'
  }
}

class MountRefused extends SandboxError {
  constructor(message, options) {
    super(message, { code: 'ERR_MOUNT_REFUSED', ...options })
    this.name = 'MountRefused'
  }
}

/** Every error code → the class it is thrown as; a code not listed is a SandboxError. Adding a
 * code is one line here (and one in src/errors.rs); a test holds this table to the native list.
 * ERR_ABORTED is not a class: an aborted call rejects with its signal's reason. */
const CLASSES = {
  ERR_SANDBOX: SandboxError,
  ERR_MOUNT_REFUSED: MountRefused,
  ERR_NOT_FOUND: SandboxError,
  ERR_PATH_ESCAPES: SandboxError,
  ERR_TOO_LARGE: SandboxError,
  ERR_INVALID_OPTION: SandboxError,
  ERR_UNSUPPORTED_LANGUAGE: SandboxError,
  ERR_NO_NODE: SandboxError,
  ERR_NO_KERN: SandboxError,
  ERR_NOT_OPEN: SandboxError,
  ERR_CLOSED: SandboxError,
  ERR_KERNEL_GONE: SandboxError,
  ERR_NOT_A_DIRECTORY: SandboxError,
  ERR_IS_A_DIRECTORY: SandboxError,
  ERR_EXISTS: SandboxError,
  ERR_PERMISSION_DENIED: SandboxError,
  ERR_NO_SPACE: SandboxError,
  ERR_PROCESS_NOT_FOUND: SandboxError,
  ERR_PROCESS_EXITED: SandboxError,
  ERR_STDIN_CLOSED: SandboxError,
  ERR_CONNECTION_REFUSED: SandboxError,
  ERR_MACHINE_GONE: SandboxError,
  ERR_BAD_NETWORK_POLICY: SandboxError,
  ERR_NETWORK_FIXED: SandboxError,
  ERR_MACHINE_PAUSED: SandboxError,
  ERR_SNAPSHOT_NOT_FOUND: SandboxError,
  ERR_ABORTED: null,
}

/** The error for `code`, of the class the table gives it. */
function coded(code, message, options) {
  const Class = CLASSES[code] || SandboxError
  return new Class(message, { ...options, code })
}

function abortError() {
  return new DOMException('This operation was aborted', 'AbortError')
}

/** The one shape native reasons take: `[ERR_…] message`. */
const TAGGED = /^\[(ERR_[A-Z_]+)\] ([\s\S]*)$/

/** Maps a native error onto our classes, once, for every method. */
function fromNative(e, signal) {
  if (!(e instanceof Error)) return e
  const tagged = TAGGED.exec(e.message)
  if (tagged) {
    const [, code, message] = tagged
    if (code === 'ERR_ABORTED') return signal && signal.aborted ? signal.reason : abortError()
    return coded(code, message)
  }
  // Untagged: napi-rs could not convert an argument (its status is the error's `code`). The JS
  // side checks types first, so this is a backstop; napi-rs's text is kept as it is.
  if (typeof e.code === 'string' && !e.code.startsWith('ERR_')) {
    return coded('ERR_INVALID_OPTION', `invalid option: ${e.message}`, { cause: e })
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

module.exports = { SandboxError, MountRefused, CLASSES, coded, abortError, fromNative, callNative }
