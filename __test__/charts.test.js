'use strict'
// Charts as data: each matplotlib figure's Result also carries `chart` (E2B's shape), read in the
// box from the figure's artists, in one-shot runCode and the warm kernel alike; what the box
// writes back is vetted on the host. Real matplotlib (and pandas) in the box.

const test = require('node:test')
const assert = require('node:assert/strict')
const { kern, openKernel } = require('./helpers')
const { richLine } = require('../lib/results.js')

const { Sandbox, Result, ChartType, ScaleType } = kern
const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47])
const PLT = 'import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\nimport numpy as np\n'

let sbx
test.before(async () => {
  sbx = await new Sandbox().open()
})
test.after(async () => {
  await sbx.close()
})

/** What the cell wrote to stderr: kern's own host warnings (`kern: warning: --memory is not
 * enforced ...` on hosts without cgroup delegation) are not the cell's. */
const cellStderr = (s) =>
  s
    .split('\n')
    .filter((l) => !l.startsWith('kern: '))
    .join('\n')

/** Runs a cell that must succeed; its figure Results (those with a PNG), in order. */
async function figures(code, runner = sbx) {
  const r = await runner.runCode(PLT + code)
  assert.equal(r.exitCode, 0, r.stderr)
  assert.equal(cellStderr(r.stderr), '', 'extraction prints nothing')
  const figs = r.results.filter((x) => x.png)
  for (const f of figs) assert.ok(f.png.subarray(0, 4).equals(PNG_MAGIC), 'the PNG is still there')
  return figs
}

const xs = (el) => el.points.map((p) => p[0])
const ys = (el) => el.points.map((p) => p[1])

test('a line chart: title, labels, units, ticks, scales and each line as points', async () => {
  const [fig] = await figures(`
fig, ax = plt.subplots()
ax.plot([0, 1, 2], [0, 10, 20], label="speed")
ax.plot([0, 1, 2], [5, 5, 5])
ax.set_title("Run"); ax.set_xlabel("Time (s)"); ax.set_ylabel("Distance (m)")
ax.grid(True); ax.legend(); ax.text(1, 1, "note")
`)
  const c = fig.chart
  assert.equal(c.type, ChartType.LINE)
  assert.equal(c.type, 'line')
  assert.equal(c.title, 'Run')
  assert.deepEqual([c.x_label, c.x_unit, c.y_label, c.y_unit], ['Time (s)', 's', 'Distance (m)', 'm'])
  assert.equal(c.elements.length, 2, 'grid lines, the legend and text are not elements')
  assert.deepEqual(c.elements[0], {
    label: 'speed',
    points: [
      [0, 0],
      [1, 10],
      [2, 20],
    ],
  })
  assert.deepEqual(c.elements[1].label, '', 'an unlabelled line has an empty label')
  assert.equal(c.x_scale, ScaleType.LINEAR)
  assert.equal(c.y_scale, 'linear')
  assert.ok(c.x_ticks.includes(1) && c.x_ticks.every((t) => t >= 0 && t <= 2), 'major ticks in view')
  assert.equal(c.x_tick_labels.length, c.x_ticks.length)
  assert.ok(c.y_tick_labels.includes('10.0') || c.y_tick_labels.includes('10'), c.y_tick_labels.join(' '))
  assert.deepEqual(fig.formats(), ['image/png'], 'the figure keeps its MIME bundle as it was')
  assert.doesNotMatch(JSON.stringify(c), /iVBOR/, 'no image inside the chart')
  assert.deepEqual(JSON.parse(JSON.stringify(fig)).chart, c, 'toJSON carries the chart')
})

test('scatter on a log scale, dates as ISO strings, categorical axes', async () => {
  const [scatter, dated, cats] = await figures(`
fig, ax = plt.subplots()
ax.scatter([1, 2, 3], [1, 100, 10000], label="growth")
ax.set_yscale("log")
import datetime as dt
fig, ax = plt.subplots()
ax.plot([dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 2, 12)], [3, 4])
fig, ax = plt.subplots()
ax.plot(["mon", "tue", "wed"], [1, 3, 2])
`)
  let c = scatter.chart
  assert.equal(c.type, 'scatter')
  assert.deepEqual(c.elements, [
    {
      label: 'growth',
      points: [
        [1, 1],
        [2, 100],
        [3, 10000],
      ],
    },
  ])
  assert.equal(c.y_scale, 'log')
  assert.ok(
    [1, 100, 10000].every((v) => c.y_ticks.includes(v)),
    `log ticks: ${c.y_ticks}`,
  )
  assert.ok(c.y_tick_labels.includes('10^2'), `mathtext read as text: ${c.y_tick_labels}`)

  c = dated.chart
  assert.equal(c.x_scale, 'datetime')
  assert.deepEqual(c.elements[0].points, [
    ['2024-01-01T00:00:00', 3],
    ['2024-01-02T12:00:00', 4],
  ])
  assert.ok(c.x_ticks.length > 0 && c.x_ticks.every((t) => /^2024-01-0[12]T/.test(t)), `${c.x_ticks}`)

  c = cats.chart
  assert.equal(c.x_scale, 'categorical')
  assert.deepEqual(c.elements[0].points, [
    ['mon', 1],
    ['tue', 3],
    ['wed', 2],
  ])
  assert.deepEqual(c.x_ticks, ['mon', 'tue', 'wed'])
  assert.deepEqual(c.x_tick_labels, ['mon', 'tue', 'wed'])
})

test('bars: simple, grouped, stacked and horizontal, labelled by category and group', async () => {
  const [simple, grouped, stacked, horizontal] = await figures(`
fig, ax = plt.subplots()
ax.bar(["A", "B", "C"], [100, 200, 300], label="Books Sold")
ax.set_title("Sales"); ax.set_xlabel("Authors"); ax.set_ylabel("Sold (units)")
fig, ax = plt.subplots()
x = np.arange(2)
ax.bar(x - 0.2, [1, 2], 0.4, label="2023"); ax.bar(x + 0.2, [3, 4], 0.4, label="2024")
ax.set_xticks(x, ["north", "south"])
fig, ax = plt.subplots()
ax.bar(["a", "b"], [1, 2], label="low"); ax.bar(["a", "b"], [3, 4], bottom=[1, 2], label="high")
fig, ax = plt.subplots()
ax.barh(["x", "y"], [5, 6])
`)
  assert.equal(simple.chart.type, 'bar')
  assert.equal(simple.chart.title, 'Sales')
  assert.equal(simple.chart.y_unit, 'units')
  assert.deepEqual(simple.chart.elements, [
    { label: 'A', value: 100, group: 'Books Sold' },
    { label: 'B', value: 200, group: 'Books Sold' },
    { label: 'C', value: 300, group: 'Books Sold' },
  ])
  assert.deepEqual(
    grouped.chart.elements.map((e) => [e.label, e.value, e.group]),
    [
      ['north', 1, '2023'],
      ['south', 2, '2023'],
      ['north', 3, '2024'],
      ['south', 4, '2024'],
    ],
  )
  assert.deepEqual(
    stacked.chart.elements.map((e) => [e.label, e.value, e.group]),
    [
      ['a', 1, 'low'],
      ['b', 2, 'low'],
      ['a', 3, 'high'],
      ['b', 4, 'high'],
    ],
    'a stacked segment is its own value, not the top of the stack',
  )
  assert.deepEqual(
    horizontal.chart.elements.map((e) => [e.label, e.value, e.group]),
    [
      ['x', 5, 'Group 0'],
      ['y', 6, 'Group 0'],
    ],
  )
})

test('a pie and box plots (vertical; horizontal with patches and means)', async () => {
  const [pie, box, hbox] = await figures(`
fig, ax = plt.subplots()
ax.pie([1, 1, 2], labels=["u", "v", "w"]); ax.set_title("Share")
fig, ax = plt.subplots()
ax.boxplot([[1, 2, 3, 4, 5, 20], [2, 3, 4, 5, 6]], labels=["L1", "L2"]); ax.set_ylabel("Speed (m/s)")
fig, ax = plt.subplots()
ax.boxplot([[1, 2, 3, 4, 5, 20]], vert=False, patch_artist=True, showmeans=True, labels=["only"])
`)
  assert.equal(pie.chart.type, 'pie')
  assert.equal(pie.chart.title, 'Share')
  assert.deepEqual(
    pie.chart.elements.map((e) => e.label),
    ['u', 'v', 'w'],
  )
  assert.deepEqual(
    pie.chart.elements.map((e) => Math.round(e.angle)),
    [90, 90, 180],
  )
  assert.ok(pie.chart.elements.every((e) => e.radius === 1))
  assert.equal('x_label' in pie.chart, false, 'a pie has no axes fields')

  assert.equal(box.chart.type, 'box_and_whisker')
  assert.equal(box.chart.y_unit, 'm/s')
  assert.deepEqual(box.chart.elements, [
    { label: 'L1', min: 1, first_quartile: 2.25, median: 3.5, third_quartile: 4.75, max: 5, outliers: [20] },
    { label: 'L2', min: 2, first_quartile: 3, median: 4, third_quartile: 5, max: 6, outliers: [] },
  ])
  assert.deepEqual(
    hbox.chart.elements,
    [{ label: 'only', min: 1, first_quartile: 2.25, median: 3.5, third_quartile: 4.75, max: 5, outliers: [20] }],
    'the mean marker (5.83, past the whisker) is no outlier',
  )
})

test('several axes give a superchart; an image gives unknown; a figure with no axes no chart', async () => {
  const [sup, img, empty] = await figures(`
fig, (a, b) = plt.subplots(1, 2)
a.plot([1, 2], [3, 4], label="l"); a.set_title("left")
b.scatter([1], [2], label="s"); b.set_title("right")
fig.suptitle("Both")
fig, ax = plt.subplots()
ax.imshow([[1, 2], [3, 4]]); ax.set_title("picture")
fig = plt.figure()
`)
  assert.equal(sup.chart.type, 'superchart')
  assert.equal(sup.chart.title, 'Both')
  assert.deepEqual(
    sup.chart.elements.map((c) => [c.type, c.title]),
    [
      ['line', 'left'],
      ['scatter', 'right'],
    ],
  )
  assert.deepEqual(sup.chart.elements[0].elements[0].points, [
    [1, 3],
    [2, 4],
  ])
  assert.deepEqual(img.chart, { type: 'unknown', title: 'picture', elements: [] })
  assert.equal(empty.chart, undefined)
  assert.equal('chart' in empty, false)
  assert.deepEqual(Object.keys(JSON.parse(JSON.stringify(empty))), ['data', 'isMainResult', 'executionCount'])
})

test('pandas plots are charts: a time series and a bar plot of a DataFrame', async () => {
  const [line, bars] = await figures(`
import pandas as pd
df = pd.DataFrame({"a": [1, 2, 3], "b": [3, 2, 1]}, index=pd.date_range("2024-01-01", periods=3))
df.plot(title="daily")
pd.DataFrame({"q1": [1, 2], "q2": [3, 4]}, index=["x", "y"]).plot.bar()
`)
  assert.equal(line.chart.type, 'line')
  assert.equal(line.chart.title, 'daily')
  assert.equal(line.chart.x_scale, 'datetime')
  assert.deepEqual(
    line.chart.elements.map((e) => e.label),
    ['a', 'b'],
  )
  assert.deepEqual(xs(line.chart.elements[0]), ['2024-01-01T00:00:00', '2024-01-02T00:00:00', '2024-01-03T00:00:00'])
  assert.deepEqual(ys(line.chart.elements[1]), [3, 2, 1])
  assert.deepEqual(
    bars.chart.elements.map((e) => [e.label, e.value, e.group]),
    [
      ['x', 1, 'q1'],
      ['y', 2, 'q1'],
      ['x', 3, 'q2'],
      ['y', 4, 'q2'],
    ],
  )
})

test('a long line is down-sampled evenly to 10,000 points and says so; NaN points are left out', async () => {
  const [big, gaps] = await figures(`
fig, ax = plt.subplots()
ax.plot(np.arange(25000), np.arange(25000) * 2.0)
ax.plot(np.arange(10), np.arange(10))
fig, ax = plt.subplots()
ax.plot([0, 1, 2], [1, float("nan"), 3])
`)
  const [long, short] = big.chart.elements
  assert.equal(long.points.length, 10000)
  assert.equal(long.truncated, true)
  assert.deepEqual(long.points[0], [0, 0])
  assert.deepEqual(long.points[9999], [24999, 49998], 'the last point is kept')
  const step = long.points[5000][0] - long.points[4999][0]
  assert.ok(step === 2 || step === 3, 'even steps')
  assert.equal(short.truncated, undefined)
  assert.equal(short.points.length, 10)
  assert.deepEqual(gaps.chart.elements[0].points, [
    [0, 1],
    [2, 3],
  ])
})

test('many series share a per-figure budget of 200,000 points evenly', async () => {
  const [fig] = await figures(`
fig, ax = plt.subplots()
for i in range(40):
    ax.plot(np.arange(6000), np.arange(6000) + i)
`)
  assert.equal(fig.chart.elements.length, 40)
  for (const el of fig.chart.elements) {
    assert.equal(el.points.length, 5000)
    assert.equal(el.truncated, true)
    assert.deepEqual(el.points[4999][0], 5999)
  }
})

test('a figure whose artists raise on access keeps its PNG, has no chart, and prints nothing', async () => {
  const r = await sbx.runCode(
    PLT +
      `
from matplotlib.lines import Line2D
class Hostile(Line2D):
    def get_xydata(self): raise RuntimeError("no data for you")
    def get_linestyle(self): raise RuntimeError("nor style")
fig, ax = plt.subplots()
ax.add_line(Hostile([0, 1], [0, 1]))
ax.get_lines()[0].get_label = lambda: 1 / 0
fig2, ax2 = plt.subplots()
_ = ax2.plot([1, 2])
`,
  )
  assert.equal(r.exitCode, 0, r.stderr)
  assert.equal(cellStderr(r.stderr), '')
  assert.equal(r.error, null)
  assert.equal(r.results.length, 2)
  assert.ok(r.results[0].png.subarray(0, 4).equals(PNG_MAGIC))
  assert.equal(r.results[0].chart, undefined)
  assert.equal(r.results[1].chart.type, 'line', 'the next figure is read as usual')
})

test('display(fig) and a figure as the trailing expression: a chart each, each figure once', async () => {
  const r = await sbx.runCode(
    PLT +
      `
f1, ax = plt.subplots(); ax.plot([1, 2]); ax.set_title("shown")
display(f1)
f2, ax = plt.subplots(); ax.bar(["k"], [2]); ax.set_title("tail")
display("text")
f2
`,
  )
  assert.equal(r.exitCode, 0, r.stderr)
  assert.deepEqual(
    r.results.map((x) => [x.chart?.title ?? null, x.isMainResult, Boolean(x.png)]),
    [
      ['shown', false, true],
      [null, false, false],
      ['tail', true, true],
    ],
  )
  assert.equal(r.results[1].chart, undefined)
  assert.equal(r.results[2].chart.elements[0].value, 2)
})

test('the warm kernel gives charts too, and onResult sees them', async (t) => {
  const k = await openKernel(t, sbx)
  const seen = []
  const r = await k.runCode(PLT + 'plt.plot([1, 2, 3], [2, 4, 8]); plt.title("warm")', {
    onResult: (x) => seen.push(x),
  })
  assert.equal(r.exitCode, 0, r.stderr)
  const fig = r.results.find((x) => x.png)
  assert.equal(fig.chart.type, 'line')
  assert.equal(fig.chart.title, 'warm')
  assert.deepEqual(fig.chart.elements[0].points, [
    [1, 2],
    [2, 4],
    [3, 8],
  ])
  assert.ok(
    seen.some((x) => x.chart && x.chart.title === 'warm'),
    'onResult got the chart',
  )
  // The extractor is compiled once per kernel; a second figure is read the same way.
  const again = await k.runCode('fig, ax = plt.subplots(); ax.pie([1, 3]); fig')
  assert.equal(again.results.length, 1, 'the trailing figure is not captured twice')
  assert.equal(again.results[0].chart.type, 'pie')
  assert.equal(again.results[0].isMainResult, true)
})

test('one-shot kern.runCode gives the chart to onResult', async () => {
  const seen = []
  const r = await kern.runCode(PLT + '_ = plt.scatter([1], [2])', { onResult: (x) => seen.push(x.chart?.type) })
  assert.equal(r.results.length, 1)
  assert.equal(r.results[0].chart.type, 'scatter')
  assert.deepEqual(seen, ['scatter'])
})

// ---------------------------------------------------------------------------------------------
// The cases E2B's own chart tests cover (line, log, both scales, scatter, bar, pie, box plot,
// superchart, unknown), with the values E2B's extractor gives for them: among those, an axes'
// missing title is null for every kind of chart while a figure's (superchart's) is "", and a
// wedge's angle is rounded as E2B rounds it. Each cell ends in plt.show(), as E2B's do.

/** The chart of the one figure a cell shows. */
async function shown(code) {
  const figs = await figures(`${code}\nplt.show()`)
  assert.equal(figs.length, 1)
  assert.ok(figs[0].chart, 'the figure has a chart')
  return figs[0].chart
}

test('E2B cases: a line over dates, with units; then an untitled one, whose title is null', async () => {
  let c = await shown(`
import datetime
t0 = datetime.datetime(2024, 3, 1)
when = [t0 + datetime.timedelta(seconds=s) for s in range(60)]
phase = np.linspace(0, np.pi, 60)
plt.figure(figsize=(8, 5))
plt.plot(when, np.sin(phase), label="rise")
plt.plot(when, np.cos(phase), label="fall")
plt.xlabel("Elapsed (s)"); plt.ylabel("Voltage (V)"); plt.title("Two signals")
`)
  assert.equal(c.type, 'line')
  assert.equal(c.title, 'Two signals')
  assert.deepEqual([c.x_label, c.y_label, c.x_unit, c.y_unit], ['Elapsed (s)', 'Voltage (V)', 's', 'V'])
  assert.deepEqual([c.x_scale, c.y_scale], ['datetime', 'linear'])
  assert.ok(c.x_ticks.length > 0 && c.x_ticks.every((t) => typeof t === 'string' && !Number.isNaN(Date.parse(t))))
  assert.ok(c.y_ticks.every((t) => typeof t === 'number'))
  assert.ok([...c.x_tick_labels, ...c.y_tick_labels].every((l) => typeof l === 'string'))
  assert.deepEqual(
    c.elements.map((e) => [e.label, e.points.length]),
    [
      ['rise', 60],
      ['fall', 60],
    ],
  )
  assert.ok(c.elements.every((e) => e.points.every(([x, y]) => typeof x === 'string' && typeof y === 'number')))
  assert.equal(c.elements[0].points[0][0], '2024-03-01T00:00:00')
  assert.equal(c.elements[0].points[59][0], '2024-03-01T00:00:59')

  c = await shown(`
import datetime
plt.figure()
plt.plot([datetime.date(2024, 3, d) for d in (1, 2, 3)], [1, 0, 1])
`)
  assert.deepEqual([c.type, c.title, c.x_label, c.y_label, c.x_scale], ['line', null, null, null, 'datetime'])
})

test('E2B cases: a log-scale line with grid and legend; a categorical y axis', async () => {
  let c = await shown(`
x = np.linspace(0, 50, 80)
plt.figure()
plt.plot(x, np.exp(x / 5), label="growth")
plt.yscale("log"); plt.grid(True); plt.legend()
plt.xlabel("Step"); plt.ylabel("Size (log)"); plt.title("Exponential")
`)
  assert.deepEqual([c.type, c.title, c.x_unit, c.y_unit], ['line', 'Exponential', null, 'log'])
  assert.deepEqual([c.x_scale, c.y_scale], ['linear', 'log'])
  assert.ok([...c.x_ticks, ...c.y_ticks].every((t) => typeof t === 'number'))
  assert.deepEqual(
    c.elements.map((e) => [e.label, e.points.length]),
    [['growth', 80]],
    'grid lines are no series',
  )

  c = await shown(`
plt.figure()
plt.plot([10, 20, 30, 40], ["low", "mid", "high", "top"])
`)
  assert.deepEqual([c.type, c.title, c.x_scale, c.y_scale], ['line', null, 'linear', 'categorical'])
})

test('E2B cases: an untitled scatter has title null; two datasets as points', async () => {
  const c = await shown(`
rng = np.random.default_rng(7)
plt.figure()
plt.xlabel("P"); plt.ylabel("Q")
plt.scatter(rng.random(4), rng.random(4), c="green", label="first")
plt.scatter(rng.random(8), rng.random(8), c="orange", label="second")
`)
  assert.equal(c.type, 'scatter')
  assert.equal(c.title, null)
  assert.deepEqual([c.x_label, c.y_label, c.x_unit, c.y_unit], ['P', 'Q', null, null])
  assert.deepEqual([c.x_scale, c.y_scale], ['linear', 'linear'])
  assert.ok([...c.x_ticks, ...c.y_ticks].every((t) => typeof t === 'number'))
  assert.ok([...c.x_tick_labels, ...c.y_tick_labels].every((l) => typeof l === 'string'))
  assert.deepEqual(
    c.elements.map((e) => [e.label, e.points.length]),
    [
      ['first', 4],
      ['second', 8],
    ],
  )
  assert.ok(c.elements.every((e) => e.points.every((p) => p.length === 2 && p.every((v) => typeof v === 'number'))))
})

test('E2B cases: bars by category with a group; untitled bars have title null', async () => {
  let c = await shown(`
plt.figure(figsize=(9, 5))
plt.bar(["Ann", "Bob", "Cy", "Dee"], [40, 10, 30, 20], label="Votes", color="purple")
plt.xlabel("Candidate"); plt.ylabel("Votes cast"); plt.title("Election")
plt.tight_layout()
`)
  assert.deepEqual(
    [c.type, c.title, c.x_label, c.y_label, c.x_unit, c.y_unit],
    ['bar', 'Election', 'Candidate', 'Votes cast', null, null],
  )
  assert.deepEqual(c.elements, [
    { label: 'Ann', value: 40, group: 'Votes' },
    { label: 'Bob', value: 10, group: 'Votes' },
    { label: 'Cy', value: 30, group: 'Votes' },
    { label: 'Dee', value: 20, group: 'Votes' },
  ])

  c = await shown('plt.figure()\nplt.bar(["a"], [1])')
  assert.deepEqual([c.type, c.title], ['bar', null])
})

test("E2B cases: a pie's wedge angles as E2B rounds them (324, not 323.99999); untitled pies have title null", async () => {
  let c = await shown(`
fig, ax = plt.subplots(figsize=(6, 6))
plt.xlabel("ignored"); plt.ylabel("ignored")
ax.pie([90, 10], labels=["Yes", "Yes, later"], autopct="%1.1f%%", startangle=90)
ax.axis("equal")
plt.title("Coffee today?")
`)
  assert.equal(c.type, 'pie')
  assert.equal(c.title, 'Coffee today?')
  assert.deepEqual(c.elements, [
    { label: 'Yes', angle: 324, radius: 1 },
    { label: 'Yes, later', angle: 36, radius: 1 },
  ])
  assert.equal('x_label' in c, false, 'a pie has no axes fields')

  // pie() sums in single precision: without E2B's rounding these are 54.0000038, 89.9999962, ...
  c = await shown('fig, ax = plt.subplots()\nax.pie([3, 5, 12], labels=["s", "m", "l"])')
  assert.equal(c.title, null)
  assert.deepEqual(
    c.elements.map((w) => w.angle),
    [54, 90, 216],
  )
  c = await shown('fig, ax = plt.subplots()\nax.pie([40, 35, 25], startangle=140, radius=0.5)')
  assert.deepEqual(
    c.elements.map((w) => [w.label, w.angle, w.radius]),
    [
      ['', 144, 0.5],
      ['', 126, 0.5],
      ['', 90, 0.5],
    ],
  )
})

test('E2B cases: a box plot of three groups with patches and an outlier; untitled, title null', async () => {
  let c = await shown(`
groups = {"Team X": [12, 15, 14, 18, 16], "Team Y": [30, 22, 24, 23, 25, 26], "Team Z": [8, 11, 10, 9, 13]}
fig, ax = plt.subplots(figsize=(9, 5))
ax.set_title("Lap times"); ax.set_xlabel("Team"); ax.set_ylabel("Seconds")
ax.boxplot(list(groups.values()), patch_artist=True)
ax.set_xticks([1, 2, 3], list(groups.keys()))
`)
  assert.deepEqual(
    [c.type, c.title, c.x_label, c.y_label, c.x_unit, c.y_unit],
    ['box_and_whisker', 'Lap times', 'Team', 'Seconds', null, null],
  )
  assert.deepEqual(c.elements, [
    { label: 'Team X', min: 12, first_quartile: 14, median: 15, third_quartile: 16, max: 18, outliers: [] },
    { label: 'Team Y', min: 22, first_quartile: 23.25, median: 24.5, third_quartile: 25.75, max: 26, outliers: [30] },
    { label: 'Team Z', min: 8, first_quartile: 9, median: 10, third_quartile: 11, max: 13, outliers: [] },
  ])

  c = await shown('fig, ax = plt.subplots()\nax.boxplot([[1, 2, 3, 4]])')
  assert.deepEqual([c.type, c.title], ['box_and_whisker', null])
})

test('E2B cases: a superchart titled by its suptitle, "" without one; its untitled axes null', async () => {
  let c = await shown(`
fig, axs = plt.subplots(1, 2, figsize=(10, 6))
fig.suptitle("Side by side", fontsize=14)
t = np.linspace(0, 5, 50)
axs[0].plot(t, np.cos(t), "b"); axs[0].set_title("Cosine"); axs[0].grid(True)
axs[1].scatter([1, 2, 3], [3, 1, 2], label="pts")
axs[1].set_xlabel("U"); axs[1].set_ylabel("V"); axs[1].set_title("Dots"); axs[1].grid(True)
`)
  assert.deepEqual([c.type, c.title], ['superchart', 'Side by side'])
  assert.deepEqual(
    c.elements.map((e) => [e.type, e.title, e.x_label, e.y_label, e.elements.length]),
    [
      ['line', 'Cosine', null, null, 1],
      ['scatter', 'Dots', 'U', 'V', 1],
    ],
  )
  assert.equal(c.elements[0].elements[0].points.length, 50)
  assert.equal(c.elements[1].elements[0].points.length, 3)

  c = await shown(`
fig, axs = plt.subplots(2, 3)
axs[0][0].plot([1, 2]); axs[0][1].scatter([1], [1]); axs[0][2].bar(["a"], [1])
axs[1][0].pie([1, 3]); axs[1][1].boxplot([[1, 2, 3, 4]]); axs[1][2].imshow([[0, 1]])
`)
  assert.deepEqual([c.type, c.title], ['superchart', ''], "E2B gives a figure without a suptitle ''")
  assert.deepEqual(
    c.elements.map((e) => [e.type, e.title]),
    [
      ['line', null],
      ['scatter', null],
      ['bar', null],
      ['pie', null],
      ['box_and_whisker', null],
      ['unknown', null],
    ],
  )
  assert.deepEqual(
    c.elements[3].elements.map((w) => w.angle),
    [90, 270],
  )
})

test('E2B cases: unknown keeps its title (null without one); only the centred title and never the suptitle', async () => {
  let c = await shown(`
fig, ax = plt.subplots()
ax.add_artist(plt.Circle((0, 0), 1, fill=False)); ax.add_artist(plt.Circle((0, 0), 2, fill=False))
ax.grid(True)
plt.title("Rings")
`)
  assert.deepEqual(c, { type: 'unknown', title: 'Rings', elements: [] })
  c = await shown('fig, ax = plt.subplots()\nax.add_artist(plt.Circle((0, 0), 1))')
  assert.deepEqual(c, { type: 'unknown', title: null, elements: [] })
  c = await shown(`
fig, ax = plt.subplots()
ax.plot([1, 2], [2, 1])
ax.set_title("at the left", loc="left"); ax.set_title("at the right", loc="right")
fig.suptitle("the figure's")
`)
  assert.deepEqual(
    [c.type, c.title],
    ['line', null],
    "as E2B: ax.get_title() is the centred title, a lone axes' suptitle is not its title",
  )
})

// ---------------------------------------------------------------------------------------------
// The host's vetting: the box is untrusted, so its chart is rebuilt from what the type allows.

const line = (chart) => JSON.stringify({ data: { 'image/png': 'AAAA' }, main: false, chart })
const LINE = {
  type: 'line',
  title: 't',
  x_label: 'x (s)',
  y_label: null,
  x_unit: 's',
  y_unit: null,
  x_ticks: [0, '2024-01-01T00:00:00'],
  x_tick_labels: ['0', 'Jan'],
  x_scale: 'linear',
  y_ticks: [],
  y_tick_labels: [],
  y_scale: 'log',
  elements: [
    {
      label: 'a',
      points: [
        [0, 1],
        ['b', 2],
      ],
      truncated: true,
    },
  ],
}

test('a well-formed chart is kept, rebuilt from its known fields only', () => {
  const got = richLine(line({ ...LINE, extra: 'dropped', elements: [{ ...LINE.elements[0], more: 1 }] }), null).result
  assert.ok(got instanceof Result)
  assert.deepEqual(got.chart, LINE)
  const sup = { type: 'superchart', title: '', elements: [LINE, { type: 'unknown', title: 'u', elements: [] }] }
  assert.deepEqual(richLine(line(sup), null).result.chart, sup)
  const bar = {
    type: 'bar',
    title: '',
    x_label: null,
    y_label: null,
    x_unit: null,
    y_unit: null,
    elements: [{ label: 'a', value: 1.5, group: 'g' }],
  }
  assert.deepEqual(richLine(line(bar), null).result.chart, bar)
  // As E2B: an axes without a title has title null, kept as null in every chart but a superchart.
  const untitled = {
    type: 'superchart',
    title: '',
    elements: [
      { ...LINE, title: null },
      { ...bar, title: null },
    ],
  }
  assert.deepEqual(richLine(line(untitled), null).result.chart, untitled)
  const pie = { type: 'pie', title: null, elements: [{ label: '', angle: 324, radius: 1 }] }
  assert.deepEqual(richLine(line(pie), null).result.chart, pie)
})

test('a malformed chart is dropped and its result kept', () => {
  const bad = [
    'not an object',
    [LINE],
    null,
    { ...LINE, type: 'radar' },
    { ...LINE, title: 5 },
    { ...LINE, x_scale: 'made-up' },
    { ...LINE, x_ticks: [{}] },
    { ...LINE, x_tick_labels: [1] },
    { ...LINE, elements: [{ label: 'a', points: [[0, 1, 2]] }] },
    { ...LINE, elements: [{ label: 'a', points: [[0, null]] }] },
    { ...LINE, elements: [{ label: 'a', points: Array.from({ length: 10001 }, () => [0, 0]) }] },
    { ...LINE, x_label: 'x'.repeat(5000) },
    { ...LINE, elements: 'all' },
    { type: 'bar', title: '', elements: [{ label: 'a', value: '1', group: 'g' }] },
    { type: 'pie', title: '', elements: [{ label: 'a', angle: 1 }] },
    {
      type: 'box_and_whisker',
      title: '',
      elements: [{ label: 'a', min: 0, first_quartile: 1, median: 2, third_quartile: 3, max: 4, outliers: ['x'] }],
    },
    { type: 'superchart', title: '', elements: [{ type: 'superchart', title: '', elements: [] }] },
    { type: 'superchart', title: '', elements: [{ ...LINE, y_scale: 1 }] },
    { type: 'superchart', title: null, elements: [LINE] },
  ]
  for (const chart of bad) {
    const got = richLine(line(chart), 3)
    assert.ok(got.result instanceof Result, JSON.stringify(chart).slice(0, 80))
    assert.equal(got.result.chart, undefined, JSON.stringify(chart).slice(0, 80))
    assert.equal(got.result.data['image/png'], 'AAAA')
    assert.equal(got.result.executionCount, 3)
  }
  // Huge numbers JSON cannot hold finitely are no numbers either.
  const inf = line({ type: 'pie', title: '', elements: [{ label: 'a', angle: 1, radius: 1 }] }).replace(
    '"radius":1',
    '"radius":1e999',
  )
  assert.equal(richLine(inf, null).result.chart, undefined)
})
