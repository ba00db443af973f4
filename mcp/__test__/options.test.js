'use strict'
// The knobs end to end: KERN_MCP_KERNEL=0 gives a fresh box per call, KERN_MCP_SETUP runs once
// with the network, and no other box has it.

const test = require('node:test')
const assert = require('node:assert/strict')
const { connect, textOf, run, helpers } = require('./client.js')

// On the stand-in, kern's argv is recorded too (which box had the network).
const rec = helpers.realKern ? null : helpers.recordingKern()
let s

test.before(async () => {
  s = await connect({
    env: { KERN_BIN: rec ? rec.bin : helpers.kernBin },
    args: ['--kernel', '0', '--setup', 'echo ready > setup-done.txt'],
  })
})
test.after(async () => {
  await s.close()
})

test('--kernel 0: a fresh box per call, variables do not persist', async () => {
  const a = await run(s.client, 'x = 1\nprint("set")')
  assert.equal(a.isError, false, textOf(a))
  assert.equal(a.structuredContent.warmKernel, false)
  const b = await run(s.client, 'print(x)')
  assert.equal(b.isError, true)
  assert.match(textOf(b), /NameError/)
  assert.match(textOf(b), /Traceback/)
  // TypeScript in a fresh box too: the library strips the types, whatever the image's node.
  const t = await run(s.client, 'const n: number = 6 * 7\nn', { language: 'typescript' })
  assert.equal(t.isError, false, textOf(t))
  assert.equal(t.structuredContent.warmKernel, false)
  assert.match(textOf(t), /^Out: 42$/m)
})

test('--setup ran once, before the first call', async () => {
  const f = await s.client.callTool({ name: 'read_file', arguments: { path: 'setup-done.txt' } })
  assert.equal(textOf(f), 'ready\n')
})

test('only the setup box had the network', { skip: helpers.STANDIN_ONLY }, async () => {
  await run(s.client, 'echo hi', { language: 'bash' })
  const boxes = rec.boxCalls()
  assert.ok(boxes.length >= 4, boxes.map((a) => a.join(' ')).join('\n'))
  const withNet = boxes.filter((argv) => argv.includes('--net'))
  assert.equal(withNet.length, 1)
  assert.ok(withNet[0].join(' ').includes('setup-done.txt'))
})
