'use strict'
// kern-sandbox/openai-agents: agents-core's run() drives a SandboxAgent with the default
// capabilities on KernSandboxClient, with a scripted model (agents-core/testing), offline; then
// the session's own members.

const test = require('node:test')
const assert = require('node:assert/strict')
const { eachMachine, freePort, fetchWhenUp } = require('./harness.js')
const { run, tool, setTracingDisabled } = require('@openai/agents-core')
const { SandboxAgent, Manifest } = require('@openai/agents-core/sandbox')
const { ScriptedModel, functionCall, assistantMessage, modelResponder } = require('@openai/agents-core/testing')
const { KernSandboxClient } = require('../../lib/openai-agents/entry.js')

setTracingDisabled(true)

/** The output string the model got for its call `callId`, from the items of a run. */
function outputOf(result, callId) {
  const item = result.newItems.find((i) => i.type === 'tool_call_output_item' && i.rawItem.callId === callId)
  assert.ok(item, `no output for ${callId}`)
  const out = item.output ?? item.rawItem.output
  return typeof out === 'string' ? out : JSON.stringify(out)
}

/** The apply_patch call a Responses model makes (the filesystem capability's hosted tool). */
function patchCall(callId, operation) {
  return { type: 'apply_patch_call', callId, status: 'completed', operation }
}

/** A client that remembers the sessions it made, for the test to look at. */
function recordingClient(options) {
  const client = new KernSandboxClient(options)
  const sessions = []
  const create = client.create.bind(client)
  client.create = async (...a) => {
    const s = await create(...a)
    sessions.push(s)
    return s
  }
  return { client, sessions }
}

eachMachine('openai-agents: run() drives a SandboxAgent on KernSandboxClient', () => {
  test.it('writes a file, runs commands, serves it on an exposed port, reads it back', async () => {
    const port = await freePort()
    const { client, sessions } = recordingClient()
    const httpGet = tool({
      name: 'http_get',
      description: 'GET a path from a port of the sandbox, through the port it is exposed on',
      parameters: {
        type: 'object',
        properties: { port: { type: 'number' }, path: { type: 'string' } },
        required: ['port', 'path'],
        additionalProperties: false,
      },
      strict: true,
      execute: async ({ port, path }) => {
        const endpoint = await sessions[0].resolveExposedPort(port)
        const res = await fetchWhenUp(`${endpoint.url}${path}`)
        return `${res.status} ${await res.text()}`
      },
    })
    let serverSession
    const model = new ScriptedModel([
      [
        patchCall('patch', {
          type: 'create_file',
          path: 'site/index.html',
          diff: '+hello from the agent\n+second line\n',
        }),
      ],
      [functionCall('exec_command', { cmd: 'ls site; cat site/index.html' }, { callId: 'cat' })],
      [
        functionCall(
          'exec_command',
          { cmd: `cd site && exec python3 -u -m http.server ${port} --bind 127.0.0.1`, yield_time_ms: 300 },
          { callId: 'serve' },
        ),
      ],
      [functionCall('http_get', { port, path: '/index.html' }, { callId: 'get' })],
      modelResponder(({ request }) => {
        const served = JSON.stringify(request.input)
        serverSession = Number(/Process running with session ID (\d+)/.exec(served)?.[1])
        return [
          functionCall('write_stdin', { session_id: serverSession, chars: '', yield_time_ms: 300 }, { callId: 'poll' }),
        ]
      }),
      [patchCall('edit', { type: 'update_file', path: 'site/index.html', diff: '@@\n-second line\n+changed line\n' })],
      [functionCall('exec_command', { cmd: 'cat site/index.html' }, { callId: 'reread' })],
      [assistantMessage('served and read back')],
    ])
    const agent = new SandboxAgent({ name: 'builder', instructions: 'Build a site.', model, tools: [httpGet] })
    const result = await run(agent, 'make a site and serve it', { sandbox: { client } })
    assert.equal(result.finalOutput, 'served and read back')
    assert.match(outputOf(result, 'patch'), /Created site\/index\.html/)
    assert.match(
      outputOf(result, 'cat'),
      /Process exited with code 0[\s\S]*index\.html\nhello from the agent\nsecond line/,
    )
    assert.match(outputOf(result, 'serve'), /Process running with session ID \d+/)
    assert.match(outputOf(result, 'get'), /^200 hello from the agent\nsecond line\n?$/)
    assert.ok(serverSession > 0)
    assert.match(outputOf(result, 'poll'), /GET \/index\.html/)
    assert.match(outputOf(result, 'reread'), /hello from the agent\nchanged line/)
    assert.equal(sessions.length, 1)
    // The run owned the session: it is closed with the run, and its machine with it.
    assert.equal(await sessions[0].running(), false)
    assert.equal(sessions[0].machine.alive, false)
  })
})

eachMachine('openai-agents: the session', () => {
  let client
  let s
  test.before(async () => {
    client = new KernSandboxClient()
    s = await client.create({
      manifest: new Manifest({
        entries: {
          'data/in.txt': { type: 'file', content: 'from the manifest\n' },
          tools: { type: 'dir', children: {} },
        },
        environment: { GREETING: 'hola' },
      }),
    })
  })
  test.after(() => s?.close())

  test.it('materializes the manifest; environment reaches commands', async () => {
    assert.equal(Buffer.from(await s.readFile({ path: 'data/in.txt' })).toString(), 'from the manifest\n')
    assert.equal(await s.directoryExists('tools'), true)
    const r = await s.exec({ cmd: 'echo $GREETING; pwd', login: false })
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, `hola\n${s.state.manifest.root}\n`)
  })

  test.it('exec: exit codes, stderr, workdir; a running command yields a session to poll', async () => {
    const bad = await s.exec({ cmd: 'echo out; echo err >&2; exit 4', workdir: 'data' })
    assert.equal(bad.exitCode, 4)
    assert.equal(bad.stdout, 'out\n')
    assert.equal(bad.stderr, 'err\n')
    const slow = await s.exec({ cmd: 'echo first; sleep 1; echo second', yieldTimeMs: 100 })
    assert.equal(slow.exitCode, undefined)
    assert.equal(slow.output, 'first\n')
    const later = await s.writeStdin({ sessionId: slow.sessionId, yieldTimeMs: 5000 })
    assert.match(later, /Process exited with code 0/)
    assert.match(later, /second/)
    await assert.rejects(s.writeStdin({ sessionId: slow.sessionId }), /no running exec session/)
  })

  test.it('tty: write_stdin types into a terminal, ^C interrupts', async () => {
    const r = await s.exec({ cmd: 'cat', tty: true, yieldTimeMs: 200 })
    assert.ok(r.sessionId)
    const echoed = await s.writeStdin({ sessionId: r.sessionId, chars: 'typed line\n', yieldTimeMs: 500 })
    assert.match(echoed, /typed line/)
    const stopped = await s.writeStdin({ sessionId: r.sessionId, chars: '\u0003', yieldTimeMs: 3000 })
    assert.match(stopped, /Process exited with code/)
    const plain = await s.exec({ cmd: 'sleep 5', yieldTimeMs: 50 })
    await assert.rejects(s.writeStdin({ sessionId: plain.sessionId, chars: 'x' }), /tty=true/)
  })

  test.it('files: readFile, listDir, pathExists, viewImage', async () => {
    await assert.rejects(s.readFile({ path: 'nope.txt' }), (e) => e.code === 'workspace_read_not_found')
    await assert.rejects(s.readFile({ path: 'data/in.txt', maxBytes: 3 }))
    const list = await s.listDir({ path: '.' })
    assert.deepEqual(list.map((e) => [e.name, e.type]).sort(), [
      ['data', 'dir'],
      ['tools', 'dir'],
    ])
    assert.equal(await s.pathExists('data/in.txt'), true)
    assert.equal(await s.pathExists('data/none'), false)
    const png = Buffer.from(
      'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
      'base64',
    )
    await s.createEditor().createFile({ type: 'create_file', path: 'img/placeholder.txt', diff: '+x\n' })
    await s.machine.writeFile(`${s.state.manifest.root}/img/dot.png`, png)
    const image = await s.viewImage({ path: 'img/dot.png' })
    assert.equal(image.type, 'image')
    assert.match(JSON.stringify(image), /image\/png/)
    await assert.rejects(s.viewImage({ path: 'img/none.png' }), /not found/)
  })

  test.it('editor: create refuses an existing file, update moves, delete', async () => {
    const ed = s.createEditor()
    assert.equal(
      (await ed.createFile({ type: 'create_file', path: 'e/a.txt', diff: '+one\n+two\n' })).status,
      'completed',
    )
    assert.equal((await ed.createFile({ type: 'create_file', path: 'e/a.txt', diff: '+x\n' })).status, 'failed')
    await ed.updateFile({ type: 'update_file', path: 'e/a.txt', diff: '@@\n one\n-two\n+three\n', moveTo: 'e/b.txt' })
    assert.equal(await s.pathExists('e/a.txt'), false)
    assert.match(Buffer.from(await s.readFile({ path: 'e/b.txt' })).toString(), /^one\nthree\n?$/)
    await ed.deleteFile({ type: 'delete_file', path: 'e/b.txt' })
    assert.equal(await s.pathExists('e/b.txt'), false)
    await assert.rejects(ed.deleteFile({ type: 'delete_file', path: 'e/b.txt' }), /not found/)
  })

  test.it('persistWorkspace and hydrateWorkspace round-trip; a hostile archive is refused', async () => {
    const archive = await s.persistWorkspace()
    assert.ok(archive.length > 0)
    await s.exec({ cmd: 'rm -rf data' })
    await s.hydrateWorkspace(archive)
    assert.equal(Buffer.from(await s.readFile({ path: 'data/in.txt' })).toString(), 'from the manifest\n')
    await assert.rejects(s.hydrateWorkspace(archive, { archiveLimits: { maxMembers: 1 } }), /members/)
    const evil = await s.exec({
      cmd: 'cd /tmp && rm -rf evil && mkdir evil && ln -s /etc evil/out && tar -cf evil.tar -C evil . && base64 -w0 evil.tar',
      login: false,
    })
    await assert.rejects(s.hydrateWorkspace(Buffer.from(evil.stdout, 'base64')), /outside the workspace/)
  })

  test.it('state serializes to JSON and resumes: the live session, or a fresh machine', async () => {
    const record = await client.serializeSessionState(s.state)
    const json = JSON.parse(JSON.stringify(record))
    const state = await client.deserializeSessionState(json)
    assert.equal(state.manifest.root, s.state.manifest.root)
    assert.equal(await client.resume(state), s, 'same process, still running: the same session')
    const other = new KernSandboxClient()
    const copy = await other.deserializeSessionState(json)
    copy.sessionKey = 'elsewhere'
    const fresh = await other.resume(copy)
    try {
      assert.notEqual(fresh, s)
      assert.equal(Buffer.from(await fresh.readFile({ path: 'data/in.txt' })).toString(), 'from the manifest\n')
    } finally {
      await other.delete(fresh.state)
    }
    assert.equal(await fresh.running(), false)
  })

  test.it('the session env stays out of serialized state; a resumed session gets it from the client', async () => {
    const secretClient = new KernSandboxClient({ env: { API_TOKEN: 'hunter2' } })
    const c = await secretClient.create({ manifest: new Manifest() })
    try {
      assert.equal((await c.exec({ cmd: 'echo $API_TOKEN', login: false })).stdout, 'hunter2\n')
      const json = JSON.stringify(await secretClient.serializeSessionState(c.state))
      assert.ok(!json.includes('hunter2'), json)
      const state = await secretClient.deserializeSessionState(JSON.parse(json))
      state.sessionKey = 'another'
      const resumed = await secretClient.resume(state)
      try {
        assert.equal((await resumed.exec({ cmd: 'echo $API_TOKEN', login: false })).stdout, 'hunter2\n')
      } finally {
        await resumed.close()
      }
    } finally {
      await c.close()
    }
  })

  test.it('resolveExposedPort: a loopback URL on the host, recorded in the state', async () => {
    const port = await freePort()
    const e = await s.resolveExposedPort(port)
    assert.equal(e.host, '127.0.0.1')
    assert.match(e.url, /^http:\/\/127\.0\.0\.1:\d+$/)
    assert.deepEqual(await s.resolveExposedPort(port), e)
    await assert.rejects(s.resolveExposedPort(0))
  })

  test.it('close ends running commands and the machine', async () => {
    const c = await client.create({ manifest: new Manifest() })
    const r = await c.exec({ cmd: 'sleep 300', yieldTimeMs: 50 })
    assert.ok(r.sessionId)
    await c.close()
    await c.close()
    assert.equal(c.machine.alive, false)
    await assert.rejects(c.exec({ cmd: 'true' }), /closed/)
  })
})
