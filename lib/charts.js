'use strict'
// Charts as data: the chart of a matplotlib figure (E2B's shape), as the box wrote it, vetted.
// The box is untrusted: a chart is rebuilt field by field from what its type allows, with every
// value type- and size-checked; anything else makes it no chart (the result itself is kept).

// ChartType and ScaleType: E2B's enums, documented in index.d.ts.
const ChartType = Object.freeze({
  LINE: 'line',
  SCATTER: 'scatter',
  BAR: 'bar',
  PIE: 'pie',
  BOX_AND_WHISKER: 'box_and_whisker',
  SUPERCHART: 'superchart',
  UNKNOWN: 'unknown',
})

const ScaleType = Object.freeze({
  LINEAR: 'linear',
  DATETIME: 'datetime',
  CATEGORICAL: 'categorical',
  LOG: 'log',
  SYMLOG: 'symlog',
  LOGIT: 'logit',
  FUNCTION: 'function',
  FUNCTIONLOG: 'functionlog',
  ASINH: 'asinh',
})

// The bounds the in-box extractor keeps to (src/kernel/python/charts.py); past them, no chart.
const MAX_POINTS = 10000
const MAX_ITEMS = 10000
const MAX_TICKS = 1000
const MAX_TEXT = 4096

const SCALES = new Set(Object.values(ScaleType))

class Malformed extends Error {}

function fail() {
  throw new Malformed()
}

const text = (x) => (typeof x === 'string' && x.length <= MAX_TEXT ? x : fail())
const textOrNull = (x) => (x == null ? null : text(x))
const num = (x) => (typeof x === 'number' && Number.isFinite(x) ? x : fail())
const coord = (x) => (typeof x === 'string' ? text(x) : num(x))
const scale = (x) => (SCALES.has(x) ? x : fail())

function list(x, max, each) {
  if (!Array.isArray(x) || x.length > max) fail()
  return x.map(each)
}

function object(x) {
  return x && typeof x === 'object' && !Array.isArray(x) ? x : fail()
}

const point = (p) => (Array.isArray(p) && p.length === 2 ? [coord(p[0]), coord(p[1])] : fail())

function pointData(e) {
  object(e)
  const out = { label: text(e.label), points: list(e.points, MAX_POINTS, point) }
  if (e.truncated === true) out.truncated = true
  return out
}

const barData = (e) => (object(e), { label: text(e.label), value: num(e.value), group: text(e.group) })
const pieData = (e) => (object(e), { label: text(e.label), angle: num(e.angle), radius: num(e.radius) })
const boxData = (e) => (
  object(e),
  {
    label: text(e.label),
    min: num(e.min),
    first_quartile: num(e.first_quartile),
    median: num(e.median),
    third_quartile: num(e.third_quartile),
    max: num(e.max),
    outliers: list(e.outliers, MAX_POINTS, num),
  }
)

/** The axis fields of a two-dimensional chart. */
function axes2d(c) {
  return {
    x_label: textOrNull(c.x_label),
    y_label: textOrNull(c.y_label),
    x_unit: textOrNull(c.x_unit),
    y_unit: textOrNull(c.y_unit),
  }
}

function ticks(c) {
  const out = {}
  for (const a of ['x', 'y']) {
    out[`${a}_ticks`] = list(c[`${a}_ticks`], MAX_TICKS, coord)
    out[`${a}_tick_labels`] = list(c[`${a}_tick_labels`], MAX_TICKS, text)
    out[`${a}_scale`] = scale(c[`${a}_scale`])
  }
  return out
}

function chart(c, nested) {
  object(c)
  // As E2B: an axes without a title has title null; a figure's (superchart's) is always text.
  const head = { type: c.type, title: c.type === ChartType.SUPERCHART ? text(c.title) : textOrNull(c.title) }
  switch (c.type) {
    case ChartType.LINE:
    case ChartType.SCATTER:
      return { ...head, ...axes2d(c), ...ticks(c), elements: list(c.elements, MAX_ITEMS, pointData) }
    case ChartType.BAR:
      return { ...head, ...axes2d(c), elements: list(c.elements, MAX_ITEMS, barData) }
    case ChartType.BOX_AND_WHISKER:
      return { ...head, ...axes2d(c), elements: list(c.elements, MAX_ITEMS, boxData) }
    case ChartType.PIE:
      return { ...head, elements: list(c.elements, MAX_ITEMS, pieData) }
    case ChartType.SUPERCHART:
      if (nested) fail() // the charts of a figure's axes; never a figure again
      return { ...head, elements: list(c.elements, MAX_ITEMS, (x) => chart(x, true)) }
    case ChartType.UNKNOWN:
      list(c.elements, MAX_ITEMS, () => null)
      return { ...head, elements: [] }
    default:
      return fail()
  }
}

/** The chart the box wrote, rebuilt from what its type allows; undefined when it is malformed. */
function vetChart(v) {
  try {
    return chart(v, false)
  } catch (e) {
    if (e instanceof Malformed) return undefined
    throw e
  }
}

module.exports = { ChartType, ScaleType, vetChart }
