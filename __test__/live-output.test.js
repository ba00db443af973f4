'use strict'
// Live output from fresh kernels: a cell that flushes a line and then works for a while must hand
// that line to onStdout while it works, in every kernel, not only in most. The first cell of a
// fresh kernel is the one the host writes before its serving task has taken it up, so each round
// starts a new kernel. One late chunk fails the test.

const test = require('node:test')
const assert = require('node:assert/strict')
const { kern, realKern } = require('./helpers')

/** Fresh kernels (and machines, and one-shot calls) per test: more on a real kern, whose races
 * the stand-in hides. */
const KERNELS = realKern ? 30 : 20
/** How long each cell works after its first line. */
const WORK_MS = 500
/** The first line must arrive at least this long before the cell's result: well before the work ends. */
const AHEAD_MS = 250

const CELLS = {
  python: `import time\nprint('a', flush=True)\ntime.sleep(${WORK_MS / 1000})\nprint('b')`,
  // A busy wait holds node's thread, so the line must already be out of the box when it starts.
  javascript: `console.log('a'); const t = Date.now(); while (Date.now() - t < ${WORK_MS}); console.log('b')`,
  // An await of a timer: the driver's event loop runs in between.
  'javascript (await)': `console.log('a'); await new Promise((r) => setTimeout(r, ${WORK_MS})); console.log('b')`,
}

let sbx
test.before(async () => {
  sbx = await new kern.Sandbox().open()
})
test.after(async () => {
  await sbx.close()
})

for (const [name, code] of Object.entries(CELLS)) {
  test(`${name}: the first line of a fresh kernel's first cell streams while the cell runs (${KERNELS} kernels)`, async () => {
    const language = name.startsWith('javascript') ? 'javascript' : 'python'
    const late = []
    for (let i = 0; i < KERNELS; i++) {
      const k = await sbx.kernel({ language })
      try {
        let first = null
        const r = await k.runCode(code, {
          onStdout: (c) => {
            if (first === null) first = { at: performance.now(), text: c.toString() }
          },
        })
        const done = performance.now()
        assert.equal(r.stdout, 'a\nb\n', `kernel ${i}`)
        assert.ok(first, `kernel ${i}: onStdout was never called`)
        assert.match(first.text, /^a/, `kernel ${i}`)
        const ahead = done - first.at
        if (ahead < AHEAD_MS) late.push(`kernel ${i}: first chunk ${ahead.toFixed(0)} ms before the result`)
      } finally {
        await k.close()
      }
    }
    assert.deepEqual(late, [], `a first line arrived late (wanted >= ${AHEAD_MS} ms ahead of the result)`)
  })
}

test(`one-shot calls: the first line streams while the call runs (${KERNELS} calls each, Python and bash)`, async () => {
  const late = []
  for (let i = 0; i < KERNELS; i++) {
    const py = await aheadOf((onStdout) => sbx.runCode(CELLS.python, { onStdout }))
    assert.equal(py.r.stdout, 'a\nb\n', `call ${i}`)
    if (!(py.ahead >= AHEAD_MS)) late.push(`python call ${i}: first chunk ${py.ahead.toFixed(0)} ms ahead`)
    const sh = await aheadOf((onStdout) =>
      sbx.runCode(`echo a; sleep ${WORK_MS / 1000}; echo b`, { language: 'bash', onStdout }),
    )
    assert.equal(sh.r.stdout, 'a\nb\n', `call ${i}`)
    if (!(sh.ahead >= AHEAD_MS)) late.push(`bash call ${i}: first chunk ${sh.ahead.toFixed(0)} ms ahead`)
  }
  assert.deepEqual(late, [], `a first line arrived late (wanted >= ${AHEAD_MS} ms ahead of the result)`)
})

/** Runs `call(onStdout)` and reports how long before its result the first chunk came. */
async function aheadOf(call) {
  let first = null
  const r = await call((c) => {
    if (first === null) first = { at: performance.now(), text: c.toString() }
  })
  const done = performance.now()
  return { r, first, ahead: first ? done - first.at : -1 }
}

test(`machines: exec and a machine's kernel stream the first line while the work goes on (${KERNELS} machines)`, async () => {
  const late = []
  for (let i = 0; i < KERNELS; i++) {
    const m = await sbx.machine()
    try {
      const e = await aheadOf((onStdout) => m.exec(`echo a; sleep ${WORK_MS / 1000}; echo b`, { onStdout }))
      assert.equal(e.r.stdout, 'a\nb\n', `machine ${i}`)
      if (!(e.ahead >= AHEAD_MS)) late.push(`machine ${i} exec: first chunk ${e.ahead.toFixed(0)} ms ahead`)
      if (i % 4 === 0) {
        const k = await m.kernel()
        const c = await aheadOf((onStdout) => k.runCode(CELLS.python, { onStdout }))
        assert.equal(c.r.stdout, 'a\nb\n', `machine ${i} kernel`)
        if (!(c.ahead >= AHEAD_MS)) late.push(`machine ${i} kernel: first chunk ${c.ahead.toFixed(0)} ms ahead`)
        await k.close()
      }
    } finally {
      await m.close()
    }
  }
  assert.deepEqual(late, [], `a first line arrived late (wanted >= ${AHEAD_MS} ms ahead of the result)`)
})
