'use strict'
// kern-sandbox/e2b's sandbox.pty: a login shell on a pseudo-terminal of the sandbox's machine,
// typed into with sendInput, resized, connected to again, killed.

const test = require('node:test')
const assert = require('node:assert/strict')
const { waitFor } = require('./helpers')
const { Sandbox, InvalidArgumentError, NotFoundError } = require('kern-sandbox/e2b')

let sbx
test.before(async () => {
  sbx = await Sandbox.create()
})
test.after(async () => {
  await sbx.kill()
})

const text = (chunks) => Buffer.concat(chunks.map((c) => Buffer.from(c))).toString()

test('create: a shell on a terminal; typed input runs, output arrives as bytes; exit ends it', async () => {
  const chunks = []
  const h = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => chunks.push(d), timeoutMs: 0 })
  assert.ok(Number.isInteger(h.pid))
  await sbx.pty.sendInput(h.pid, new TextEncoder().encode('echo "term=$TERM" $((6 * 7))\n'))
  assert.ok(await waitFor(() => /term=xterm-256color 42/.test(text(chunks)), 10_000), text(chunks))
  assert.ok(chunks.every((c) => c instanceof Uint8Array))
  assert.ok(
    (await sbx.commands.list()).some((p) => p.pid === h.pid),
    'a PTY is listed with the commands',
  )
  await sbx.pty.resize(h.pid, { cols: 100, rows: 30 })
  await sbx.pty.sendInput(h.pid, new TextEncoder().encode('exit 3\n'))
  await assert.rejects(h.wait(), (e) => e.exitCode === 3)
  assert.equal(h.stdout, '', "a PTY's output goes to onData only, as in E2B")
})

test('connect gets the output from then on; kill ends it, false for a pid that is gone', async () => {
  const h = await sbx.pty.create({ cols: 80, rows: 24, onData: () => {} })
  const later = []
  const c = await sbx.pty.connect(h.pid, { onData: (d) => later.push(d) })
  await sbx.pty.sendInput(h.pid, new TextEncoder().encode('echo again-$((1 + 1))\n'))
  assert.ok(await waitFor(() => text(later).includes('again-2'), 10_000), text(later))
  await c.disconnect()
  assert.equal(await sbx.pty.kill(h.pid), true)
  await assert.rejects(h.wait())
  assert.equal(await sbx.pty.kill(h.pid), false)
})

test('bad sizes, data and pids reject, naming the value', async () => {
  await assert.rejects(
    sbx.pty.create({ cols: 0, rows: 24, onData: () => {} }),
    (e) => e instanceof InvalidArgumentError && /cols/.test(e.message),
  )
  await assert.rejects(
    sbx.pty.create({ cols: 80, rows: 1e6, onData: () => {} }),
    (e) => e instanceof InvalidArgumentError && /1000000/.test(e.message),
  )
  await assert.rejects(sbx.pty.sendInput(1, 'text, not bytes'), InvalidArgumentError)
  await assert.rejects(sbx.pty.resize(999_999, { cols: 10, rows: 10 }), NotFoundError)
  await assert.rejects(
    sbx.pty.resize(1.5, { cols: 10, rows: 10 }),
    (e) => e instanceof InvalidArgumentError && /1\.5/.test(e.message),
  )
})
