'use strict'
// A one-shot call resolves once its workload has ended, while kern's teardown may still run (on a
// real kern on Linux 6.15+; otherwise on kern's exit, as before). Either way the result must be
// final: nothing the workload left running writes after it, files the interpreter flushes at exit
// are there, exit codes and faults are what kern would report, and close() leaves no box behind.

const test = require('node:test')
const assert = require('node:assert/strict')
const { openSandbox, procsMatching, sleep } = require('./helpers')

test('a process the workload left running is gone before the result: it never writes after it', async (t) => {
  const sbx = await openSandbox(t)
  for (let i = 0; i < 5; i++) {
    const r = await sbx.runCode(
      `(sleep 0.2; echo late > /workspace/late-${i}.txt) & (sleep 0.2; echo late-out) & echo hi`,
      { language: 'bash' },
    )
    assert.equal(r.stdout, 'hi\n', `call ${i}`)
    assert.equal(r.exitCode, 0)
  }
  await sleep(600)
  const left = (await sbx.listFiles()).filter((f) => f.startsWith('late-'))
  assert.deepEqual(left, [], 'a survivor wrote into the workspace after the result')
})

test('files the interpreter flushes only at exit are in the workspace and in files', async (t) => {
  const sbx = await openSandbox(t)
  for (let i = 0; i < 5; i++) {
    // Never closed: CPython flushes it as the interpreter finalizes, after the cell.
    const r = await sbx.runCode(`f = open('unclosed-${i}.txt', 'w')\nf.write('x' * 100000)\nprint('done')`)
    assert.equal(r.stdout, 'done\n')
    assert.equal((await sbx.readFile(`unclosed-${i}.txt`)).length, 100000, `call ${i}`)
    assert.ok(
      r.files.some((f) => (typeof f === 'string' ? f : f.path) === `unclosed-${i}.txt`),
      JSON.stringify(r.files),
    )
  }
})

test('output written at interpreter exit (atexit) is in the result', async (t) => {
  const sbx = await openSandbox(t)
  const r = await sbx.runCode("import atexit, sys\natexit.register(lambda: print('bye'))\nsys.exit(4)")
  assert.equal(r.stdout, 'bye\n')
  assert.equal(r.exitCode, 4)
  assert.equal(r.fault, null)
})

test("the cell's own reference cycles are still collected at a normal exit: their finalizers run and their files flush", async (t) => {
  // What the interpreter held before the cell is kept out of the exit's collection (the runner
  // freezes it); what the cell made is not.
  const sbx = await openSandbox(t)
  const code = [
    'class Node:',
    '    def __del__(self):',
    "        print('finalized', flush=True)",
    'a, b = Node(), Node()',
    'a.peer, b.peer = b, a',
    "a.log = open('cycle.txt', 'w')",
    "a.log.write('y' * 50000)",
    'del a, b',
    "print('done')",
  ].join('\n')
  const r = await sbx.runCode(code)
  assert.equal(r.exitCode, 0, r.stderr)
  assert.equal(r.stdout, 'done\nfinalized\nfinalized\n')
  assert.equal((await sbx.readFile('cycle.txt')).length, 50000)
})

test('exit codes, signal deaths and their faults are what kern reports', async (t) => {
  const sbx = await openSandbox(t)
  for (const [code, want] of [
    ['exit 0', 0],
    ['exit 7', 7],
    ['exit 127', 127],
    ['exit 130', 130],
  ]) {
    const r = await sbx.runCode(code, { language: 'bash' })
    assert.equal(r.exitCode, want, code)
    assert.equal(r.fault, null, code)
  }
  // PID 1 ignores signals sent from inside its box: the victim is a child that its shell reports.
  const killed = await sbx.run(['sh', '-c', 'sh -c "kill -9 \\$\\$"; exit $?'])
  assert.equal(killed.exitCode, 137)
  assert.equal(killed.fault && killed.fault.type, 'killed')
})

test('what kern writes after a failing box (a note on a host without a uid range) is in every failing call or none', async (t) => {
  // kern prints its uid-range note after it reaps a box that exited non-zero; a call answered at
  // the workload's exit must still carry it, every time, on cold and ready boxes alike.
  const cold = await openSandbox(t)
  const warm = await openSandbox(t, { prewarm: 1 })
  const seen = { code: new Set(), run: new Set() }
  for (let i = 0; i < 8; i++) {
    for (const sbx of [cold, warm]) {
      const a = await sbx.runCode('import sys\nprint("e", file=sys.stderr)\nsys.exit(3)')
      const b = await sbx.run(['sh', '-c', 'echo e >&2; exit 4'])
      assert.deepEqual([a.exitCode, b.exitCode], [3, 4])
      seen.code.add(a.stderr)
      seen.run.add(b.stderr)
    }
  }
  assert.equal(seen.code.size, 1, [...seen.code].join('\n---\n'))
  assert.equal(seen.run.size, 1, [...seen.run].join('\n---\n'))
})

test('close() waits for every box to be gone, teardowns still running included', async (t) => {
  const sbx = await openSandbox(t)
  const ws = sbx.workspacePath
  for (let round = 0; round < 3; round++) {
    await Promise.all([sbx.run(['true']), sbx.runCode('x = 1'), sbx.runCode('echo hi', { language: 'bash' })])
  }
  await sbx.close()
  // Every kern of the session has the workspace in its argv.
  assert.deepEqual(procsMatching(ws), [], 'a kern of the session outlived close()')
})
