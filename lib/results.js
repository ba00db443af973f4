'use strict'
// What a call hands back: ExecutionResult, and the rich Results the box wrote, vetted. Both
// classes are documented in index.d.ts; the comments here say how they are built.

const { vetChart } = require('./charts.js')

// `chart` is an own property only on a figure's Result, so `'chart' in r` and JSON tell them apart.
class Result {
  constructor(data, { isMainResult = false, executionCount = null, chart } = {}) {
    this.data = data || {}
    this.isMainResult = isMainResult
    this.executionCount = executionCount
    if (chart !== undefined) this.chart = chart
  }

  get text() {
    return this.data['text/plain']
  }
  get html() {
    return this.data['text/html']
  }
  get markdown() {
    return this.data['text/markdown']
  }
  get svg() {
    return this.data['image/svg+xml']
  }
  get json() {
    return this.data['application/json']
  }
  get latex() {
    return this.data['text/latex']
  }
  get javascript() {
    return this.data['application/javascript']
  }
  get png() {
    return image(this.data['image/png'])
  }
  get jpeg() {
    return image(this.data['image/jpeg'])
  }

  formats() {
    return Object.keys(this.data)
  }

  toJSON() {
    const out = { data: this.data, isMainResult: this.isMainResult, executionCount: this.executionCount }
    if (this.chart !== undefined) out.chart = this.chart
    return out
  }
}

function image(b64) {
  return typeof b64 === 'string' && b64 ? Buffer.from(b64, 'base64') : null
}

/** One line the box wrote back, parsed and vetted: a Result, an error, or nothing. The box is
 * untrusted, so a malformed line is dropped rather than trusted or thrown. */
function richLine(text, executionCount) {
  let v
  try {
    v = JSON.parse(text)
  } catch {
    return null
  }
  if (!v || typeof v !== 'object') return null
  if (v.data && typeof v.data === 'object' && !Array.isArray(v.data)) {
    const data = {}
    for (const [k, x] of Object.entries(v.data)) if (typeof x === 'string') data[k] = x
    const chart = v.chart === undefined ? undefined : vetChart(v.chart) // a malformed one is dropped
    return { result: new Result(data, { isMainResult: v.main === true, executionCount, chart }) }
  }
  const e = v.error
  if (e && typeof e === 'object') {
    const str = (x) => (typeof x === 'string' ? x : '')
    return { error: { name: str(e.name), value: str(e.value), traceback: str(e.traceback) } }
  }
  return null
}

/** Splits the native `rich` lines into `results` and `error`. */
function richOf(lines, executionCount) {
  const results = []
  let error = null
  for (const line of lines || []) {
    const got = richLine(line, executionCount)
    if (got && got.result) results.push(got.result)
    else if (got && got.error && !error) error = got.error
  }
  return { results, error }
}

class ExecutionResult {
  constructor({ stdout, stderr, exitCode, durationMs, fault, files, truncated, results, error, executionCount }) {
    this.stdout = stdout
    this.stderr = stderr
    this.exitCode = exitCode
    this.durationMs = durationMs
    this.fault = fault || null
    this.files = files || []
    this.truncated = !!truncated
    this.results = results || []
    this.error = error || null
    if (executionCount != null) this.executionCount = executionCount
  }

  get success() {
    return this.exitCode === 0 && this.fault === null
  }
}

/** A native result as an ExecutionResult; `onResult` sees each result not yet delivered. */
function finishResult(r, onResult, delivered = []) {
  const { results, error } = richOf(r.rich, r.executionCount ?? null)
  const all = delivered.length ? delivered.concat(results.slice(delivered.length)) : results
  if (onResult) for (const x of all.slice(delivered.length)) deliver(onResult, x)
  // Field by field: copying the native object with spreads was most of this function's cost.
  return new ExecutionResult({
    stdout: r.stdout,
    stderr: r.stderr,
    exitCode: r.exitCode,
    durationMs: r.durationMs,
    fault: r.fault ?? null,
    files: r.files,
    truncated: r.truncated,
    results: all,
    error,
    executionCount: r.executionCount,
  })
}

/** Calls a user callback (onResult, onStdout, ...); its throw or rejection must not break the
 * call. */
function deliver(fn, value) {
  try {
    const p = fn(value)
    if (p && typeof p.then === 'function') p.then(undefined, () => {})
  } catch {
    // What it was handed is in the call's result too (results, stdout, stderr).
  }
}

module.exports = { Result, ExecutionResult, richLine, richOf, finishResult, deliver }
