'use strict'
// The knobs end to end: KERN_MCP_KERNEL=0 gives a fresh box per call, KERN_MCP_SETUP runs once
// with the network, and no other box has it.

const test = require('node:test')
const assert = require('node:assert/strict')
const { connect, textOf, run, helpers } = require('./client.js')

test('kernel off, setup on: a fresh box per call, setup ran once, only the setup box had the network', { skip: helpers.STANDIN_ONLY }, async () => {
  const rec = helpers.recordingKern()
  const s = await connect({ env: { KERN_BIN: rec.bin }, args: ['--kernel', '0', '--setup', 'echo ready > setup-done.txt'] })
  try {
    const a = await run(s.client, 'x = 1\nprint("set")')
    assert.equal(a.isError, false, textOf(a))
    assert.equal(a.structuredContent.warmKernel, false)
    const b = await run(s.client, 'print(x)')
    assert.equal(b.isError, true)
    assert.match(textOf(b), /NameError/)
    await run(s.client, 'echo hi', { language: 'bash' })
    const f = await s.client.callTool({ name: 'read_file', arguments: { path: 'setup-done.txt' } })
    assert.equal(textOf(f), 'ready\n')
    const boxes = rec.boxCalls()
    assert.equal(boxes.length, 4, boxes.map((a) => a.join(' ')).join('\n'))
    const withNet = boxes.filter((argv) => argv.includes('--net'))
    assert.equal(withNet.length, 1)
    assert.ok(withNet[0].join(' ').includes('setup-done.txt'))
  } finally {
    await s.close()
  }
})
