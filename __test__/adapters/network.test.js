'use strict'
// Each adapter's sandbox takes kern-sandbox's egress policy (issue 37), `network` and `onRequest`,
// and hands it to the Sandbox and machine it opens: a plain HTTP server on 127.0.0.1, named
// `api.test` by the policy's `hosts`; curl in the machine gets the header a rule sets (the proxy
// adds it on the host), a host not allowed gets 403, and onRequest hears of both. AI SDK's session
// runs on a machine the caller opens, so its policy is that machine's. Skipped until the core
// takes a policy (the issue 37 wiring), on the real machine only (the fake one runs nothing).

const test = require('node:test')
const assert = require('node:assert/strict')
const http = require('node:http')
const { kern, waitFor } = require('../helpers.js')
const { Machine } = require('../../lib/machine.js')
const { KernSandboxClient } = require('../../lib/openai-agents/entry.js')
const { KernSandbox } = require('../../lib/mastra/entry.js')
const { KernSandboxBackend } = require('../../lib/langchain/entry.js')
const { createSandboxSession } = require('../../lib/ai/entry.js')

const SECRET = 'Bearer adapter-s3cret'
const NO_POLICIES =
  typeof Machine.prototype.updateNetwork !== 'function'
    ? 'the core takes no egress policy yet (Machine#updateNetwork, the issue 37 wiring)'
    : false

let server
let port
test.before(async () => {
  if (NO_POLICIES) return
  server = http.createServer((req, res) =>
    res.end(`${req.headers.host.split(':')[0]} auth=${req.headers.authorization ?? '-'}`),
  )
  await new Promise((r) => server.listen(0, '127.0.0.1', r))
  port = server.address().port
})
test.after(() => {
  server?.closeAllConnections()
  server?.close()
})

function policy() {
  return {
    allowOut: ['api.test'],
    hosts: { 'api.test': '127.0.0.1', 'other.test': '127.0.0.1' },
    rules: { 'api.test': [{ transform: { headers: { Authorization: SECRET } } }] },
  }
}

/** curl through the machine's proxy: the allowed host with its header, the other refused; events. */
async function checkMachine(machine, events) {
  const get = (host) => machine.exec(['curl', '-sS', '--max-time', '20', `http://${host}:${port}/`])
  const ok = await get('api.test')
  assert.equal(ok.stdout, `api.test auth=${SECRET}`, ok.stderr)
  const refused = await get('other.test')
  assert.match(refused.stdout, /other\.test:\d+ refused: not in allowOut/)
  assert.deepEqual(machine.network, policy())
  // Reported once the proxy is done with each request: possibly after curl has its answer.
  const heard = () =>
    events.some((e) => e.host === 'api.test' && e.allowed) && events.some((e) => e.host === 'other.test' && !e.allowed)
  assert.ok(await waitFor(heard, 10_000), JSON.stringify(events))
  assert.ok(!JSON.stringify(events).includes('s3cret'))
}

test(
  'openai-agents: KernSandboxClient({ network, onRequest }); the policy stays out of serialized state',
  { skip: NO_POLICIES },
  async () => {
    const events = []
    const client = new KernSandboxClient({ network: policy(), onRequest: (e) => events.push(e) })
    const { Manifest } = require('@openai/agents-core/sandbox')
    const s = await client.create({ manifest: new Manifest({ entries: {} }) })
    try {
      await checkMachine(s.machine, events)
      const json = JSON.stringify(await client.serializeSessionState(s.state))
      assert.ok(!json.includes('s3cret'), json)
    } finally {
      await s.close()
    }
  },
)

test('mastra: new KernSandbox({ network, onRequest })', { skip: NO_POLICIES }, async () => {
  const events = []
  const sandbox = new KernSandbox({ network: policy(), onRequest: (e) => events.push(e) })
  await sandbox.start()
  try {
    await checkMachine(sandbox.machine, events)
  } finally {
    await sandbox._destroy()
  }
})

test('langchain: KernSandboxBackend.create({ network, onRequest })', { skip: NO_POLICIES }, async () => {
  const events = []
  const backend = await KernSandboxBackend.create({ network: policy(), onRequest: (e) => events.push(e) })
  try {
    await checkMachine(backend.machine, events)
  } finally {
    await backend.close()
  }
})

test(
  "ai: createSandboxSession on a machine opened with a policy: the session's commands use it",
  { skip: NO_POLICIES },
  async () => {
    const events = []
    const sbx = await new kern.Sandbox().open()
    try {
      const machine = await sbx.machine({ network: policy(), onRequest: (e) => events.push(e) })
      const session = createSandboxSession(machine)
      assert.equal(session.machine, machine)
      await checkMachine(session.machine, events)
    } finally {
      await sbx.close()
    }
  },
)
