'use strict'
// The table every family prints into: one line per figure, the ratio ours/reference, the target
// and PASS/FAIL; and the small statistics the rows share.

const MiB = 1024 * 1024

function median(xs) {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b)
  if (!v.length) return null
  const m = v.length >> 1
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2
}
const max = (xs) => (xs.length ? Math.max(...xs) : null)
const min = (xs) => (xs.length ? Math.min(...xs) : null)
const sum = (xs) => xs.reduce((a, b) => a + b, 0)

function fmt(v) {
  if (v == null || (typeof v === 'number' && !Number.isFinite(v))) return '-'
  if (typeof v === 'boolean') return v ? 'yes' : 'NO'
  if (typeof v === 'string') return v
  const a = Math.abs(v)
  if (Number.isInteger(v)) return v.toLocaleString('en-US')
  if (a >= 10000) return Math.round(v).toLocaleString('en-US')
  if (a >= 100) return v.toFixed(0)
  if (a >= 10) return v.toFixed(1)
  if (a >= 1) return v.toFixed(2)
  return v.toFixed(3)
}
const mib = (b) => (b == null ? null : b / MiB)
const short = (s) => (s ? (s.length > 44 ? s.slice(0, 41) + '...' : s) : '')
const verdict = (p) => (p == null ? 'n/a' : p ? 'PASS' : 'FAIL')

function errs(a) {
  const e = Object.entries(a)
    .filter(([, v]) => v && v.errors && v.errors.length)
    .map(([k, v]) => `${k}: ${v.errors[0].split('\n')[0]}`)
  return e.length ? e : null
}

function failedLine(a, impls = ['ours', 'ref']) {
  if (!impls.some((i) => a[i].failed)) return null
  return {
    row: '',
    metric: 'failed calls',
    ours: String(a.ours.failed),
    ref: impls
      .map((i) => (i === 'ours' ? null : `${i !== 'ref' ? i + ' ' : ''}${a[i].failed}`))
      .filter(Boolean)
      .join(', '),
    ratio: '',
    target: '',
    result: '',
  }
}

/** One table line. `better` says how to read the ratio ours/ref: 'lower', 'higher' or 'none'. */
function line(row, metric, ours, ref, better, target, targetText, errors = null, pass) {
  let ratio = null
  if (better !== 'none' && typeof ours === 'number' && typeof ref === 'number' && ref !== 0) ratio = ours / ref
  let result = pass
  if (result === undefined) {
    if (target == null) result = null
    else if (ratio == null) result = null
    else result = better === 'lower' ? ratio <= target : ratio >= target
  }
  return {
    row,
    metric,
    ours: fmt(ours),
    ref: fmt(ref),
    ratio: ratio == null ? (better === 'none' ? '' : '-') : `${ratio.toFixed(ratio < 0.1 ? 3 : 2)}x`,
    target: targetText,
    result: errors
      ? 'ERROR'
      : target == null && pass === undefined
        ? targetText === 'report'
          ? 'info'
          : ''
        : verdict(result),
    ratioValue: ratio,
    pass: result,
    errors,
  }
}

/** Marks a line as one of the figures issue 34 asks for: run.js prints them again, together,
 * under the table, with `label` as their row. */
function issue34(label, l) {
  if (l && label) l.issue34 = label
  return l
}

function table(lines) {
  const cols = [
    ['row', 'row'],
    ['metric', 'metric'],
    ['ours', 'ours'],
    ['ref', 'reference'],
    ['ratio', 'ours/ref'],
    ['target', 'target'],
    ['result', 'result'],
  ]
  const w = cols.map(([k, h]) => Math.max(h.length, ...lines.map((l) => String(l[k] ?? '').length)))
  const fmtRow = (vals) =>
    vals.map((v, i) => (i >= 2 && i <= 4 ? String(v).padStart(w[i]) : String(v).padEnd(w[i]))).join('  ')
  const out = [fmtRow(cols.map(([, h]) => h)), w.map((n) => '-'.repeat(n)).join('  ')]
  for (const l of lines) out.push(fmtRow(cols.map(([k]) => l[k] ?? '')))
  return out.join('\n')
}

function summarize(a, keys) {
  const s = {}
  for (const [impl, v] of Object.entries(a)) {
    s[impl] = {}
    for (const k of keys) {
      const xs = v.runs.map((r) => r[k]).filter((x) => typeof x === 'number')
      s[impl][k] = median(xs)
      s[impl][k + 'Max'] = max(xs)
    }
  }
  return s
}

module.exports = {
  MiB,
  median,
  max,
  min,
  sum,
  fmt,
  mib,
  short,
  verdict,
  errs,
  failedLine,
  line,
  issue34,
  table,
  summarize,
}
