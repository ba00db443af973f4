'use strict'
// The error classes of E2B's SDK, by name and hierarchy, so code written against
// `@e2b/code-interpreter` catches what it expects; and the one place core errors become them.

const { fromNative } = require('../errors.js')

/** The base class of every error this entry raises. One that came from the core keeps its
 * `code` (see lib/errors.js). */
class SandboxError extends Error {
  constructor(message, options) {
    super(message, options)
    // Each subclass is named as E2B names it, its own `name` set here once for all of them.
    this.name = new.target.name
    if (options && options.code) this.code = options.code
  }
}

/** A deadline passed: a cell's or a command's `timeoutMs`, or the sandbox was killed (or reached
 * the end of its lifetime) while a request was in flight. */
class TimeoutError extends SandboxError {}

/** An argument this entry cannot accept (a path outside /home/user, both `context` and
 * `language`, an unsupported language...). */
class InvalidArgumentError extends SandboxError {}

/** A file, directory, context, process or sandbox that does not exist. */
class NotFoundError extends SandboxError {}

/** A file or directory that does not exist in the sandbox. */
class FileNotFoundError extends NotFoundError {}

/** A sandbox id no live sandbox of this process has (killed, timed out, or another process's). */
class SandboxNotFoundError extends NotFoundError {}

/** The machine's disk (its writable root or the workspace) is full. */
class NotEnoughSpaceError extends SandboxError {}

/** Credentials were refused. As in E2B, not a SandboxError. */
class AuthenticationError extends Error {
  constructor(message, options) {
    super(message, options)
    this.name = new.target.name
  }
}

/** A git remote refused the credentials (E2B's class, in its hierarchy). */
class GitAuthError extends AuthenticationError {}

/** A git push or pull with no upstream branch to go to (E2B's class, in its hierarchy). */
class GitUpstreamError extends SandboxError {}

/** A command that exited non-zero; carries its result, as `commands.run` would have resolved. */
class CommandExitError extends SandboxError {
  #result
  constructor(result) {
    super(result.error || `exit status ${result.exitCode}`)
    this.#result = { ...result }
  }

  get exitCode() {
    return this.#result.exitCode
  }

  get error() {
    return this.#result.error
  }

  get stdout() {
    return this.#result.stdout
  }

  get stderr() {
    return this.#result.stderr
  }
}

const KILLED =
  'The sandbox was killed while the request was in progress: the sandbox was killed or reached its end of ' +
  'life (kill() was called, or its timeoutMs lifetime ended; extend it with setTimeout()).'

/** The rejection of a request the sandbox's kill() cut short. */
function killedError(cause) {
  return new TimeoutError(KILLED, cause ? { cause } : undefined)
}

/** A core error's code → the class this entry raises it as; a code not listed is a SandboxError.
 * The code itself stays on the error (`err.code`). */
const CLASSES = {
  ERR_NOT_FOUND: NotFoundError,
  ERR_UNSUPPORTED_LANGUAGE: InvalidArgumentError,
  ERR_INVALID_OPTION: InvalidArgumentError,
  ERR_BAD_NETWORK_POLICY: InvalidArgumentError,
  ERR_PROCESS_NOT_FOUND: NotFoundError,
  ERR_NO_SPACE: NotEnoughSpaceError,
}

/** A core error (native or JS) as one of this entry's classes; ours pass through. `classes`
 * overrides the table for one call site (a missing path is a FileNotFoundError for the files API). */
function toE2B(e, classes = CLASSES) {
  if (e instanceof SandboxError) return e
  const core = fromNative(e)
  if (!(core instanceof Error)) return core
  if (core.name === 'AbortError') return core
  const Class = (typeof core.code === 'string' && (classes[core.code] || CLASSES[core.code])) || SandboxError
  return new Class(core.message, { cause: core, code: core.code })
}

module.exports = {
  SandboxError,
  TimeoutError,
  InvalidArgumentError,
  NotFoundError,
  FileNotFoundError,
  SandboxNotFoundError,
  NotEnoughSpaceError,
  AuthenticationError,
  GitAuthError,
  GitUpstreamError,
  CommandExitError,
  killedError,
  toE2B,
}
