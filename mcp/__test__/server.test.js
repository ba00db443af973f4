'use strict'
// The server through a real MCP client (the SDK's Client and StdioClientTransport): tools and
// their schemas, the warm kernel, rich results, errors as tool results, live output, cancellation,
// timeouts, bounds, files and resources, and kern's notes kept from the model.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { McpError } = require('@modelcontextprotocol/sdk/types.js')
const { connect, textOf, run, helpers } = require('./client.js')

const workspace = helpers.tmpDir('kst-mcp-ws-')
let s

test.before(async () => {
  // WARN_CAPS: the stand-in prints kern's "not enforced on this host" notice, as real kern does on
  // a host that does not delegate the memory controller.
  s = await connect({ env: { KERN_MCP_WORKSPACE: workspace, KERN_MCP_TIMEOUT: '30', KERN_STANDIN_WARN_CAPS: '1' } })
})
test.after(async () => {
  await s.close()
})

test("tools/list: upstream's tools and arguments, plus reset; run_code declares its output schema", async () => {
  const { tools } = await s.client.listTools()
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]))
  assert.deepEqual(Object.keys(byName).sort(), ['list_files', 'read_file', 'reset', 'run_code', 'write_file'])
  const rc = byName.run_code
  assert.deepEqual(Object.keys(rc.inputSchema.properties).sort(), ['code', 'language', 'timeout_s'])
  assert.deepEqual(rc.inputSchema.required, ['code'])
  // The library's one list of names, aliases included.
  const names = rc.inputSchema.properties.language.enum
  for (const n of ['python', 'bash', 'node', 'javascript', 'typescript', 'js', 'ts', 'python3', 'sh'])
    assert.ok(names.includes(n), n)
  assert.equal(names.length, 9)
  for (const k of ['exitCode', 'fault', 'error', 'files', 'results']) assert.ok(rc.outputSchema.properties[k], k)
  assert.match(rc.description, /PERSIST/)
  assert.deepEqual(byName.write_file.inputSchema.required.sort(), ['content', 'path'])
  assert.deepEqual(byName.read_file.inputSchema.required, ['path'])
  assert.ok(!byName.list_files.inputSchema.required, 'list_files path is optional')
})

test('python state persists between run_code calls (warm kernel)', async () => {
  const a = await run(s.client, 'x = 41\nprint("hello")\nx + 1')
  assert.equal(a.isError, false, textOf(a))
  assert.match(textOf(a), /hello/)
  assert.match(textOf(a), /Out\[\d+\]: 42/)
  assert.equal(a.structuredContent.warmKernel, true)
  assert.deepEqual(a.structuredContent.results, [{ mimeTypes: ['text/plain'], main: true }])
  const b = await run(s.client, 'print(x * 2)')
  assert.equal(b.isError, false, textOf(b))
  assert.match(textOf(b), /^82$/m)
})

test('a figure comes back as an image block with valid PNG bytes; HTML as text', async () => {
  const r = await run(
    s.client,
    'import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()',
  )
  assert.equal(r.isError, false, textOf(r))
  const images = r.content.filter((c) => c.type === 'image')
  assert.equal(images.length, 1)
  assert.equal(images[0].mimeType, 'image/png')
  const png = Buffer.from(images[0].data, 'base64')
  assert.equal(png.subarray(0, 8).toString('hex'), '89504e470d0a1a0a')
  assert.equal(png.subarray(12, 16).toString('latin1'), 'IHDR')
  assert.ok(png.readUInt32BE(16) > 0 && png.readUInt32BE(20) > 0)
  assert.deepEqual(
    r.structuredContent.results.map((x) => x.mimeTypes.includes('image/png')),
    [true],
  )
  const h = await run(s.client, 'class T:\n    def _repr_html_(self): return "<b>bold</b>"\nT()')
  assert.match(textOf(h), /\[text\/html\]\n<b>bold<\/b>/)
})

test("the code's own failures are tool results with isError and an actionable message", async () => {
  const exc = await run(s.client, 'def f():\n    raise ValueError("bad value")\nf()')
  assert.equal(exc.isError, true)
  assert.match(textOf(exc), /Traceback[\s\S]*ValueError: bad value/)
  assert.deepEqual(exc.structuredContent.error, { name: 'ValueError', value: 'bad value' })
  const syntax = await run(s.client, 'def (:')
  assert.equal(syntax.isError, true)
  assert.match(textOf(syntax), /SyntaxError/)
  const exit = await run(s.client, 'echo to-stderr >&2; exit 3', { language: 'bash' })
  assert.equal(exit.isError, true)
  assert.equal(exit.structuredContent.exitCode, 3)
  assert.match(textOf(exit), /to-stderr[\s\S]*\[exit 3\]/)
  const escape = await s.client.callTool({ name: 'write_file', arguments: { path: '../outside.txt', content: 'x' } })
  assert.equal(escape.isError, true)
  assert.match(textOf(escape), /escapes the workspace/)
  assert.ok(!fs.existsSync(path.join(path.dirname(workspace), 'outside.txt')))
  const escRead = await s.client.callTool({ name: 'read_file', arguments: { path: 'a/../../etc/passwd' } })
  assert.equal(escRead.isError, true)
  // The server still serves after all of that.
  const ok = await run(s.client, 'print(x)')
  assert.match(textOf(ok), /^41$/m)
})

test('bad arguments are tool errors, protocol misuse is a JSON-RPC error, and the server keeps serving', async () => {
  const lang = await s.client.callTool({ name: 'run_code', arguments: { code: '1', language: 'cobol' } })
  assert.equal(lang.isError, true)
  const missing = await s.client.callTool({ name: 'read_file', arguments: {} })
  assert.equal(missing.isError, true)
  await assert.rejects(
    s.client.request({ method: 'no/such/method', params: {} }, require('zod').object({})),
    (e) => e instanceof McpError && e.code === -32601,
  )
  const ok = await run(s.client, 'print(x + 1)')
  assert.match(textOf(ok), /^42$/m)
})

test('language: bash runs bash (arrays, [[ ]], brace expansion); node and javascript run node', async () => {
  const r = await run(s.client, 'a=(p q r); echo "${a[2]}" {1..3}; [[ 2 -gt 1 ]] && echo yes', { language: 'bash' })
  assert.equal(r.isError, false, textOf(r))
  assert.match(textOf(r), /^r 1 2 3\nyes$/m)
  // Past argv's per-string limit the script goes through a workspace file, removed afterwards.
  const big = await run(s.client, `# ${'pad '.repeat(40_000)}\nb=(x y z); echo "big:\${b[2]}"`, { language: 'bash' })
  assert.equal(big.isError, false, textOf(big))
  assert.match(textOf(big), /^big:z$/m)
  assert.deepEqual(
    fs.readdirSync(workspace).filter((n) => n.startsWith('.cell-')),
    [],
  )
  for (const language of ['node', 'javascript']) {
    const j = await run(s.client, 'const y = [1, 2, 3].map((n) => n * 2); console.log(y.join(","))', { language })
    assert.equal(j.isError, false, textOf(j))
    assert.match(textOf(j), /^2,4,6$/m)
  }
})

test('JavaScript and TypeScript run in warm kernels: state persists, the trailing value is a result, types are stripped', async () => {
  const a = await run(s.client, 'let kept = 5\nkept * 2', { language: 'javascript' })
  assert.equal(a.isError, false, textOf(a))
  assert.match(textOf(a), /^Out\[\d+\]: 10$/m)
  assert.equal(a.structuredContent.warmKernel, true)
  const b = await run(s.client, 'console.log(kept + 1)', { language: 'node' })
  assert.match(textOf(b), /^6$/m)
  const t = await run(s.client, 'enum Color { Red, Green }\nconst n: number = 6 * 7;\n`${n} ${Color[1]}`', {
    language: 'typescript',
  })
  assert.equal(t.isError, false, textOf(t))
  assert.match(textOf(t), /^Out\[\d+\]: 42 Green$/m)
  const e = await run(s.client, 'throw new TypeError("bad thing")', { language: 'javascript' })
  assert.equal(e.isError, true)
  assert.match(textOf(e), /TypeError: bad thing/)
  // Python's kernel was not disturbed.
  const p = await run(s.client, 'print(x)')
  assert.match(textOf(p), /^41$/m)
})

test('live output: stdout and stderr chunks arrive as progress notifications while the cell runs', async () => {
  const go = path.join(workspace, 'go-live')
  const messages = []
  let released = false
  const r = await run(
    s.client,
    'import os, sys, time\nprint("first-line", flush=True)\nprint("err-line", file=sys.stderr, flush=True)\n' +
      'while not os.path.exists("go-live"):\n    time.sleep(0.02)\nprint("after-go")',
    {},
    {
      onprogress: (p) => {
        messages.push(p.message)
        // Released only once the first line was seen: the notification came while the cell ran.
        if (!released && messages.join('').includes('first-line')) {
          released = true
          fs.writeFileSync(go, '')
        }
      },
    },
  )
  assert.equal(r.isError, false, textOf(r))
  assert.ok(released, 'no progress notification carried the first line')
  const all = messages.join('')
  assert.match(all, /\[stderr\] err-line/)
  assert.doesNotMatch(all, /kern: /)
  assert.match(textOf(r), /after-go/)
})

test("cancellation interrupts the cell and keeps the kernel's state", async () => {
  await run(s.client, 'kept_across_cancel = 7')
  const controller = new AbortController()
  const call = run(
    s.client,
    'import time\nprint("spinning", flush=True)\nwhile True:\n    time.sleep(0.05)',
    {},
    {
      signal: controller.signal,
      onprogress: (p) => {
        if (p.message.includes('spinning')) controller.abort()
      },
    },
  )
  await assert.rejects(call)
  const after = await run(s.client, 'print(kept_across_cancel)')
  assert.equal(after.isError, false, textOf(after))
  assert.match(textOf(after), /^7$/m)
  assert.equal(after.structuredContent.stateLost, false)
})

test('a timeout is an isError result saying so; the next call works on a fresh kernel and says the state was lost', async () => {
  const t = await run(s.client, 'while True:\n    pass', { timeout_s: 1 })
  assert.equal(t.isError, true)
  assert.equal(t.structuredContent.fault.type, 'timeout')
  assert.match(textOf(t), /timed out/)
  assert.equal(t.structuredContent.stateLost, true)
  const next = await run(s.client, 'print("alive")\nprint("x" in globals())')
  assert.equal(next.isError, false, textOf(next))
  assert.match(textOf(next), /^alive\nFalse$/m)
  assert.equal(next.structuredContent.stateLost, true)
  assert.match(textOf(next), /restarted: variables from earlier calls are gone/)
})

test('reset restarts the kernel: earlier variables are gone, files stay', async () => {
  await run(s.client, 'before_reset = 1\nopen("kept.txt", "w").write("still here")')
  const r = await s.client.callTool({ name: 'reset', arguments: {} })
  assert.equal(r.isError, undefined)
  // Python's kernel and the JavaScript and TypeScript ones an earlier test started.
  assert.match(textOf(r), /3 warm kernel\(s\) ended/)
  const after = await run(s.client, 'print("before_reset" in globals(), open("kept.txt").read())')
  assert.match(textOf(after), /^False still here$/m)
})

test('a flood is clipped: one reply stays far under 1 MB and says it was clipped', async () => {
  const r = await run(
    s.client,
    'import sys\nprint("A" * 3_000_000)\nprint("B" * 3_000_000, file=sys.stderr)\n' +
      'for i in range(400):\n    display({"text/html": "<p>" + "h" * 20000 + "</p>"}, raw=True)\nprint("tail-marker")',
  )
  const size = Buffer.byteLength(JSON.stringify(r))
  assert.ok(size < 200_000, `reply is ${size} bytes`)
  const text = textOf(r)
  assert.match(text, /stdout clipped: \d+ characters not shown/)
  assert.match(text, /stderr clipped/)
  assert.match(text, /tail-marker/, 'the end of stdout is kept')
  assert.equal(r.structuredContent.clipped, true)
})

test("images beyond the reply's image budget are left out, and the reply says so", async () => {
  const r = await run(
    s.client,
    'import io, matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\n' +
      'fig = plt.figure(figsize=(1, 1))\nbuf = io.BytesIO()\nfig.savefig(buf, format="png")\nplt.close(fig)\ndata = buf.getvalue()\n' +
      'class P:\n    def _repr_png_(self): return data\n' +
      'for _ in range(20):\n    display(P())',
  )
  assert.equal(r.isError, false, textOf(r))
  const images = r.content.filter((c) => c.type === 'image')
  assert.equal(images.length, 8)
  assert.match(textOf(r), /12 image\(s\) left out/)
})

test("kern's own notes never reach the model; the server logs each once on its stderr", async () => {
  const r1 = await run(s.client, 'echo one', { language: 'bash' })
  const r2 = await run(s.client, 'echo two >&2', { language: 'bash' })
  for (const r of [r1, r2]) assert.doesNotMatch(JSON.stringify(r.content), /kern: warning|not enforced/)
  assert.match(textOf(r2), /\[stderr\]\ntwo/)
  const logged = s
    .stderr()
    .split('\n')
    .filter((l) => /not enforced/.test(l))
  assert.equal(logged.length, 1, s.stderr())
})

test('read_file: text, an image block for an image, a description for other binary data, a size cap', async () => {
  await s.client.callTool({ name: 'write_file', arguments: { path: 'notes/a.txt', content: 'héllo\n' } })
  const t = await s.client.callTool({ name: 'read_file', arguments: { path: 'notes/a.txt' } })
  assert.equal(textOf(t), 'héllo\n')
  await run(
    s.client,
    'import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.savefig("fig.png")\nplt.close("all")\nopen("blob.bin", "wb").write(bytes(range(256)) * 4)\nopen("big.txt", "w").write("z" * (5 * 1024 * 1024))',
  )
  const img = await s.client.callTool({ name: 'read_file', arguments: { path: 'fig.png' } })
  assert.equal(img.content[0].type, 'image')
  assert.equal(Buffer.from(img.content[0].data, 'base64').subarray(1, 4).toString(), 'PNG')
  const bin = await s.client.callTool({ name: 'read_file', arguments: { path: 'blob.bin' } })
  assert.equal(bin.isError, undefined)
  assert.match(textOf(bin), /blob\.bin is binary data \(not UTF-8 text\), 1\.0 KiB: not shown as text/)
  const big = await s.client.callTool({ name: 'read_file', arguments: { path: 'big.txt' } })
  assert.equal(big.isError, true)
  assert.match(textOf(big), /read limit[\s\S]*run_code/)
  const missing = await s.client.callTool({ name: 'read_file', arguments: { path: 'nope.txt' } })
  assert.equal(missing.isError, true)
  assert.match(textOf(missing), /ENOENT: no such file or directory/)
})

test('list_files lists the workspace or a directory of it, with sizes', async () => {
  const all = await s.client.callTool({ name: 'list_files', arguments: {} })
  assert.match(textOf(all), /^notes\/a\.txt {2}\(7 B\)$/m)
  assert.match(textOf(all), /^fig\.png /m)
  const sub = await s.client.callTool({ name: 'list_files', arguments: { path: 'notes' } })
  assert.equal(textOf(sub), 'notes/a.txt  (7 B)')
})

test('workspace files are MCP resources: listed, and read as text or blob', async () => {
  const { resources } = await s.client.listResources()
  const uris = resources.map((r) => r.uri)
  assert.ok(uris.includes('kern://workspace/notes/a.txt'), uris.join(' '))
  const text = await s.client.readResource({ uri: 'kern://workspace/notes/a.txt' })
  assert.deepEqual(text.contents, [{ uri: 'kern://workspace/notes/a.txt', mimeType: 'text/plain', text: 'héllo\n' }])
  const img = await s.client.readResource({ uri: 'kern://workspace/fig.png' })
  assert.equal(img.contents[0].mimeType, 'image/png')
  assert.equal(Buffer.from(img.contents[0].blob, 'base64').subarray(1, 4).toString(), 'PNG')
  await assert.rejects(s.client.readResource({ uri: 'kern://workspace/..%2F..%2Fetc%2Fpasswd' }), McpError)
})
