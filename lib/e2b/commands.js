'use strict'
// sandbox.commands: E2B's `commands.run`, each command a fresh box on the workspace (so it sees
// the files the cells wrote, at /home/user), run by bash (sh where the image has no bash).

const { StringDecoder } = require('node:string_decoder')
const { finishResult } = require('../results.js')
const { chunkSink } = require('../calls.js')
const { TimeoutError, InvalidArgumentError, CommandExitError } = require('./errors.js')
const { HOME } = require('./contexts.js')

/** E2B's default for a command's `timeoutMs`; 0 means none (then the sandbox's lifetime bounds it). */
const COMMAND_TIMEOUT_MS = 60_000
/** cd to the working directory, then run the command with its extra environment. */
const LAUNCH =
  'cd -- "$1" || exit 1; c=$2; shift 2; ' +
  'if command -v bash >/dev/null 2>&1; then exec env "$@" bash -c "$c"; else exec env "$@" sh -c "$c"; fi'
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

/** Live output as strings, a character split across chunks kept whole. */
function textSink(fn) {
  if (fn == null) return { write: undefined, end() {} }
  if (typeof fn !== 'function') throw new InvalidArgumentError('onStdout/onStderr must be functions')
  const d = new StringDecoder('utf8')
  const sink = chunkSink(fn)
  return {
    write: (chunk) => {
      const s = d.write(chunk)
      if (s) sink(s)
    },
    end() {
      const s = d.end()
      if (s) sink(s)
    },
  }
}

class Commands {
  #native
  #guard
  #lifetimeMs

  /** `guard(start)`: the sandbox's wrapper of a request; `lifetimeMs()`: what is left of the
   * sandbox's life, the deadline of a command without one. */
  constructor(native, guard, lifetimeMs) {
    this.#native = native
    this.#guard = guard
    this.#lifetimeMs = lifetimeMs
  }

  /** Runs `cmd`; resolves to `{ stdout, stderr, exitCode, error }`, rejects with
   * CommandExitError on a non-zero exit. */
  async run(cmd, opts = {}) {
    if (typeof cmd !== 'string' || cmd.includes('\0'))
      throw new InvalidArgumentError('cmd must be a string with no NUL byte')
    opts = opts ?? {}
    if (opts.background) {
      throw new InvalidArgumentError(
        'background commands are not supported by kern-sandbox/e2b: run them to completion',
      )
    }
    const argv = ['/bin/sh', '-c', LAUNCH, 'kern-command', this.#cwd(opts.cwd), cmd, ...envPairs(opts.envs)]
    const timeoutMs = opts.timeoutMs ?? COMMAND_TIMEOUT_MS
    if (typeof timeoutMs !== 'number' || !(timeoutMs >= 0))
      throw new InvalidArgumentError('timeoutMs must be a number of milliseconds, 0 for none')
    // 0 (or Infinity) means none: the sandbox's lifetime bounds the command then.
    const ms = timeoutMs > 0 && Number.isFinite(timeoutMs) ? timeoutMs : this.#lifetimeMs()
    const out = textSink(opts.onStdout)
    const err = textSink(opts.onStderr)
    let r
    try {
      r = finishResult(
        await this.#guard(() => this.#native.run(argv, { timeoutS: Math.max(ms, 1) / 1000 }, out.write, err.write)),
      )
    } finally {
      out.end()
      err.end()
    }
    if (r.fault && r.fault.type === 'timeout') {
      throw new TimeoutError(
        `Command timed out after ${timeoutMs} ms: pass a larger 'timeoutMs' (0 for none) to give it longer`,
      )
    }
    const result = {
      stdout: r.stdout,
      stderr: r.stderr,
      exitCode: r.exitCode,
      error: r.fault ? r.fault.message : r.exitCode !== 0 ? `exit status ${r.exitCode}` : undefined,
    }
    if (result.exitCode !== 0 || r.fault) throw new CommandExitError(result)
    return result
  }

  #cwd(cwd) {
    if (cwd == null) return HOME
    if (typeof cwd !== 'string' || !cwd.startsWith('/') || cwd.includes('\0')) {
      throw new InvalidArgumentError('cwd must be an absolute path in the sandbox, e.g. /home/user/project')
    }
    return cwd
  }
}

function envPairs(envs) {
  if (envs == null) return []
  if (typeof envs !== 'object' || Array.isArray(envs))
    throw new InvalidArgumentError('envs must be an object of strings')
  return Object.entries(envs).map(([k, v]) => {
    if (!ENV_NAME.test(k)) throw new InvalidArgumentError(`env var name ${JSON.stringify(k)} is not a valid name`)
    const value = String(v)
    if (value.includes('\0')) throw new InvalidArgumentError(`env var ${k} must not contain a NUL byte`)
    return `${k}=${value}`
  })
}

module.exports = { Commands, envPairs }
