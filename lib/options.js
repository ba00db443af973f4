'use strict'
// Option shaping and checking on the JS side: types a JS user understands, before the native
// side validates values.

const native = require('./native.js')
const { MountRefused, coded } = require('./errors.js')

/** Each option's default, from the native side, which applies them: set here only to expose them
 * as a Sandbox's properties, as 0.1.1 did. Options not listed default to null. */
const DEFAULTS = Object.freeze(native.optionDefaults())
/** The options a Sandbox exposes as properties, in 0.1.1's order. */
const EXPOSED = [
  'image',
  'setup',
  'workspace',
  'memoryMb',
  'cpus',
  'pids',
  'timeoutS',
  'network',
  'egressAllow',
  'mounts',
  'profiles',
  'env',
  'maxOutputBytes',
  'enforceLimits',
  'depsReadonly',
  'trackFiles',
  'boxWorkspace',
]
/** Options whose `null` means "no cap" rather than "default". */
const NULLABLE_CAPS = new Set(['memoryMb', 'pids', 'cpus'])
/** Options handed to the native constructor, with the JS type each must have. */
const OPTION_TYPES = {
  image: 'string',
  setup: 'string',
  workspace: 'string',
  securityProfile: 'string',
  apparmor: 'string',
  boxWorkspace: 'string',
  snapshotDir: 'string',
  memoryMb: 'number',
  cpus: 'number',
  pids: 'number',
  timeoutS: 'number',
  maxOutputBytes: 'number',
  prewarm: 'number',
  snapshotMaxBytes: 'number',
  network: 'network',
  enforceLimits: 'boolean',
  depsReadonly: 'boolean',
  trackFiles: 'boolean',
  requireLimits: 'boolean',
  egressAllow: 'string[]',
  profiles: 'string[]',
  capDrop: 'string[]',
}

/** A short, safe rendering of any value for messages (BigInt and Symbol included). */
function show(v) {
  if (typeof v === 'string') return JSON.stringify(v.length > 60 ? v.slice(0, 60) + '...' : v)
  if (typeof v === 'bigint') return `${v}n`
  if (typeof v === 'symbol' || typeof v === 'function') return typeof v
  if (Array.isArray(v)) return 'an array'
  if (v === null) return 'null'
  return typeof v === 'object' ? 'an object' : String(v)
}

/** A network policy object as the native side reads it: a plain object (its entries are checked
 * there, once). */
function isPolicy(v) {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function checkType(key, v, type) {
  if (type === 'network') {
    if (typeof v !== 'boolean' && !isPolicy(v)) {
      throw coded(
        'ERR_INVALID_OPTION',
        `invalid option ${key}: expected a boolean or a network policy object, got ${show(v)}`,
      )
    }
    return
  }
  if (type !== 'string[]') {
    if (typeof v !== type)
      throw coded('ERR_INVALID_OPTION', `invalid option ${key}: expected a ${type}, got ${show(v)}`)
    return
  }
  if (!Array.isArray(v))
    throw coded('ERR_INVALID_OPTION', `invalid option ${key}: expected an array of strings, got ${show(v)}`)
  // An index loop: every() and friends skip the holes of a sparse array.
  for (let i = 0; i < v.length; i++) {
    if (typeof v[i] !== 'string') {
      throw coded(
        'ERR_INVALID_OPTION',
        `invalid option ${key}: expected an array of strings, got ${show(v[i])} at index ${i}`,
      )
    }
  }
}

function nativeOptions(opts) {
  if (typeof opts !== 'object' || Array.isArray(opts)) {
    throw coded('ERR_INVALID_OPTION', `Sandbox options must be an object, got ${show(opts)}`)
  }
  const out = {}
  for (const [key, type] of Object.entries(OPTION_TYPES)) {
    const v = opts[key]
    if (v === undefined || (v === null && !NULLABLE_CAPS.has(key))) continue
    if (v !== null) checkType(key, v, type)
    out[key] = v
  }
  if (opts.mounts != null) out.mounts = mountEntries(opts.mounts)
  if (opts.env != null) {
    if (typeof opts.env !== 'object')
      throw coded('ERR_INVALID_OPTION', `invalid option env: expected an object, got ${show(opts.env)}`)
    out.env = Object.entries(opts.env).map(([key, value]) => ({ key, value: String(value) }))
  }
  return out
}

/** `{ src: target }` / `{ src: [target, "ro" | "rw"] }` → ordered entries; the native side vets
 * the paths. */
function mountEntries(mounts) {
  if (typeof mounts !== 'object' || Array.isArray(mounts)) {
    throw new MountRefused('mounts must be an object of { hostSource: boxTarget }')
  }
  return Object.entries(mounts).map(([source, spec]) => {
    let target = spec
    let readOnly = false
    if (Array.isArray(spec)) {
      const mode = spec[1]
      if (mode !== 'ro' && mode !== 'rw') {
        throw new MountRefused(`mount mode must be 'ro' or 'rw', got ${show(mode)}`)
      }
      target = spec[0]
      readOnly = mode === 'ro'
    }
    if (typeof target !== 'string') {
      throw new MountRefused(`mount target must be an absolute path in the box, got ${show(target)}`)
    }
    return { source, target, readOnly }
  })
}

function checkCallback(name, fn) {
  if (fn != null && typeof fn !== 'function') {
    throw new TypeError(`${name} must be a function or null`)
  }
}

/** A method's trailing options bag: an object, or absent. */
function optionsBag(name, opts) {
  if (opts == null) return {}
  if (typeof opts !== 'object' || Array.isArray(opts)) {
    throw new TypeError(`${name} options must be an object, got ${show(opts)}`)
  }
  return opts
}

function checkSignal(signal) {
  if (signal == null) return undefined
  if (
    typeof signal !== 'object' ||
    typeof signal.aborted !== 'boolean' ||
    typeof signal.addEventListener !== 'function'
  ) {
    throw new TypeError('signal must be an AbortSignal')
  }
  return signal
}

function toBytes(data) {
  if (Buffer.isBuffer(data) || typeof data === 'string') return data
  if (ArrayBuffer.isView(data)) return Buffer.from(data.buffer, data.byteOffset, data.byteLength)
  if (data instanceof ArrayBuffer) return Buffer.from(data)
  return String(data)
}

/** Data as a Buffer for the native side, without copying one that already is. */
function bytesOf(data) {
  const b = toBytes(data)
  return Buffer.isBuffer(b) ? b : Buffer.from(b)
}

/** A typed array or DataView as a Buffer (the one kind of bytes the native side reads); anything
 * else is left for the native side to check. */
function viewBytes(v) {
  return ArrayBuffer.isView(v) ? bytesOf(v) : v
}

function checkPath(name, p) {
  if (typeof p !== 'string') throw new TypeError(`${name} must be a string, got ${typeof p}`)
  return p
}

/** The optional `{ maxBytes }` of readFile/snapshot/restore: a number or absent. */
function bytesOption(method, opts) {
  const maxBytes = optionsBag(method, opts).maxBytes
  if (maxBytes != null && typeof maxBytes !== 'number') {
    throw coded('ERR_INVALID_OPTION', `maxBytes must be a number, got ${show(maxBytes)}`)
  }
  return maxBytes ?? undefined
}

module.exports = {
  DEFAULTS,
  EXPOSED,
  NULLABLE_CAPS,
  OPTION_TYPES,
  show,
  isPolicy,
  nativeOptions,
  checkCallback,
  checkType,
  optionsBag,
  checkSignal,
  toBytes,
  bytesOf,
  viewBytes,
  checkPath,
  bytesOption,
}
