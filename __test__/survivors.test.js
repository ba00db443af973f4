'use strict'
// A teardown that cannot confirm the box is gone says so in the fault, never claims a clean end.

const test = require('node:test')
const assert = require('node:assert/strict')
const { fakeKern, openSandbox } = require('./helpers')

test('no survivors, as data: a box kern still lists after the teardown is reported in the fault', async (t) => {
  const fake = fakeKern({ sleepMs: 60_000, psLists: true })
  const sbx = await openSandbox(t, { timeoutS: 1 }, { bin: fake.bin })
  const r = await sbx.run(['true'])
  assert.equal(r.fault && r.fault.type, 'timeout')
  assert.match(r.fault.message, /surviv|still/i, r.fault.message)
  const clean = fakeKern({ sleepMs: 60_000 })
  const ok = await openSandbox(t, { timeoutS: 1 }, { bin: clean.bin })
  const r2 = await ok.run(['true'])
  assert.equal(r2.fault && r2.fault.type, 'timeout')
  assert.doesNotMatch(r2.fault.message, /surviv|still/i, 'nothing survived: the message does not claim so')
})

test('no survivors, as data: a kern ps that does not answer is not taken as "nothing survived"', async (t) => {
  // The box is still listed, but `kern ps` answers slowly (a loaded machine): the binding must not
  // report a clean teardown it could not confirm.
  const fake = fakeKern({ sleepMs: 60_000, psLists: true, psDelayMs: 1000 })
  const sbx = await openSandbox(t, { timeoutS: 1 }, { bin: fake.bin })
  const r = await sbx.run(['true'])
  assert.equal(r.fault && r.fault.type, 'timeout')
  assert.match(r.fault.message, /surviv|still|confirm|unknown|could not/i, r.fault.message)
})
