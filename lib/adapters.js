'use strict'
// What the framework adapters (kern-sandbox/ai, /openai-agents, /mastra, /langchain) share: the
// checks every value a model sends goes through before it reaches a machine, output bounds, abort
// plumbing, and opening a session with its machine. No framework is loaded here.

const posix = require('node:path').posix
const { SandboxError } = require('./errors.js')

/** Longest path a model may name (PATH_MAX). */
const MAX_PATH = 4096
/** Longest command line a model may send (well under Linux's ARG_MAX for one string). */
const MAX_COMMAND = 128 * 1024
/** Default cap on each of stdout/stderr returned to a model or a framework, bytes. */
const DEFAULT_OUTPUT_BYTES = 1024 * 1024
/** Default cap on one file read or written through an adapter, bytes. */
const DEFAULT_FILE_BYTES = 64 * 1024 * 1024

function invalid(message) {
  const e = new SandboxError(message)
  e.code = 'ERR_INVALID_ARGUMENT'
  return e
}

function coded(code, message) {
  const e = new SandboxError(message)
  e.code = code
  return e
}

/** A path from a model: a non-empty string, no NUL, at most PATH_MAX. */
function checkPath(p, what = 'path') {
  if (typeof p !== 'string' || p.length === 0) throw invalid(`${what} must be a non-empty string`)
  if (p.includes('\0')) throw invalid(`${what} contains a NUL byte`)
  if (p.length > MAX_PATH) throw invalid(`${what} is longer than ${MAX_PATH} characters`)
  return p
}

/** A shell command from a model: a non-empty string, no NUL, at most MAX_COMMAND. */
function checkCommand(c) {
  if (typeof c !== 'string' || c.trim().length === 0) throw invalid('command must be a non-empty string')
  if (c.includes('\0')) throw invalid('command contains a NUL byte')
  if (c.length > MAX_COMMAND) throw invalid(`command is longer than ${MAX_COMMAND} characters`)
  return c
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

/** Environment variables from a caller or a model: names as POSIX has them, string values, no NUL.
 * undefined values are dropped (frameworks pass NodeJS.ProcessEnv-like maps). */
function checkEnv(env) {
  if (env === undefined || env === null) return undefined
  if (typeof env !== 'object' || Array.isArray(env)) throw invalid('env must be an object of strings')
  const out = {}
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) continue
    if (!ENV_NAME.test(k)) throw invalid(`invalid environment variable name ${JSON.stringify(k)}`)
    if (typeof v !== 'string') throw invalid(`environment variable ${k} must be a string`)
    if (v.includes('\0')) throw invalid(`environment variable ${k} contains a NUL byte`)
    out[k] = v
  }
  return out
}

/** A positive integer option (sizes, line numbers, ports), or the default when undefined. */
function checkCount(v, what, dflt, { min = 1, max = Number.MAX_SAFE_INTEGER } = {}) {
  if (v === undefined || v === null) return dflt
  if (!Number.isInteger(v) || v < min || v > max) throw invalid(`${what} must be an integer in ${min}..${max}`)
  return v
}

/** An absolute machine path: `p` resolved against `base` as strings (the machine resolves symlinks
 * itself, in its own namespace). */
function resolveIn(base, p) {
  return posix.resolve(base, checkPath(p))
}

function isMissing(e) {
  return Boolean(e) && e.code === 'ERR_NOT_FOUND'
}

/** Runs `fn()`, rejecting with the signal's reason as soon as `signal` aborts (the machine call
 * itself cannot be withdrawn, its result is then dropped). */
async function abortable(signal, fn) {
  if (!signal) return fn()
  signal.throwIfAborted()
  let onAbort
  const aborted = new Promise((_, reject) => {
    onAbort = () => reject(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
  })
  try {
    return await Promise.race([fn(), aborted])
  } finally {
    signal.removeEventListener('abort', onAbort)
  }
}

/** `s` cut to at most `maxBytes` UTF-8 bytes (on a character boundary), and whether it was cut. */
function clipText(s, maxBytes) {
  const b = Buffer.from(s, 'utf8')
  if (b.length <= maxBytes) return { text: s, clipped: false }
  let end = maxBytes
  while (end > 0 && (b[end] & 0xc0) === 0x80) end--
  return { text: b.subarray(0, end).toString('utf8'), clipped: true }
}

/** One argument quoted for /bin/sh. */
function shellQuote(s) {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(s)) return s
  return `'${String(s).replace(/'/g, `'\\''`)}'`
}

/** Splits adapter options from the Sandbox options they carry: `machine` holds Machine options. */
function splitOptions(opts = {}) {
  if (typeof opts !== 'object' || opts === null) throw invalid('options must be an object')
  const { machine: machineOptions, ...sandboxOptions } = opts
  return { machineOptions, sandboxOptions }
}

/** Opens a session and one machine in it. On failure nothing is left open. */
async function openMachine(sandboxOptions, machineOptions) {
  // Loaded here, not at the top: the adapters' modules stay loadable without the addon until used.
  const { Sandbox } = require('./sandbox.js')
  const sbx = await new Sandbox(sandboxOptions).open()
  try {
    if (typeof sbx.machine !== 'function') {
      throw new SandboxError('this build of kern-sandbox has no machines (Sandbox#machine)')
    }
    const machine = await sbx.machine(machineOptions)
    return { sbx, machine }
  } catch (e) {
    await sbx.close()
    throw e
  }
}

/** Ends what openMachine opened: the machine first, then the Sandbox that holds it. Either may
 * be null (already closed, or never opened). */
async function closeMachine(machine, sbx) {
  if (machine) await machine.close()
  if (sbx) await sbx.close()
}

/** The entry of `p`, symlinks followed (at most 40, as Linux does); null when it does not exist
 * (or a link dangles). Each hop is resolved by the machine. */
async function statFollow(machine, p) {
  let cur = p
  for (let hops = 0; hops <= 40; hops++) {
    let e
    try {
      e = await machine.stat(cur)
    } catch (err) {
      if (isMissing(err)) return null
      throw err
    }
    if (e.type !== 'symlink') return e
    cur = posix.resolve(posix.dirname(e.path), e.symlinkTarget)
  }
  throw coded('ERR_SANDBOX', `${p}: too many levels of symbolic links`)
}

module.exports = {
  MAX_PATH,
  MAX_COMMAND,
  DEFAULT_OUTPUT_BYTES,
  DEFAULT_FILE_BYTES,
  invalid,
  coded,
  checkPath,
  checkCommand,
  checkEnv,
  checkCount,
  resolveIn,
  isMissing,
  abortable,
  clipText,
  shellQuote,
  splitOptions,
  openMachine,
  closeMachine,
  statFollow,
}
