'use strict'
// A kernel whose interpreter dies on its own: the running cell gets a `killed` fault that says
// so, the kernel is no longer alive, later cells reject with a SandboxError carrying the reason,
// the box is gone, and the session goes on serving.

const test = require('node:test')
const assert = require('node:assert/strict')
const { kern, rand, procsMatching, waitFor } = require('./helpers')

const { Sandbox, SandboxError } = kern

let sbx
test.before(async () => {
  sbx = await new Sandbox().open()
})
test.after(async () => {
  await sbx.close()
})

/** A cell leaving a process tagged `marker` in the kernel's box, to see the box go. */
const tagBox = (marker) => `import subprocess\nsubprocess.Popen(["sh", "-c", "sleep 600; : ${marker}"])\nNone`

/** Runs `code` as the second cell of a fresh kernel (state set by the first) and checks the death. */
async function diesIn(code, exitCode) {
  const k = await sbx.kernel()
  const marker = `kst-kdeath-${rand()}`
  await k.runCode(`state = 41\n${tagBox(marker)}`)
  assert.ok(await waitFor(() => procsMatching(marker).length > 0, 10_000))
  const r = await k.runCode(code)
  assert.equal(r.fault && r.fault.type, 'killed')
  assert.match(r.fault.message, /kernel process exited during the cell/)
  assert.match(r.fault.message, new RegExp(`exit code ${exitCode}\\b`))
  assert.equal(r.success, false)
  assert.equal(r.exitCode, -1)
  assert.equal(r.stdout, 'before\n', 'output written before the death is kept')
  assert.equal(k.alive, false)
  assert.ok(await waitFor(() => procsMatching(marker).length === 0, 10_000), 'the box is gone')
  await assert.rejects(k.runCode('state'), (e) => {
    assert.ok(e instanceof SandboxError)
    assert.match(e.message, /kernel is closed/)
    assert.match(e.message, new RegExp(`exit code ${exitCode}\\b`))
    return true
  })
  assert.equal(k.alive, false)
  await k.close() // idempotent on a dead kernel
  // The session is unharmed: a new kernel and a one-shot call both work.
  const k2 = await sbx.kernel()
  assert.equal((await k2.runCode('1 + 1')).results[0].text, '2')
  await k2.close()
  assert.equal((await sbx.runCode('print("one-shot")')).stdout, 'one-shot\n')
}

test('os._exit(3) in a cell: fault killed naming exit code 3, kernel dead, later cells reject', async () => {
  await diesIn('import os\nprint("before", flush=True)\nos._exit(3)', 3)
})

test('a segfault in a C extension (ctypes.string_at(0)): fault killed, exit code 139 (SIGSEGV)', async () => {
  await diesIn('import ctypes\nprint("before", flush=True)\nctypes.string_at(0)', 139)
})

test('an interpreter that dies between cells: alive turns false, the next cell rejects', async () => {
  const k = await sbx.kernel()
  await k.runCode('import os, threading\nthreading.Timer(0.3, os._exit, [4]).start()')
  assert.ok(await waitFor(() => !k.alive, 10_000), 'alive turns false without a cell running')
  await assert.rejects(k.runCode('1'), (e) => e instanceof SandboxError && /kernel is closed/.test(e.message))
})

test('cells queued behind the one that kills the interpreter reject, none hangs', async () => {
  const k = await sbx.kernel()
  const dying = k.runCode('import os\nos._exit(7)')
  const queued = [k.runCode('1'), k.runCode('2')]
  const r = await dying
  assert.equal(r.fault && r.fault.type, 'killed')
  assert.match(r.fault.message, /exit code 7\b/)
  for (const q of queued) await assert.rejects(q, SandboxError)
  assert.equal(k.alive, false)
})
