'use strict'
// kern-sandbox/e2b's sandbox-level API over its machine: getHost(port) for a server in the sandbox,
// getMetrics, getInfo, Sandbox.list/connect/kill; and code contexts that share the machine with
// commands (processes, /tmp, loopback).

const test = require('node:test')
const assert = require('node:assert/strict')
const { waitFor } = require('./helpers')
const { Sandbox, InvalidArgumentError, SandboxNotFoundError, SandboxError } = require('kern-sandbox/e2b')

let sbx
test.before(async () => {
  sbx = await Sandbox.create({ metadata: { suite: 'e2b-sandbox' } })
})
test.after(async () => {
  await sbx.kill()
})

/** The body at `url` once something answers there (a server starting in the background). */
async function fetchWhenUp(url) {
  let body = null
  await waitFor(async () => {
    body = await fetch(url)
      .then((r) => (r.ok ? r.text() : null))
      .catch(() => null)
    return body !== null
  }, 15_000)
  return body
}

test('getHost(port): a host:port the host fetches a server in the sandbox through', async () => {
  const port = 20_000 + Math.floor(Math.random() * 20_000)
  await sbx.files.write('site/index.html', '<h1>from the sandbox</h1>')
  const server = await sbx.commands.run(`python3 -m http.server ${port} --bind 127.0.0.1`, {
    background: true,
    cwd: '/home/user/site',
    timeoutMs: 0,
  })
  const host = sbx.getHost(port)
  assert.match(host, /^127\.0\.0\.1:\d+$/)
  assert.equal(sbx.getHost(port), host, 'one host address per port')
  assert.equal(await fetchWhenUp(`http://${host}/index.html`), '<h1>from the sandbox</h1>')
  await server.kill()
  for (const bad of [0, 65_536, 1.5, '80']) {
    assert.throws(
      () => sbx.getHost(bad),
      (e) => e instanceof InvalidArgumentError && e.message.includes(String(bad)),
    )
  }
})

test("getMetrics() and getInfo(): E2B's fields", async () => {
  const [m] = await sbx.getMetrics()
  for (const k of ['cpuUsedPct', 'cpuCount', 'memUsed', 'memTotal', 'memCache', 'diskUsed', 'diskTotal']) {
    assert.equal(typeof m[k], 'number', k)
  }
  assert.ok(m.timestamp instanceof Date)
  assert.ok(m.memTotal > 0 && m.cpuCount > 0)
  const info = await sbx.getInfo()
  assert.equal(info.sandboxId, sbx.sandboxId)
  assert.equal(info.state, 'running')
  assert.deepEqual(info.metadata, { suite: 'e2b-sandbox' })
  // E2B's default is the internet (through the egress proxy) once machines take a policy; before
  // that the sandbox is offline.
  const policies = typeof require('../lib/machine.js').Machine.prototype.updateNetwork === 'function'
  assert.equal(info.allowInternetAccess, policies)
  assert.ok(info.endAt > info.startedAt)
  assert.ok(info.cpuCount > 0 && info.memoryMB > 0)
})

test('Sandbox.list() pages through the live sandboxes of this process; connect() finds one', async () => {
  const other = await Sandbox.create({ metadata: { suite: 'other' } })
  try {
    const pages = Sandbox.list({ query: { metadata: { suite: 'other' } } })
    assert.equal(pages.hasNext, true)
    const items = await pages.nextItems()
    assert.deepEqual(
      items.map((i) => i.sandboxId),
      [other.sandboxId],
    )
    assert.equal(pages.hasNext, false)
    await assert.rejects(pages.nextItems())
    const all = await Sandbox.list().nextItems()
    assert.ok(all.some((i) => i.sandboxId === sbx.sandboxId) && all.some((i) => i.sandboxId === other.sandboxId))
    const paged = Sandbox.list({ limit: 1 })
    assert.equal((await paged.nextItems()).length, 1)
    assert.equal(paged.hasNext, true)
    assert.equal(await Sandbox.connect(other.sandboxId), other)
    assert.equal(await other.connect(), other)
  } finally {
    assert.equal(await Sandbox.kill(other.sandboxId), true)
  }
  assert.ok(!(await Sandbox.list().nextItems()).some((i) => i.sandboxId === other.sandboxId))
  await assert.rejects(Sandbox.connect(other.sandboxId), SandboxNotFoundError)
  assert.equal(await other.isRunning(), false)
  assert.throws(() => other.getHost(8080), SandboxError)
})

test('a cell and a command share the machine: /tmp, processes and loopback', async () => {
  await sbx.runCode('open("/tmp/from-cell.txt", "w").write("cell wrote this")')
  assert.equal((await sbx.commands.run('cat /tmp/from-cell.txt')).stdout, 'cell wrote this')
  const port = 20_000 + Math.floor(Math.random() * 20_000)
  await sbx.runCode(
    [
      'import http.server, threading',
      `srv = http.server.HTTPServer(("127.0.0.1", ${port}), http.server.SimpleHTTPRequestHandler)`,
      'threading.Thread(target=srv.serve_forever, daemon=True).start()',
    ].join('\n'),
  )
  await sbx.files.write('served.txt', 'served by a cell')
  const r = await sbx.commands.run(
    `python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:${port}/served.txt').read().decode())"`,
  )
  assert.equal(r.stdout, 'served by a cell\n')
  const h = await sbx.commands.run('sleep 30', { background: true })
  const ex = await sbx.runCode(`import os\nos.kill(${h.pid}, 0) is None`)
  assert.equal(ex.text, 'True', 'the cell sees the command by its pid')
  await h.kill()
  await sbx.runCode('srv.shutdown()')
})
