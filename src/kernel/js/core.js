'use strict'
// Shared by the one-shot runner and the warm kernel (both start with this file): running one
// cell the host prepared (lib/jscell.js: types stripped, top-level declarations made globals,
// the body wrapped in an async arrow whose value is the trailing expression's), its rich results
// and its error. It runs next to untrusted code, so it trusts nothing a cell hands it.
const vm = require('vm')
const util = require('util')
const fs = require('fs')
const { createRequire } = require('module')

/** What `process.exit(n)` throws inside a cell: it ends the cell, not the interpreter. */
class KernelExit {
  constructor(code) {
    this.code = Number.isInteger(code) ? code : Number(code) | 0
  }
}

// Import lines and import() expressions become calls of this (lib/jscell.js): node allows no
// import() in a vm script without a flag. Specifiers resolve as in this script: bare ones from
// the working directory (/workspace/node_modules and up).
function cellImport(spec, options) {
  return options === undefined ? import(spec) : import(spec, options)
}

function installGlobals(display) {
  const define = (name, value) =>
    Object.defineProperty(globalThis, name, { value, writable: true, configurable: true, enumerable: false })
  define('__kimp', cellImport)
  define('display', display)
  define('require', createRequire(process.cwd() + '/'))
}

function inspect(v) {
  try {
    return util.inspect(v)
  } catch {
    return '<uninspectable value>'
  }
}

/** The MIME bundle of one value: a string as itself, anything else as util.inspect shows it. */
function bundleOf(v) {
  return { 'text/plain': typeof v === 'string' ? v : plainText(v) }
}

/** util.inspect's text, without its machinery for the values that need none. */
function plainText(v) {
  switch (typeof v) {
    case 'number':
      return Object.is(v, -0) ? '-0' : String(v)
    case 'boolean':
      return String(v)
    case 'bigint':
      return `${v}n`
    default:
      return v === null ? 'null' : inspect(v)
  }
}

/** A MIME bundle the cell built itself (`display(bundle, { raw: true })`), vetted: strings as
 * they are, bytes of images as base64, JSON values serialised; anything else dropped. */
function rawBundle(o) {
  const data = {}
  let keys
  try {
    keys = Object.keys(o)
  } catch {
    return data
  }
  for (const mime of keys) {
    let v
    try {
      v = o[mime]
    } catch {
      continue
    }
    if (typeof v === 'string') data[mime] = v
    else if (v instanceof Uint8Array) {
      const b = Buffer.from(v.buffer, v.byteOffset, v.byteLength)
      data[mime] = mime.startsWith('image/') && mime !== 'image/svg+xml' ? b.toString('base64') : b.toString('utf8')
    } else if (v != null && (mime === 'application/json' || mime.endsWith('+json'))) {
      try {
        data[mime] = JSON.stringify(v)
      } catch {
        // not serialisable: dropped
      }
    }
  }
  return data
}

const DISPLAY_OPTIONS = new Set(['raw', 'include', 'exclude', 'metadata'])

function isDisplayOptions(o) {
  if (!o || typeof o !== 'object' || Object.getPrototypeOf(o) !== Object.prototype) return false
  const keys = Object.keys(o)
  return keys.includes('raw') && keys.every((k) => DISPLAY_OPTIONS.has(k))
}

/** `display(...values[, { raw }])`: each value a result, in order. */
function makeDisplay(add) {
  return function display(...values) {
    let raw = false
    if (values.length > 1 && isDisplayOptions(values[values.length - 1])) raw = !!values.pop().raw
    for (const v of values) {
      if (v === undefined) continue
      const data = raw && v !== null && typeof v === 'object' ? rawBundle(v) : bundleOf(v)
      if (Object.keys(data).length) add(data, false)
    }
  }
}

function resultJson(data, main) {
  return JSON.stringify({ data, main })
}

// The last line of each cell's prepared code: the wrapper's own (`})()`, `;`), never the user's.
// Only frames of recent cells can still run through a wrapper's line (an interrupted cell's
// await resuming later), so the oldest are let go.
const wrapperLines = new Map()
const WRAPPER_LINES_KEPT = 1024

/** Stack frames of the driver, or of a wrapper's own last line, are no business of the user:
 * frames after a cell's last one go, and with no cell frame, those of the driver. */
function trimStack(stack) {
  const lines = String(stack).split('\n')
  const frame = (l) => /^\s+at /.test(l)
  const cellAt = (l) => {
    const m = /(<cell(?:-\d+)?>):(\d+):\d+/.exec(l)
    return m && (wrapperLines.get(m[1]) === Number(m[2]) ? 'wrapper' : 'cell')
  }
  let lastCell = -1
  lines.forEach((l, i) => {
    if (frame(l) && cellAt(l) === 'cell') lastCell = i
  })
  const driver = (l) => /\[eval|\(node:|at node:|\.run-[0-9a-f]{8}\.js/.test(l)
  return lines
    .filter((l, i) => !frame(l) || (cellAt(l) !== 'wrapper' && (lastCell >= 0 ? i <= lastCell : !driver(l))))
    .join('\n')
}

function field(o, k) {
  try {
    return o[k]
  } catch {
    return undefined
  }
}

/** { name, value, traceback } of what a cell threw, and the text for its stderr. */
function describeError(e) {
  const stack = e !== null && typeof e === 'object' ? field(e, 'stack') : undefined
  if (typeof stack === 'string') {
    const name = field(e, 'name')
    const message = field(e, 'message')
    const traceback = trimStack(stack)
    return {
      error: {
        name: typeof name === 'string' ? name : 'Error',
        value: typeof message === 'string' ? message : inspect(message),
        traceback,
      },
      text: traceback + '\n',
    }
  }
  const shown = inspect(e)
  return { error: { name: 'Error', value: shown, traceback: 'Uncaught ' + shown }, text: 'Uncaught ' + shown + '\n' }
}

/** A SyntaxError the host found (parse or type-strip failure), shaped as V8 shows its own. */
function hostSyntaxError(file, s) {
  const e = new SyntaxError(String(s.message))
  const at = Number(s.line) > 0 ? `${file}:${s.line}\n` : ''
  const src =
    typeof s.source === 'string' ? s.source + '\n' + ' '.repeat(Math.max(0, Number(s.column) | 0)) + '^\n\n' : ''
  e.stack = `${at}${src}SyntaxError: ${e.message}`
  return e
}

/** Compiles a prepared cell: `run()` runs its synchronous part (interruptible by SIGINT when the
 * host found it may loop) and gives the trailing expression's value, or for an async cell
 * (`sync` false) a promise of it. Throws only for a cell that does not compile. */
function compileCell(cell, file) {
  if (cell.syntaxError) throw hostSyntaxError(file, cell.syntaxError)
  const code = String(cell.code)
  let lines = 1
  for (let i = code.indexOf('\n'); i >= 0; i = code.indexOf('\n', i + 1)) lines++
  wrapperLines.set(file, lines)
  if (wrapperLines.size > WRAPPER_LINES_KEPT) wrapperLines.delete(wrapperLines.keys().next().value)
  const script = new vm.Script(code, {
    filename: file,
    columnOffset: Number(cell.col) | 0,
  })
  // The watchdog that makes SIGINT stop a running script costs a thread per run: only for a cell
  // the host found may loop.
  const options = { breakOnSigint: cell.guard !== false, displayErrors: false }
  return { sync: cell.sync === true, guard: cell.guard !== false, run: () => script.runInThisContext(options) }
}

/** Runs a prepared cell; the promise settles with the trailing expression's value, awaited. */
function startCell(cell, file) {
  const c = compileCell(cell, file)
  return c.sync ? Promise.resolve(c.run()) : c.run()
}
