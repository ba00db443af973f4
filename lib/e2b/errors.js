'use strict'
// The error classes of E2B's SDK, by name and hierarchy, so code written against
// `@e2b/code-interpreter` catches what it expects; and the one place core errors become them.

const { fromNative } = require('../errors.js')

/** The base class of every error this entry raises. */
class SandboxError extends Error {
  constructor(message, options) {
    super(message, options)
    this.name = 'SandboxError'
  }
}

/** A deadline passed: a cell's or a command's `timeoutMs`, or the sandbox was killed (or reached
 * the end of its lifetime) while a request was in flight. */
class TimeoutError extends SandboxError {
  constructor(message, options) {
    super(message, options)
    this.name = 'TimeoutError'
  }
}

/** An argument this entry cannot accept (a path outside /home/user, both `context` and
 * `language`, an unsupported language...). */
class InvalidArgumentError extends SandboxError {
  constructor(message, options) {
    super(message, options)
    this.name = 'InvalidArgumentError'
  }
}

/** A file, directory, context or sandbox that does not exist. */
class NotFoundError extends SandboxError {
  constructor(message, options) {
    super(message, options)
    this.name = 'NotFoundError'
  }
}

/** A command that exited non-zero; carries its result, as `commands.run` would have resolved. */
class CommandExitError extends SandboxError {
  constructor(result) {
    super(result.error || `exit status ${result.exitCode}`)
    this.name = 'CommandExitError'
    this.exitCode = result.exitCode
    this.error = result.error
    this.stdout = result.stdout
    this.stderr = result.stderr
  }
}

const KILLED =
  'The sandbox was killed while the request was in progress: kill() was called, or the sandbox ' +
  'reached the end of its timeoutMs lifetime (extend it with setTimeout()).'

/** The rejection of a request the sandbox's kill() cut short. */
function killedError(cause) {
  return new TimeoutError(KILLED, cause ? { cause } : undefined)
}

/** A core error (native or JS) as one of this entry's classes; ours pass through. */
function toE2B(e) {
  if (e instanceof SandboxError) return e
  const core = fromNative(e)
  if (!(core instanceof Error)) return core
  if (core.code === 'ERR_NOT_FOUND') return new NotFoundError(core.message, { cause: core })
  if (core.name === 'AbortError') return core
  return new SandboxError(core.message, { cause: core })
}

module.exports = {
  SandboxError,
  TimeoutError,
  InvalidArgumentError,
  NotFoundError,
  CommandExitError,
  killedError,
  toE2B,
}
