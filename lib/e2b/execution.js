'use strict'
// What runCode resolves to, in E2B's shapes: Execution, Result, ExecutionError, OutputMessage;
// and the line splitting of live output into OutputMessages.

const { StringDecoder } = require('node:string_decoder')
const { deliver } = require('../results.js')

/** One line a cell printed (`line` ends in its newline, but for an unterminated last line). */
class OutputMessage {
  constructor(line, timestamp, error) {
    this.line = line
    /** Unix epoch in nanoseconds. */
    this.timestamp = timestamp
    /** True for stderr. */
    this.error = error
  }

  toString() {
    return this.line
  }
}

/** An uncaught exception of a cell. */
class ExecutionError {
  constructor(name, value, traceback) {
    this.name = name
    this.value = value
    this.traceback = traceback
  }
}

/** The MIME types that have a field of their own; every other one lands in `extra`. */
const FIELDS = {
  'text/plain': 'text',
  'text/html': 'html',
  'text/markdown': 'markdown',
  'image/svg+xml': 'svg',
  'image/png': 'png',
  'image/jpeg': 'jpeg',
  'application/pdf': 'pdf',
  'text/latex': 'latex',
  'application/json': 'json',
  'application/javascript': 'javascript',
}
/** The in-box MIME type of a DataFrame's columns (E2B's `data`). */
const DATA_MIME = 'e2b/data'
/** E2B's format fields, in its order: text first. */
const FORMATS = Object.values(FIELDS)
const FORMAT_ORDER = FORMATS.filter((f) => f !== 'text')

/** One value a cell produced, in every format it was captured as. Images are base64 strings. */
class Result {
  /** `raw`: the formats by E2B's names (`text`, `html`, `png`, ..., `data`, `chart`), plus any
   * other MIME type by its own name. */
  constructor(raw, isMainResult) {
    this.raw = { ...raw }
    this.isMainResult = !!isMainResult
    for (const f of FORMATS) this[f] = typeof raw[f] === 'string' ? raw[f] : undefined
    this.data = raw.data && typeof raw.data === 'object' ? raw.data : undefined
    this.chart = raw.chart && typeof raw.chart === 'object' ? raw.chart : undefined
    this.extra = {}
    for (const [k, v] of Object.entries(raw)) {
      if (!(k in KNOWN)) this.extra[k] = v
    }
  }

  /** The formats present, E2B's order: html, markdown, svg, png, jpeg, pdf, latex, json,
   * javascript, data, then the extra MIME types. */
  formats() {
    const out = FORMAT_ORDER.filter((f) => this[f])
    if (this.data) out.push('data')
    return out.concat(Object.keys(this.extra))
  }

  toJSON() {
    const out = {}
    for (const f of FORMATS) out[f] = this[f]
    if (Object.keys(this.extra).length) out.extra = this.extra
    return out
  }
}
const KNOWN = Object.fromEntries([...FORMATS, 'data', 'chart', 'extra'].map((k) => [k, true]))

/** A core Result (MIME bundle) as this entry's Result. */
function fromCore(core) {
  const raw = {}
  for (const [mime, v] of Object.entries(core.data || {})) {
    if (mime === DATA_MIME) {
      try {
        const d = JSON.parse(v)
        if (d && typeof d === 'object' && !Array.isArray(d)) raw.data = d
      } catch {
        // Malformed columns from the box: left out, the rest of the result stands.
      }
    } else {
      raw[FIELDS[mime] || mime] = v
    }
  }
  // The core's chart is E2B's already (titles, wedge angles): passed as it is.
  if (core.chart != null && typeof core.chart === 'object') raw.chart = core.chart
  return new Result(raw, core.isMainResult)
}

/** What one runCode produced. */
class Execution {
  constructor(results = [], logs = { stdout: [], stderr: [] }, error = undefined, executionCount = undefined) {
    this.results = results
    this.logs = logs
    this.error = error
    this.executionCount = executionCount
  }

  /** The main result's text (the value of the cell's last expression), if any. */
  get text() {
    const main = this.results.find((r) => r.isMainResult)
    return main ? main.text : undefined
  }

  toJSON() {
    return { results: this.results, logs: this.logs, error: this.error }
  }
}

/** Splits text into lines, each keeping its newline; an unterminated tail is the last one. */
function lines(text) {
  if (!text) return []
  return text.match(/[^\n]*\n|[^\n]+$/g) || []
}

/** Live output of one stream as OutputMessages, one per line: chunks are decoded (a character
 * split across chunks waits for its rest) and cut at newlines; end() flushes the tail. */
class LineStream {
  constructor(fn, error) {
    this.fn = fn
    this.error = error
    this.decoder = new StringDecoder('utf8')
    this.pending = ''
  }

  write(chunk) {
    const text = this.pending + this.decoder.write(chunk)
    const cut = text.lastIndexOf('\n') + 1
    this.pending = text.slice(cut)
    for (const line of lines(text.slice(0, cut))) this.emit(line)
  }

  end() {
    const tail = this.pending + this.decoder.end()
    this.pending = ''
    if (tail) this.emit(tail)
  }

  emit(line) {
    deliver(this.fn, new OutputMessage(line, Date.now() * 1e6, this.error))
  }
}

module.exports = { OutputMessage, ExecutionError, Result, Execution, fromCore, lines, LineStream }
