'use strict'
// Per-call options of runCode()/run(): timeoutS and the output callbacks, over the session's.

const test = require('node:test')
const assert = require('node:assert/strict')
const { kern, openSandbox } = require('./helpers')

const { Sandbox, SandboxError } = kern

test('per-call timeoutS overrides the session deadline for that call only', async (t) => {
  const sbx = await openSandbox(t, { timeoutS: 30 })
  const t0 = Date.now()
  const r = await sbx.runCode('while True: pass', { timeoutS: 1 })
  assert.equal(r.fault && r.fault.type, 'timeout')
  assert.match(r.fault.message, /\b1\s?s/)
  assert.ok(Date.now() - t0 < 5000)
  const ok = await sbx.run(['sh', '-c', 'sleep 1.5; echo done'])
  assert.equal(ok.fault, null, 'the session deadline (30 s) applies again')
  assert.equal(ok.stdout, 'done\n')
  const longer = await openSandbox(t, { timeoutS: 1 })
  const l = await longer.run(['sh', '-c', 'sleep 2; echo later'], { timeoutS: 10 })
  assert.equal(l.fault, null)
  assert.equal(l.stdout, 'later\n')
})

test('per-call timeoutS is validated', async (t) => {
  const sbx = await openSandbox(t)
  for (const t of [0, -1, NaN, 'x']) {
    await assert.rejects(sbx.runCode('print(1)', { timeoutS: t }), SandboxError, `timeoutS ${String(t)}`)
    await assert.rejects(sbx.run(['true'], { timeoutS: t }), SandboxError, `run timeoutS ${String(t)}`)
  }
})

test('per-call onStdout/onStderr override the session callbacks; null disables them', async (t) => {
  const session = { out: [], err: [] }
  const call = { out: [], err: [] }
  const sbx = await openSandbox(t, {
    onStdout: (c) => session.out.push(c),
    onStderr: (c) => session.err.push(c),
  })
  const code = 'import sys\nprint("o", flush=True)\nprint("e", file=sys.stderr, flush=True)'
  const r1 = await sbx.runCode(code, { onStdout: (c) => call.out.push(c), onStderr: (c) => call.err.push(c) })
  assert.equal(Buffer.concat(call.out).toString(), r1.stdout)
  assert.equal(Buffer.concat(call.err).toString(), r1.stderr)
  assert.equal(session.out.length + session.err.length, 0, 'session callbacks not called')
  await sbx.runCode(code, { onStdout: null, onStderr: null })
  assert.equal(session.out.length + session.err.length, 0, 'null disables the session callbacks')
  const r3 = await sbx.run(['sh', '-c', 'echo plain'], { onStdout: null })
  assert.equal(r3.stdout, 'plain\n')
  assert.equal(session.out.length, 0)
  assert.ok(session.err.length > 0 || r3.stderr === '', 'onStderr (not overridden) still streams')
  const r4 = await sbx.runCode(code)
  assert.equal(Buffer.concat(session.out).toString(), r4.stdout, 'session callback back for the next call')
})

test('a non-function callback is refused', async (t) => {
  assert.throws(() => new Sandbox({ onStdout: 'nope' }), TypeError)
  const sbx = await openSandbox(t)
  await assert.rejects(sbx.runCode('print(1)', { onStdout: 42 }), TypeError)
})
