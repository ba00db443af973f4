'use strict'
// kern-sandbox/langchain: createDeepAgent drives KernSandboxBackend through its own tools with a
// scripted model (langchain's FakeToolCallingModel), offline; then the backend against the bar of
// deepagentsjs' sandbox standard tests (@langchain/sandbox-standard-tests is not on npm: these
// are our own tests of the same behaviours: lifecycle, upload/download, read pagination, ls, grep,
// glob, edit, delete, execute).

const test = require('node:test')
const assert = require('node:assert/strict')
const { eachMachine, freePort, fetchWhenUp } = require('./harness.js')
const { createDeepAgent, isSandboxBackend } = require('deepagents')
const { FakeToolCallingModel } = require('langchain')
const { KernSandboxBackend } = require('../../lib/langchain/entry.js')

const enc = (s) => new TextEncoder().encode(s)

function toolOutputs(result) {
  const out = {}
  for (const m of result.messages) {
    if (m.getType?.() === 'tool' || m._getType?.() === 'tool') {
      out[m.tool_call_id] = typeof m.content === 'string' ? m.content : JSON.stringify(m.content)
    }
  }
  return out
}

eachMachine('langchain: createDeepAgent drives KernSandboxBackend', () => {
  test.it('writes a file, runs a command, serves it on an exposed port, reads it back', async () => {
    const backend = await KernSandboxBackend.create({ initialFiles: { '/workspace/seed.txt': 'seeded\n' } })
    try {
      assert.equal(isSandboxBackend(backend), true)
      const port = await freePort()
      const model = new FakeToolCallingModel({
        toolCalls: [
          [
            {
              name: 'write_file',
              args: { file_path: '/workspace/site/index.html', content: 'hello deep agent\n' },
              id: 'w',
            },
          ],
          [
            {
              name: 'execute',
              args: { command: 'cat /workspace/site/index.html /workspace/seed.txt; echo done >&2' },
              id: 'x',
            },
          ],
          [
            {
              name: 'execute',
              args: {
                command: `cd /workspace/site && (setsid python3 -m http.server ${port} --bind 127.0.0.1 > /tmp/http.log 2>&1 &) ; echo started`,
              },
              id: 's',
            },
          ],
          [
            {
              name: 'edit_file',
              args: { file_path: '/workspace/site/index.html', old_string: 'deep', new_string: 'kern' },
              id: 'e',
            },
          ],
          [{ name: 'read_file', args: { file_path: '/workspace/site/index.html' }, id: 'r' }],
          [{ name: 'grep', args: { pattern: 'kern agent', path: '/workspace' }, id: 'g' }],
          [{ name: 'glob', args: { pattern: '**/*.html', path: '/workspace' }, id: 'l' }],
        ],
      })
      const agent = createDeepAgent({ model, backend })
      const result = await agent.invoke({ messages: [{ role: 'user', content: 'build and serve a page' }] })
      const out = toolOutputs(result)
      assert.match(out.w, /wrote to '\/workspace\/site\/index\.html'/)
      assert.match(out.x, /hello deep agent\nseeded\ndone/)
      assert.match(out.x, /exit code 0/)
      assert.match(out.s, /started/)
      assert.match(out.e, /index\.html/)
      assert.match(out.r, /hello kern agent/)
      assert.match(out.g, /index\.html/)
      assert.match(out.l, /site\/index\.html/)
      // The server the agent started, read from the host through the exposed port.
      const exposed = await backend.exposePort(port)
      const res = await fetchWhenUp(`${exposed.url}/index.html`)
      assert.equal(await res.text(), 'hello kern agent\n')
    } finally {
      await backend.close()
    }
  })
})

eachMachine('langchain: KernSandboxBackend (the standard tests bar)', () => {
  let b
  const P = (rel) => `/workspace/${rel}`
  test.before(async () => {
    b = await KernSandboxBackend.create({
      initialFiles: { [P('init/a.txt')]: 'initial a', [P('init/b.bin')]: new Uint8Array([0, 1, 2]) },
    })
  })
  test.after(() => b?.close())

  test.it('lifecycle: id, isRunning, two-step initialization, close', async () => {
    assert.match(b.id, /^kern-/)
    assert.equal(b.isRunning, true)
    const later = new KernSandboxBackend({ id: 'mine' })
    assert.equal(later.isRunning, false)
    assert.equal(later.id, 'mine')
    await later.initialize()
    assert.equal(later.isRunning, true)
    await later.close()
    assert.equal(later.isRunning, false)
    await later.close()
  })

  test.it('initialFiles are there', async () => {
    const [a, bin] = await b.downloadFiles([P('init/a.txt'), P('init/b.bin')])
    assert.equal(new TextDecoder().decode(a.content), 'initial a')
    assert.deepEqual([...bin.content], [0, 1, 2])
  })

  test.it('uploadFiles/downloadFiles: partial success with standard error codes', async () => {
    const up = await b.uploadFiles([
      [P('up/one.txt'), enc('Content 1')],
      [P('up'), enc('x')],
      ['bad\0path', enc('x')],
      [P('up/two.txt'), enc('Content 2')],
    ])
    assert.deepEqual(
      up.map((r) => r.error),
      [null, 'is_directory', 'invalid_path', null],
    )
    assert.equal((await b.execute(`cat ${P('up/one.txt')} ${P('up/two.txt')}`)).output, 'Content 1Content 2')
    const down = await b.downloadFiles([P('up/one.txt'), P('up/none.txt'), P('up')])
    assert.equal(new TextDecoder().decode(down[0].content), 'Content 1')
    assert.deepEqual(
      down.slice(1).map((r) => [r.content, r.error]),
      [
        [null, 'file_not_found'],
        [null, 'is_directory'],
      ],
    )
  })

  test.it('execute: combined output, exit codes, truncation', async () => {
    const r = await b.execute('echo out; echo err >&2; exit 3')
    assert.equal(r.exitCode, 3)
    assert.match(r.output, /out/)
    assert.match(r.output, /err/)
    assert.equal(r.truncated, false)
    assert.equal((await b.execute('pwd')).output, '/workspace\n')
    const small = await KernSandboxBackend.create({ maxOutputBytes: 100 })
    try {
      const big = await small.execute('head -c 5000 /dev/zero | tr "\\0" a')
      assert.equal(big.truncated, true)
      assert.ok(big.output.startsWith('a'.repeat(100)))
      assert.match(big.output, /truncated/)
    } finally {
      await small.close()
    }
    assert.equal((await b.execute('')).exitCode, 1)
  })

  test.it('read: content, not found, empty, offset/limit pages, unicode, binary', async () => {
    assert.match((await b.read(P('rd/none.txt'))).error, /not found/)
    await b.write(P('rd/empty.txt'), '')
    assert.equal((await b.read(P('rd/empty.txt'))).error, undefined)
    await b.write(P('rd/rows.txt'), Array.from({ length: 20 }, (_, i) => `Row_${i + 1}_content`).join('\n'))
    const page = await b.read(P('rd/rows.txt'), 10, 5)
    assert.equal(page.content, 'Row_11_content\nRow_12_content\nRow_13_content\nRow_14_content\nRow_15_content\n')
    assert.deepEqual([page.totalLines, page.startLine, page.endLine, page.nextOffset], [20, 11, 15, 15])
    const last = await b.read(P('rd/rows.txt'), 15, 10)
    assert.equal(last.nextOffset, undefined)
    assert.equal((await b.read(P('rd/rows.txt'), 0, 0)).content, '')
    assert.equal((await b.read(P('rd/rows.txt'), 100, 10)).content, '')
    await b.write(P('rd/uni.txt'), 'Hello \u{1F44B} \u4E16\u754C\n\u041F\u0440\u0438\u0432\u0435\u0442')
    assert.match((await b.read(P('rd/uni.txt'))).content, /\u{1F44B}[\s\S]*\u041F\u0440\u0438/u)
    const bin = await b.read(P('init/b.bin'))
    assert.ok(bin.content instanceof Uint8Array || typeof bin.content === 'string')
    const raw = await b.readRaw(P('rd/uni.txt'))
    assert.equal(raw.data.mimeType, 'text/plain')
    assert.match(raw.data.content, /\u4E16\u754C/)
    assert.match((await b.readRaw(P('rd/none'))).error, /not found/)
  })

  test.it('ls: absolute paths, directories marked, empty and missing directories, hidden and odd names', async () => {
    await b.write(P('li/file with spaces.txt'), 'x')
    await b.write(P('li/.hidden'), 'x')
    await b.write(P('li/file(1).txt'), 'x')
    await b.execute(`mkdir -p '${P('li/sub dir')}' '${P('li-empty')}'`)
    const { files, error } = await b.ls(P('li'))
    assert.equal(error, undefined)
    assert.deepEqual(
      files.map((f) => [f.path, f.is_dir]),
      [
        [P('li/.hidden'), false],
        [P('li/file with spaces.txt'), false],
        [P('li/file(1).txt'), false],
        [P('li/sub dir/'), true],
      ].sort((x, y) => x[0].localeCompare(y[0])),
    )
    assert.deepEqual((await b.ls(P('li-empty'))).files, [])
    assert.deepEqual((await b.ls(P('li-none'))).files, [])
    assert.equal((await b.ls(`${P('li')}/`)).files.length, 4)
  })

  test.it('grep: literal, glob filter, line numbers, case, special characters, nested, maxCount', async () => {
    await b.write(P('gr/f1.txt'), 'Hello world\nGoodbye world')
    await b.write(P('gr/f2.py'), 'Hello there\nhello\nPrice: $100\nPattern: [a-z]*')
    await b.write(P('gr/sub/deep/f3.txt'), 'x\nx\nHello deep')
    const all = await b.grep('Hello', P('gr'))
    assert.equal(all.error, undefined)
    assert.deepEqual(all.matches.map((m) => [m.path, m.line]).sort(), [
      [P('gr/f1.txt'), 1],
      [P('gr/f2.py'), 1],
      [P('gr/sub/deep/f3.txt'), 3],
    ])
    assert.deepEqual(
      (await b.grep('Hello', P('gr'), '*.py')).matches.map((m) => m.path),
      [P('gr/f2.py')],
    )
    assert.equal((await b.grep('$100', P('gr'))).matches[0].text, 'Price: $100')
    assert.equal((await b.grep('[a-z]*', P('gr'))).matches.length, 1)
    assert.deepEqual((await b.grep('absent', P('gr'))).matches, [])
    assert.deepEqual((await b.grep('x', P('gr-none'))).matches, [])
    const capped = await b.grep('Hello', P('gr'), null, 2)
    assert.equal(capped.matches.length, 2)
    assert.equal(capped.truncated, true)
  })

  test.it('glob: *, **, ?, [..], hidden, directories included, relative paths', async () => {
    for (const f of [
      'gl/file1.txt',
      'gl/file2.txt',
      'gl/file10.txt',
      'gl/fileA.py',
      'gl/.hidden',
      'gl/a/b/c/deep.txt',
    ]) {
      await b.write(P(f), 'x')
    }
    const names = async (pattern) => (await b.glob(pattern, P('gl'))).files.map((f) => f.path)
    assert.deepEqual(await names('*.txt'), ['file1.txt', 'file10.txt', 'file2.txt'])
    assert.deepEqual(await names('file?.txt'), ['file1.txt', 'file2.txt'])
    assert.deepEqual(await names('file[1-2].txt'), ['file1.txt', 'file2.txt'])
    assert.deepEqual(await names('**/deep.txt'), ['a/b/c/deep.txt'])
    assert.ok((await names('**/*.txt')).includes('a/b/c/deep.txt'))
    assert.ok((await names('**/*.txt')).includes('file1.txt'))
    assert.deepEqual(await names('.*'), ['.hidden'])
    assert.deepEqual(await names('*.{py,md}'), ['fileA.py'])
    const top = (await b.glob('*', P('gl'))).files
    assert.deepEqual(
      top.filter((f) => f.is_dir).map((f) => f.path),
      ['a'],
    )
    assert.deepEqual((await b.glob('*.txt', P('gl-none'))).files, [])
  })

  test.it('write, edit and delete keep deep agents rules', async () => {
    assert.deepEqual(await b.write(P('ed/a.txt'), 'Hello World'), { path: P('ed/a.txt'), filesUpdate: null })
    assert.equal((await b.edit(P('ed/a.txt'), 'Hello World', 'Hello Edited World')).occurrences, 1)
    assert.equal((await b.execute(`cat ${P('ed/a.txt')}`)).output, 'Hello Edited World')
    assert.match((await b.edit(P('ed/a.txt'), 'absent', 'x')).error, /not found/)
    await b.write(P('ed/m.txt'), 'a a a')
    assert.match((await b.edit(P('ed/m.txt'), 'a', 'b')).error, /Multiple occurrences/)
    assert.equal((await b.edit(P('ed/m.txt'), 'a', 'b', true)).occurrences, 3)
    assert.equal((await b.read(P('ed/m.txt'))).content, 'b b b\n')
    assert.match((await b.edit(P('ed/none.txt'), 'a', 'b')).error, /not found/)
    await b.write(P('ed/empty.txt'), '')
    assert.equal((await b.edit(P('ed/empty.txt'), '', 'filled')).occurrences, 1)
    assert.match((await b.edit(P('ed/a.txt'), '', 'x')).error, /must not be empty/)
    assert.match((await b.write(P('ed'), 'x')).error, /is_directory/)
    assert.deepEqual(await b.delete(P('ed')), { path: P('ed'), filesUpdate: null })
    assert.match((await b.delete(P('ed'))).error, /not found/)
  })
})
