'use strict'
// The server's parts on their own: the knobs, kern's notes, reply shaping and bounds, and how
// JavaScript picks a warm JS kernel or a one-shot box (against fake sessions, since the library's
// JS kernel lands later).

const test = require('node:test')
const assert = require('node:assert/strict')
const cp = require('node:child_process')
const { SandboxError } = require('kern-sandbox')
const { loadConfig, ConfigError, KNOBS } = require('../lib/config.js')
const { NoteLog } = require('../lib/notes.js')
const { runCodeReply } = require('../lib/content.js')
const { LIMITS } = require('../lib/bounds.js')
const { Interpreter } = require('../lib/interpreter.js')
const { bin } = require('./client.js')

test("config: upstream's variables with their meaning; a flag wins over its variable", () => {
  const c = loadConfig([], {
    KERN_MCP_IMAGE: 'node:20-slim',
    KERN_MCP_SETUP: 'pip install x',
    KERN_MCP_MEMORY_MB: '256',
    KERN_MCP_TIMEOUT: '9',
    KERN_MCP_WORKSPACE: '/w',
    KERN_MCP_PROFILES: 'vcpu:heavy, vdisk:scratch',
    KERN_MCP_KERNEL: '0',
    KERN_BIN: '/k',
  })
  assert.deepEqual(c, {
    image: 'node:20-slim',
    setup: 'pip install x',
    memoryMb: 256,
    timeoutS: 9,
    workspace: '/w',
    profiles: ['vcpu:heavy', 'vdisk:scratch'],
    kernel: false,
    kernBin: '/k',
  })
  const d = loadConfig(['--image', 'a:1', '--timeout=5', '--kernel', '--memory-mb', '64'], {
    KERN_MCP_IMAGE: 'b:2',
    KERN_MCP_KERNEL: '0',
  })
  assert.deepEqual([d.image, d.timeoutS, d.kernel, d.memoryMb, d.setup], ['a:1', 5, true, 64, null])
  assert.deepEqual(loadConfig([], {}).kernel, true, 'the warm kernel is on by default')
  assert.deepEqual(loadConfig(['--help']), { help: true })
  assert.throws(
    () => loadConfig([], { KERN_MCP_TIMEOUT: '-1' }),
    (e) => e instanceof ConfigError && /KERN_MCP_TIMEOUT/.test(e.message),
  )
  assert.throws(() => loadConfig(['--memory-mb', 'lots']), /--memory-mb must be a positive number/)
  assert.throws(() => loadConfig(['--kernel', 'maybe']), /--kernel must be 1 or 0/)
  assert.throws(() => loadConfig(['--nope']), /unknown option/)
  assert.throws(() => loadConfig(['--image']), /--image needs a value/)
})

test('--help lists every flag with its variable; a bad knob exits 2 naming it', () => {
  const help = cp.spawnSync(process.execPath, [bin, '--help'], { encoding: 'utf8' })
  assert.equal(help.status, 0)
  for (const k of KNOBS) {
    assert.ok(help.stdout.includes(k.flag), k.flag)
    assert.ok(help.stdout.includes(`env: ${k.env}`), k.env)
  }
  const bad = cp.spawnSync(process.execPath, [bin], {
    encoding: 'utf8',
    env: { ...process.env, KERN_MCP_MEMORY_MB: 'x' },
  })
  assert.equal(bad.status, 2)
  assert.match(bad.stderr, /KERN_MCP_MEMORY_MB must be a positive number/)
})

test('the server survives garbage on stdin and answers the next valid request', () => {
  const init = {
    jsonrpc: '2.0',
    id: 7,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
  }
  const input = [
    'not json at all',
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"x"}',
    '[1,2',
    JSON.stringify(init),
    '',
  ].join('\n')
  const r = cp.spawnSync(process.execPath, [bin], { input, encoding: 'utf8', timeout: 30_000 })
  const replies = r.stdout
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l))
  const answer = replies.find((m) => m.id === 7)
  assert.ok(answer && answer.result, r.stdout + r.stderr)
  assert.equal(answer.result.serverInfo.name, 'kern-sandbox-mcp')
})

test("notes: kern's note lines are taken out of stderr and logged once each; live chunks filtered the same way", () => {
  const logged = []
  const notes = new NoteLog((t) => logged.push(t))
  const warn = 'kern: warning: resource caps are not enforced on this host - long text'
  const note = 'kern: note: this box ran with a single-uid map'
  assert.equal(notes.strip(`${warn}\nTraceback\nkern is a word\n${note}\n`), 'Traceback\nkern is a word\n')
  assert.equal(notes.strip(`${warn}\n`), '')
  assert.equal(notes.strip('plain\n'), 'plain\n')
  assert.equal(logged.length, 2)
  const out = []
  const live = notes.liveFilter((t) => out.push(t))
  for (const piece of [
    'ker',
    'n: warning: resource caps are not enforced on this host',
    ' - long text\nfirst ',
    'output\nke',
    'rnel\n',
    `${note}\nlast`,
  ])
    live(piece)
  assert.equal(out.join(''), 'first output\nkernel\nlast')
  assert.equal(logged.length, 2)
  const plain = []
  const live2 = notes.liveFilter((t) => plain.push(t))
  live2('hello')
  assert.deepEqual(plain, ['hello'])
  // Lines the box prints to look like notes cannot grow the log without bound.
  for (let i = 0; i < 10_000; i++) notes.strip(`kern: note: fake ${i}\n`)
  assert.ok(logged.length <= 64, `${logged.length} lines logged`)
})

/** A fake ExecutionResult. */
function result(over = {}) {
  return {
    stdout: '',
    stderr: '',
    exitCode: 0,
    durationMs: 1,
    fault: null,
    files: [],
    truncated: false,
    results: [],
    error: null,
    success: true,
    ...over,
  }
}

test('reply shaping: chart data passed through as text, useless reprs dropped, text results by MIME type', () => {
  const r = runCodeReply(
    result({
      results: [
        {
          data: { 'text/plain': '<Figure size 640x480 with 1 Axes>', 'image/png': 'iVBORw0KGgo=' },
          isMainResult: false,
          chart: { type: 'line', elements: [{ label: 'a', points: [[1, 2]] }] },
        },
        {
          data: { 'text/plain': '<IPython.core.display.Markdown object>', 'text/markdown': '# Title' },
          isMainResult: false,
        },
        { data: { 'text/plain': '   a\n0  1', 'text/html': '<table></table>' }, isMainResult: true, executionCount: 3 },
      ],
    }),
    { language: 'python', warmKernel: true },
  )
  const kinds = r.content.map((c) => (c.type === 'image' ? 'image' : c.text.split('\n')[0]))
  assert.deepEqual(kinds, ['image', '[chart data]', '[text/markdown]', 'Out[3]:    a', '[exit 0]'])
  assert.match(r.content[1].text, /"type":"line"/)
  assert.equal(r.isError, false)
})

test('reply bounds: every stream and the whole reply clipped, the status line always there', () => {
  const huge = 'y'.repeat(5_000_000)
  const many = Array.from({ length: 5000 }, () => ({
    data: { 'text/markdown': 'm'.repeat(50_000) },
    isMainResult: false,
  }))
  const r = runCodeReply(result({ stdout: huge, stderr: huge, results: many, exitCode: 1, success: false }), {
    language: 'python',
    warmKernel: false,
  })
  const size = Buffer.byteLength(JSON.stringify(r))
  assert.ok(size < LIMITS.replyChars + 10_000 + 50_000, `reply of ${size} bytes`)
  assert.match(r.content.at(-1).text, /^\[exit 1\]\n\[reply clipped: text budget of this reply\]$/)
  assert.equal(r.isError, true)
  assert.equal(r.structuredContent.results.length, 100)
})

/** A fake session whose kernel() behaves as told for non-Python languages. */
function fakeSession(kernelFor) {
  const calls = []
  return {
    calls,
    workspacePath: '/nonexistent',
    async kernel(opts) {
      calls.push(['kernel', opts.language ?? 'python'])
      return kernelFor(opts.language)
    },
    async runCode(code, opts) {
      calls.push(['runCode', opts.language])
      return result({ stdout: `one-shot:${code}` })
    },
  }
}

/** An Interpreter over `session` instead of a real Sandbox. */
function interpreterOver(session) {
  const i = new Interpreter({ kernel: true, timeoutS: 5 })
  i.session = async () => session
  return i
}

test('JS and TS: each language gets its own warm kernel, which keeps its state; a kernel that cannot start is the reply', async () => {
  const state = {}
  const js = {
    language: 'javascript',
    alive: true,
    async runCode(code) {
      const m = /^set (\w+)$/.exec(code)
      if (m) state.v = m[1]
      return result({ stdout: String(state.v) })
    },
    async close() {},
  }
  const session = fakeSession((language) => {
    if (language === 'typescript') throw new SandboxError('this image has no node')
    return js
  })
  const i = interpreterOver(session)
  await i.run('set kept', 'javascript', {})
  const b = await i.run('get', 'javascript', {})
  assert.equal(b.result.stdout, 'kept')
  assert.equal(b.warmKernel, true)
  await assert.rejects(i.run('1', 'typescript', {}), /this image has no node/)
  assert.deepEqual(session.calls, [
    ['kernel', 'javascript'],
    ['kernel', 'typescript'],
  ])
})

test('a dead kernel is replaced once, even when two calls find it dead together, and both say the state was lost', async () => {
  let started = 0
  const kernels = []
  const session = fakeSession(() => {
    const k = {
      alive: true,
      id: ++started,
      closed: false,
      async runCode() {
        return result({ stdout: String(k.id) })
      },
      async close() {
        k.closed = true
        k.alive = false
      },
    }
    kernels.push(k)
    return k
  })
  const i = interpreterOver(session)
  await i.run('1', 'python', {})
  kernels[0].alive = false // torn down, as by a timeout
  const [a, b] = await Promise.all([i.run('2', 'python', {}), i.run('3', 'python', {})])
  assert.equal(started, 2)
  assert.deepEqual([a.result.stdout, b.result.stdout], ['2', '2'])
  assert.ok(a.stateLost && b.stateLost)
  assert.equal(kernels[0].closed, true)
  const c = await i.run('4', 'python', {})
  assert.equal(c.stateLost, null)
})
