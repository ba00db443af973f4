'use strict'
// kern-sandbox/ai: ai 7's generateText drives the session and the code interpreter with a scripted
// model (MockLanguageModelV4), offline; then the session's own contract, member by member.

const test = require('node:test')
const assert = require('node:assert/strict')
const { eachMachine, openMachine, freePort, fetchWhenUp } = require('./harness.js')
const { generateText, tool, jsonSchema, isStepCount } = require('ai')
const { MockLanguageModelV4 } = require('ai/test')
const { createSandboxSession, codeInterpreterTool } = require('../../lib/ai/entry.js')

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
}

/** A model that makes the given tool calls, one step each, then answers `final`. */
function scriptedModel(calls, final = 'done') {
  let i = 0
  return new MockLanguageModelV4({
    doGenerate: async () => {
      if (i < calls.length) {
        const [toolName, input] = calls[i]
        i++
        return {
          content: [{ type: 'tool-call', toolCallId: `call-${i}`, toolName, input: JSON.stringify(input) }],
          finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
          usage,
          warnings: [],
        }
      }
      return {
        content: [{ type: 'text', text: final }],
        finishReason: { unified: 'stop', raw: 'stop' },
        usage,
        warnings: [],
      }
    },
  })
}

function need(sandbox) {
  if (!sandbox) throw new Error('no experimental_sandbox')
  return sandbox
}

/** Tools written the way ai's docs write sandbox tools: they use `experimental_sandbox`. */
const sandboxTools = {
  write_file: tool({
    inputSchema: jsonSchema({ type: 'object', properties: { path: { type: 'string' }, content: { type: 'string' } } }),
    execute: async ({ path, content }, { experimental_sandbox, abortSignal }) => {
      await need(experimental_sandbox).writeTextFile({ path, content, abortSignal })
      return 'written'
    },
  }),
  read_file: tool({
    inputSchema: jsonSchema({ type: 'object', properties: { path: { type: 'string' } } }),
    execute: async ({ path }, { experimental_sandbox, abortSignal }) =>
      need(experimental_sandbox).readTextFile({ path, abortSignal }),
  }),
  run: tool({
    inputSchema: jsonSchema({ type: 'object', properties: { command: { type: 'string' } } }),
    execute: async ({ command }, { experimental_sandbox, abortSignal }) =>
      need(experimental_sandbox).run({ command, abortSignal }),
  }),
  start_server: tool({
    inputSchema: jsonSchema({ type: 'object', properties: { command: { type: 'string' }, port: { type: 'number' } } }),
    execute: async ({ command, port }, { experimental_sandbox }) => {
      const sandbox = need(experimental_sandbox)
      const proc = await sandbox.spawn({ command })
      const exposed = await sandbox.exposePort(port)
      return { pid: proc.pid ?? null, url: exposed.url }
    },
  }),
  http_get: tool({
    inputSchema: jsonSchema({ type: 'object', properties: { url: { type: 'string' } } }),
    execute: async ({ url }) => {
      const res = await fetchWhenUp(url)
      return { status: res.status, body: await res.text() }
    },
  }),
}

function toolResults(result) {
  return result.steps.flatMap((s) => s.toolResults.map((r) => [r.toolName, r.output]))
}

eachMachine('ai: generateText drives the sandbox session', () => {
  let env
  test.before(async () => {
    env = await openMachine()
  })
  test.after(() => env?.close())

  test.it('writes a file, runs a command, serves it on an exposed port, reads it back', async () => {
    const session = createSandboxSession(env.machine)
    const port = await freePort()
    const model = scriptedModel([
      ['write_file', { path: 'site/index.html', content: 'hello from the model\nline two\n' }],
      ['run', { command: 'wc -l < site/index.html && cat site/index.html' }],
      ['start_server', { command: `cd site && exec python3 -m http.server ${port} --bind 127.0.0.1`, port }],
      ['http_get', { url: 'URL' }],
      ['read_file', { path: 'site/index.html' }],
    ])
    // The http_get call needs the URL the previous step returned: patch it in when it is known.
    const original = model.doGenerate
    model.doGenerate = async (options) => {
      const r = await original(options)
      const call = r.content[0]
      if (call.type === 'tool-call' && call.toolName === 'http_get') {
        const served = options.prompt
          .flatMap((m) => (m.role === 'tool' ? m.content : []))
          .find((p) => p.toolName === 'start_server')
        call.input = JSON.stringify({ url: `${served.output.value.url}/index.html` })
      }
      return r
    }
    const result = await generateText({
      model,
      prompt: 'make a site',
      experimental_sandbox: session,
      tools: sandboxTools,
      stopWhen: isStepCount(10),
    })
    assert.equal(result.text, 'done')
    const outputs = Object.fromEntries(toolResults(result))
    assert.equal(outputs.write_file, 'written')
    assert.deepEqual(outputs.run, { exitCode: 0, stdout: '2\nhello from the model\nline two\n', stderr: '' })
    assert.match(outputs.start_server.url, /^http:\/\/127\.0\.0\.1:\d+$/)
    assert.deepEqual(outputs.http_get, { status: 200, body: 'hello from the model\nline two\n' })
    assert.equal(outputs.read_file, 'hello from the model\nline two\n')
    assert.ok(session.description.includes(outputs.start_server.url), session.description)
    const servers = await env.machine.processes()
    assert.ok(
      servers.some((p) => p.args.join(' ').includes('http.server')),
      'the server runs on',
    )
    for (const p of servers) await (await env.machine.attach(p.pid)).kill('SIGKILL')
  })

  test.it('the code interpreter returns text, errors and charts as image parts to the model', async () => {
    const model = scriptedModel([
      ['python', { code: 'x = 21\nprint("x is", x)\nx * 2' }],
      ['python', { code: '1 / 0' }],
      [
        'python',
        {
          code:
            'import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\n' +
            'plt.plot([1, 2, 3], [4, 1, 9])\nplt.title("growth")\nplt.show()',
        },
      ],
    ])
    const result = await generateText({
      model,
      prompt: 'compute',
      tools: { python: codeInterpreterTool(env.machine, { languages: ['python'] }) },
      stopWhen: isStepCount(10),
    })
    const [first, second, third] = toolResults(result).map(([, o]) => o)
    assert.equal(first.stdout, 'x is 21\n')
    assert.equal(first.results[0].text, '42')
    assert.equal(first.results[0].isMainResult, true)
    assert.equal(second.error.name, 'ZeroDivisionError')
    assert.equal(third.results.length, 1)
    assert.ok(third.results[0].png.length > 100)
    assert.equal(third.results[0].chart.title, 'growth')
    // What the model saw after the chart: text, the chart's data as text, then the image itself.
    const lastPrompt = model.doGenerateCalls.at(-1).prompt
    const toolParts = lastPrompt.filter((m) => m.role === 'tool').flatMap((m) => m.content)
    const seen = toolParts.map((p) => p.output)
    assert.equal(seen[0].type, 'content')
    assert.match(seen[0].value[0].text, /x is 21[\s\S]*result \(text\):\n42/)
    assert.match(seen[1].value[0].text, /ZeroDivisionError/)
    const chartParts = seen[2].value
    assert.match(chartParts[1].text, /^chart data \(line\):/)
    assert.match(chartParts[1].text, /"growth"/)
    assert.equal(chartParts[2].type, 'file')
    assert.equal(chartParts[2].mediaType, 'image/png')
    assert.equal(chartParts[2].data.type, 'data')
  })
})

eachMachine('ai: the session contract', () => {
  let env
  let s
  test.before(async () => {
    env = await openMachine()
    s = createSandboxSession(env.machine)
  })
  test.after(() => env?.close())

  test.it('reads: null for a missing file, bytes, a stream, text line ranges, encodings', async () => {
    assert.equal(await s.readFile({ path: 'nope' }), null)
    assert.equal(await s.readBinaryFile({ path: 'nope' }), null)
    assert.equal(await s.readTextFile({ path: 'nope/deeper' }), null)
    await s.writeTextFile({ path: 'r/lines.txt', content: 'one\ntwo\nthree\nfour' })
    assert.equal(await s.readTextFile({ path: 'r/lines.txt', startLine: 2, endLine: 3 }), 'two\nthree\n')
    assert.equal(await s.readTextFile({ path: 'r/lines.txt', startLine: 3, endLine: 99 }), 'three\nfour')
    assert.equal(await s.readTextFile({ path: 'r/lines.txt', startLine: 9 }), '')
    assert.equal(await s.readTextFile({ path: `${env.machine.workdir}/r/lines.txt`, endLine: 1 }), 'one\n')
    await assert.rejects(s.readTextFile({ path: 'r/lines.txt', startLine: 0 }), /startLine/)
    await assert.rejects(s.readTextFile({ path: 'r/lines.txt', startLine: 3, endLine: 2 }), /endLine/)
    await s.writeTextFile({ path: 'r/latin.txt', content: 'café', encoding: 'latin1' })
    assert.deepEqual([...(await s.readBinaryFile({ path: 'r/latin.txt' }))], [0x63, 0x61, 0x66, 0xe9])
    assert.equal(await s.readTextFile({ path: 'r/latin.txt', encoding: 'latin1' }), 'café')
    await assert.rejects(s.readTextFile({ path: 'r/latin.txt', encoding: 'klingon' }), /encoding/)
    const big = Buffer.alloc(200 * 1024, 7)
    await s.writeBinaryFile({ path: 'r/big.bin', content: new Uint8Array(big) })
    const stream = await s.readFile({ path: 'r/big.bin' })
    const chunks = []
    for await (const c of stream) chunks.push(Buffer.from(c))
    assert.ok(chunks.length > 1, 'streamed in pieces')
    assert.ok(Buffer.concat(chunks).equals(big))
    await assert.rejects(
      s.readBinaryFile({ path: 'r' }),
      (e) => e.code === 'ERR_IS_A_DIRECTORY' || /directory/.test(e.message),
    )
  })

  test.it('writes: from a stream, parents made, overwrite, a directory rejects', async () => {
    const stream = new ReadableStream({
      start(c) {
        c.enqueue(new TextEncoder().encode('part one, '))
        c.enqueue(new TextEncoder().encode('part two'))
        c.close()
      },
    })
    await s.writeFile({ path: 'w/a/b/c.txt', content: stream })
    assert.equal(await s.readTextFile({ path: 'w/a/b/c.txt' }), 'part one, part two')
    await s.writeTextFile({ path: 'w/a/b/c.txt', content: 'over' })
    assert.equal(await s.readTextFile({ path: 'w/a/b/c.txt' }), 'over')
    await assert.rejects(s.writeTextFile({ path: 'w/a', content: 'x' }), /directory/)
    await assert.rejects(s.writeTextFile({ path: 'w/\0x', content: 'x' }), /NUL/)
  })

  test.it('stat follows symlinks, listDirectory and deleteFile keep their null/false/reject rules', async () => {
    await s.writeTextFile({ path: 'st/f.txt', content: '12345' })
    await s.run({ command: 'ln -s f.txt st/link && ln -s missing st/dangling && mkdir -p st/sub' })
    assert.deepEqual(await s.stat({ path: 'st/f.txt' }), { type: 'file', size: 5 })
    assert.deepEqual(await s.stat({ path: 'st/link' }), { type: 'file', size: 5 })
    assert.equal(await s.stat({ path: 'st/dangling' }), null)
    assert.equal(await s.stat({ path: 'st/none' }), null)
    assert.equal((await s.stat({ path: 'st/sub' })).type, 'directory')
    const list = await s.listDirectory({ path: 'st' })
    assert.deepEqual(
      list.sort((a, b) => a.name.localeCompare(b.name)),
      [
        { name: 'dangling', type: 'symlink' },
        { name: 'f.txt', type: 'file' },
        { name: 'link', type: 'symlink' },
        { name: 'sub', type: 'directory' },
      ],
    )
    assert.equal(await s.listDirectory({ path: 'st/none' }), null)
    await assert.rejects(s.listDirectory({ path: 'st/f.txt' }), /not a directory/)
    assert.equal(await s.deleteFile({ path: 'st/link' }), true)
    assert.deepEqual(await s.stat({ path: 'st/f.txt' }), { type: 'file', size: 5 }, 'the target stays')
    assert.equal(await s.deleteFile({ path: 'st/link' }), false)
    await assert.rejects(s.deleteFile({ path: 'st/sub' }), /directory/)
  })

  test.it('run: exit code, output, workingDirectory and env; bad input rejects', async () => {
    await s.run({ command: 'mkdir -p rr/inner' })
    const r = await s.run({
      command: 'pwd; echo "$GREETING"; echo oops >&2; exit 3',
      workingDirectory: 'rr/inner',
      env: { GREETING: 'hi' },
    })
    assert.deepEqual(r, { exitCode: 3, stdout: `${env.machine.workdir}/rr/inner\nhi\n`, stderr: 'oops\n' })
    await assert.rejects(s.run({ command: '' }), /command/)
    await assert.rejects(s.run({ command: 'true', env: { 'BAD NAME': 'x' } }), /environment variable/)
    const capped = createSandboxSession(env.machine, { maxOutputBytes: 1000 })
    const big = await capped.run({ command: 'head -c 5000 /dev/zero | tr "\\0" a' })
    assert.ok(big.stdout.length <= 1000, `${big.stdout.length}`)
    assert.match(big.stderr, /output truncated/)
  })

  test.it('spawn: streams, writable stdin, wait, kill, and an abort that kills and rejects wait()', async () => {
    const p = await s.spawn({ command: 'cat; echo done >&2', stdin: true })
    assert.equal(typeof p.pid, 'number')
    const w = p.stdin.getWriter()
    await w.write(new TextEncoder().encode('echoed back\n'))
    await w.close()
    const [out, err, exit] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.wait()])
    assert.equal(out, 'echoed back\n')
    assert.equal(err, 'done\n')
    assert.deepEqual(exit, { exitCode: 0 })

    const noStdin = await s.spawn({ command: 'cat' })
    assert.equal('stdin' in noStdin, false)
    assert.deepEqual(await noStdin.wait(), { exitCode: 0 }, 'stdin is at EOF')

    const sleeper = await s.spawn({ command: 'sleep 300' })
    await sleeper.kill()
    await sleeper.kill()
    assert.notEqual((await sleeper.wait()).exitCode, 0)

    const ac = new AbortController()
    const aborted = await s.spawn({ command: 'sleep 300', abortSignal: ac.signal })
    ac.abort(new Error('stop it'))
    await assert.rejects(aborted.wait(), /stop it/)
    const left = await env.machine.processes()
    assert.ok(!left.some((x) => x.pid === aborted.pid), 'the aborted process is gone')

    const before = new AbortController()
    before.abort(new Error('already'))
    await assert.rejects(s.spawn({ command: 'true', abortSignal: before.signal }), /already/)
    await assert.rejects(s.run({ command: 'true', abortSignal: before.signal }), /already/)
    await assert.rejects(s.readTextFile({ path: 'x', abortSignal: before.signal }), /already/)
    await assert.rejects(s.writeTextFile({ path: 'x', content: '', abortSignal: before.signal }), /already/)
  })

  test.it('run: an abort kills the command and rejects with the reason', async () => {
    const ac = new AbortController()
    const run = s.run({ command: 'sleep 300', abortSignal: ac.signal })
    setTimeout(() => ac.abort(new Error('enough')), 200)
    await assert.rejects(run, /enough/)
  })

  test.it('description names the working directory', () => {
    assert.ok(s.description.includes(env.machine.workdir))
    const other = createSandboxSession(env.machine, { workingDirectory: '/tmp', description: 'Python 3 is installed.' })
    assert.match(other.description, /Working directory: \/tmp\./)
    assert.match(other.description, /Python 3 is installed\./)
  })
})

test('createSandboxSession and codeInterpreterTool refuse what is not a machine or kernel', () => {
  assert.throws(() => createSandboxSession({}), /Machine/)
  assert.throws(() => codeInterpreterTool({}), /Kernel/)
})
