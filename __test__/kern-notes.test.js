'use strict'
// kern's own notes (its "caps are not enforced on this host" warning) are not the workload's
// output: they stay out of stderr, onStderr and `truncated`, and each distinct one is reported once
// per process as a KernWarning, for one-shot calls, setup and kernels alike. Each case runs in a
// fresh node process, since "once per process" is the point.

const test = require('node:test')
const assert = require('node:assert/strict')
const cp = require('node:child_process')
const { kernBin, realKern, rand, runNode, lastJson, wrapKern } = require('./helpers')

// The stand-in warns as kern does on a host without cgroup delegation (this project's machines).
const KERN = realKern ? kernBin : wrapKern({ KERN_STANDIN_WARN_CAPS: '1' })

/** The kern warning lines a plain box on this host gets, read from kern itself. */
function kernWarnings() {
  const r = cp.spawnSync(
    KERN,
    ['box', `kst-probe-${rand()}`, '--image', 'python:3.12-slim', '--memory', '512m', '--', 'true'],
    { encoding: 'utf8', timeout: 60_000 },
  )
  return r.stderr
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.startsWith('kern: warning:'))
}

let expected
test.before(() => {
  expected = kernWarnings()
})

/** Runs `body` (an async function's body, with `kern` and `warnings` in scope) in a fresh node;
 * resolves to the JSON it printed last, plus the KernWarnings the process emitted. */
async function inChild(body) {
  const r = await runNode(
    `const kern = require(REPO)
const warnings = []
process.on('warning', (w) => { if (w.name === 'KernWarning') warnings.push(w.message) })
;(async () => {
  const out = await (async () => { ${body} })()
  // emitWarning delivers on the next tick; the process then exits by itself: nothing keeps it alive.
  setImmediate(() => console.log(JSON.stringify({ ...out, warnings })))
})().catch((e) => { console.log(JSON.stringify({ error: String(e && e.stack) })); process.exitCode = 1 })`,
    { env: { KERN_BIN: KERN }, timeoutMs: 120_000 },
  )
  assert.equal(r.timedOut, false, 'the process exited by itself')
  assert.equal(r.code, 0, r.stdout + r.stderr)
  const got = lastJson(r.stdout)
  return { ...got, stderr: r.stderr }
}

test("one-shot calls: kern's warning is not in stderr, onStderr or truncated; one KernWarning per process", async () => {
  const got = await inChild(`
    const chunks = []
    const a = await kern.runCode('x = 1', { onStderr: (c) => chunks.push(String(c)) })
    const own = 'own line\\nkern: warning: a line of the workload, not at the start\\n'
    const b = await kern.runCode('import sys\\nsys.stderr.write(' + JSON.stringify(own) + ')')
    const small = await kern.runCode('x = 2', { maxOutputBytes: 64 })
    return { a: [a.stderr, a.truncated, a.success], chunks, b: b.stderr, own, small: [small.stderr, small.truncated] }
  `)
  assert.deepEqual(got.a, ['', false, true])
  assert.deepEqual(got.chunks, [])
  assert.equal(got.b, got.own, "the workload's own stderr is untouched")
  assert.deepEqual(got.small, ['', false], "kern's lines do not count toward maxOutputBytes")
  assert.deepEqual(got.warnings, expected, 'each of kern’s warnings once, for three boxes')
  if (expected.length) {
    assert.match(got.warnings[0], /not enforced/)
    // Node prints it once on the process's stderr, as a KernWarning.
    assert.equal(got.stderr.split('KernWarning: kern: warning:').length - 1, expected.length, got.stderr)
  }
})

test('setup: the warning of the setup box is reported, not part of what setup said', async () => {
  const got = await inChild(`
    const sbx = await new kern.Sandbox({ setup: 'echo set-up >&2' }).open()
    const r = await sbx.runCode('import sys; sys.stderr.write("after\\\\n")')
    await sbx.close()
    return { after: r.stderr }
  `)
  assert.equal(got.after, 'after\n')
  assert.deepEqual(got.warnings, expected)
})

test("kernels: kern's warning is reported once the kernel is started, and cells' stderr is their own", async () => {
  const got = await inChild(`
    const sbx = await new kern.Sandbox().open()
    const k = await sbx.kernel()
    await new Promise((r) => setImmediate(r))
    const atStart = warnings.length
    const r = await k.runCode('import sys; sys.stderr.write("cell\\\\n")')
    await sbx.close()
    return { atStart, cell: r.stderr }
  `)
  assert.equal(got.atStart, expected.length, 'reported when kernel() resolves')
  assert.equal(got.cell, 'cell\n')
  assert.deepEqual(got.warnings, expected)
})
