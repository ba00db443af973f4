'use strict'
// kern-sandbox/e2b, the sandbox and runCode: Sandbox.create's forms and options, the Execution and
// Result shapes, live output as OutputMessages, timeouts that keep a context's state, kill and the
// sandbox's lifetime, and E2B's error classes.

const test = require('node:test')
const assert = require('node:assert/strict')
const { kern, tmpDir, procsMatching, waitFor } = require('./helpers')
const e2b = require('kern-sandbox/e2b')

const { Sandbox, Execution, Result, ExecutionError, OutputMessage } = e2b
const { SandboxError, TimeoutError, InvalidArgumentError, NotFoundError, CommandExitError } = e2b

let sbx
test.before(async () => {
  sbx = await Sandbox.create({ envs: { KST_E2B: 'from create' }, metadata: { owner: 'tests' } })
})
test.after(async () => {
  await sbx.kill()
})

test("the entry exports E2B's classes, its errors in E2B's hierarchy", () => {
  assert.deepEqual(Object.keys(e2b).sort(), [
    'AuthenticationError',
    'ChartType',
    'CommandExitError',
    'Execution',
    'ExecutionError',
    'FileNotFoundError',
    'FileType',
    'FilesystemEventType',
    'GitAuthError',
    'GitUpstreamError',
    'InvalidArgumentError',
    'NotEnoughSpaceError',
    'NotFoundError',
    'OutputMessage',
    'Result',
    'Sandbox',
    'SandboxError',
    'SandboxNotFoundError',
    'ScaleType',
    'TimeoutError',
  ])
  assert.equal(e2b.ChartType, kern.ChartType)
  assert.equal(e2b.ChartType.LINE, 'line')
  for (const E of [
    TimeoutError,
    InvalidArgumentError,
    NotFoundError,
    CommandExitError,
    e2b.NotEnoughSpaceError,
    e2b.GitUpstreamError,
  ]) {
    assert.ok(E.prototype instanceof SandboxError, E.name)
  }
  // As in E2B: the two not-founds under NotFoundError; authentication errors are no SandboxError.
  assert.ok(e2b.FileNotFoundError.prototype instanceof NotFoundError)
  assert.ok(e2b.SandboxNotFoundError.prototype instanceof NotFoundError)
  assert.ok(e2b.GitAuthError.prototype instanceof e2b.AuthenticationError)
  assert.ok(!(e2b.AuthenticationError.prototype instanceof SandboxError))
  assert.equal(new e2b.FileNotFoundError('x').name, 'FileNotFoundError')
  assert.deepEqual(e2b.FileType, { FILE: 'file', DIR: 'dir', SYMLINK: 'symlink' })
  assert.deepEqual(e2b.FilesystemEventType, {
    CHMOD: 'chmod',
    CREATE: 'create',
    REMOVE: 'remove',
    RENAME: 'rename',
    WRITE: 'write',
  })
  assert.ok(SandboxError.prototype instanceof Error)
  assert.equal(new TimeoutError('x').name, 'TimeoutError')
  const c = new CommandExitError({ stdout: 'o', stderr: 'e', exitCode: 2, error: 'exit status 2' })
  assert.deepEqual(
    [c.stdout, c.stderr, c.exitCode, c.error, c.message],
    ['o', 'e', 2, 'exit status 2', 'exit status 2'],
  )
})

test('create() gives a running sandbox with an id and its metadata; runCode("1 + 1") is 2', async () => {
  assert.match(sbx.sandboxId, /^kern[0-9a-f]{20}$/)
  assert.equal(await sbx.isRunning(), true)
  assert.deepEqual(sbx.metadata, { owner: 'tests' })
  const info = await sbx.getInfo()
  assert.equal(info.sandboxId, sbx.sandboxId)
  assert.equal(info.templateId, kern.Sandbox && new kern.Sandbox().image)
  assert.equal(info.name, 'code-interpreter-v1')
  assert.deepEqual(info.metadata, { owner: 'tests' })
  assert.ok(info.endAt - info.startedAt >= 299_000 && info.endAt - info.startedAt <= 300_500, 'default lifetime 5 min')
  const ex = await sbx.runCode('1 + 1')
  assert.ok(ex instanceof Execution)
  assert.equal(ex.text, '2')
  assert.equal(ex.results.length, 1)
  assert.ok(ex.results[0] instanceof Result)
  assert.equal(ex.results[0].isMainResult, true)
  assert.equal(ex.error, undefined)
  assert.deepEqual(ex.logs, { stdout: [], stderr: [] })
  assert.equal(await Sandbox.connect(sbx.sandboxId), sbx)
})

test('envs of create reach cells; envs of runCode that cell only', async () => {
  assert.equal((await sbx.runCode('import os; os.environ["KST_E2B"]')).text, "'from create'")
  const one = await sbx.runCode('import os; (os.environ.get("KST_ONE"), os.environ["KST_E2B"])', {
    envs: { KST_ONE: '1', KST_E2B: 'overridden' },
  })
  assert.equal(one.text, "('1', 'overridden')")
  const after = await sbx.runCode('import os; (os.environ.get("KST_ONE"), os.environ["KST_E2B"])')
  assert.equal(after.text, "(None, 'from create')")
})

test('Execution: logs line by line, error, executionCount, text and toJSON', async () => {
  const ctx = await sbx.createCodeContext()
  const a = await sbx.runCode('print("a")\nprint("b", end="")\nimport sys; sys.stderr.write("e\\n")\nx = 5', {
    context: ctx,
  })
  assert.deepEqual(a.logs, { stdout: ['a\n', 'b'], stderr: ['e\n'] })
  assert.equal(a.executionCount, 1)
  assert.equal(a.text, undefined)
  const b = await sbx.runCode('raise ValueError("bad " + str(x))', { context: ctx })
  assert.ok(b.error instanceof ExecutionError)
  assert.equal(b.error.name, 'ValueError')
  assert.equal(b.error.value, 'bad 5')
  assert.match(b.error.traceback, /ValueError: bad 5/)
  assert.deepEqual(b.logs.stderr, [], 'the traceback is the error, not stderr (as in Jupyter)')
  assert.equal(b.executionCount, 2)
  const c = await sbx.runCode('x * 2', { context: ctx })
  assert.equal(c.executionCount, 3)
  assert.deepEqual(JSON.parse(JSON.stringify(c)), {
    results: [{ text: '10' }],
    logs: { stdout: [], stderr: [] },
  })
  assert.deepEqual(Object.keys(b.toJSON()), ['results', 'logs', 'error'])
  await sbx.removeCodeContext(ctx)
})

test("Result: E2B's fields, base64 images, formats(), extra, raw and toJSON", async () => {
  const code = [
    'class Rich:',
    '    def _repr_mimebundle_(self, include=None, exclude=None):',
    '        return {"text/plain": "rich", "text/html": "<b>r</b>", "text/markdown": "**r**",',
    '                "image/svg+xml": "<svg/>", "image/png": b"\\x89PNG", "image/jpeg": b"\\xff\\xd8",',
    '                "application/pdf": "JVBERi0=", "text/latex": "$r$", "application/json": {"k": 1},',
    '                "application/javascript": "1;", "application/x-custom": "c"}',
    'display(Rich())',
    '"main"',
  ].join('\n')
  const ex = await sbx.runCode(code)
  assert.equal(ex.results.length, 2)
  const [r, main] = ex.results
  assert.equal(r.isMainResult, false)
  assert.equal(main.isMainResult, true)
  assert.equal(ex.text, "'main'")
  assert.equal(r.text, 'rich')
  assert.equal(r.html, '<b>r</b>')
  assert.equal(r.markdown, '**r**')
  assert.equal(r.svg, '<svg/>')
  assert.equal(r.png, Buffer.from('\x89PNG', 'latin1').toString('base64'))
  assert.equal(r.jpeg, Buffer.from([0xff, 0xd8]).toString('base64'))
  assert.equal(r.pdf, 'JVBERi0=')
  assert.equal(r.latex, '$r$')
  assert.deepEqual(JSON.parse(r.json), { k: 1 })
  assert.equal(r.javascript, '1;')
  assert.deepEqual(r.extra, { 'application/x-custom': 'c' })
  assert.equal(r.data, undefined)
  assert.equal(r.chart, undefined)
  assert.deepEqual(r.formats(), [
    'html',
    'markdown',
    'svg',
    'png',
    'jpeg',
    'pdf',
    'latex',
    'json',
    'javascript',
    'application/x-custom',
  ])
  assert.equal(r.raw.html, '<b>r</b>')
  assert.equal(r.raw['application/x-custom'], 'c')
  const json = r.toJSON()
  assert.equal(json.text, 'rich')
  assert.equal(json.png, r.png)
  assert.deepEqual(json.extra, { 'application/x-custom': 'c' })
  assert.deepEqual(Object.keys(main.toJSON()).sort(), [
    'html',
    'javascript',
    'jpeg',
    'json',
    'latex',
    'markdown',
    'pdf',
    'png',
    'svg',
    'text',
  ])
})

test('onStdout/onStderr get an OutputMessage per line; onResult and onError each value', async () => {
  const out = []
  const err = []
  const results = []
  const errors = []
  const ex = await sbx.runCode(
    'import sys\nprint("one")\nsys.stdout.write("two\\nthr")\nsys.stdout.write("ee\\n")\nprint("oops", file=sys.stderr)\ndisplay(7)\n8\n',
    {
      onStdout: (m) => out.push(m),
      onStderr: (m) => err.push(m),
      onResult: (r) => results.push(r),
      onError: (e) => errors.push(e),
    },
  )
  assert.deepEqual(
    out.map((m) => m.line),
    ['one\n', 'two\n', 'three\n'],
  )
  assert.ok(out.every((m) => m instanceof OutputMessage && m.error === false))
  assert.deepEqual(
    err.map((m) => [m.line, m.error]),
    [['oops\n', true]],
  )
  assert.equal(String(out[0]), 'one\n')
  const now = Date.now() * 1e6
  assert.ok(
    out.every((m) => typeof m.timestamp === 'number' && Math.abs(m.timestamp - now) < 60e9),
    'ns since the epoch',
  )
  assert.deepEqual(
    results.map((r) => r.text),
    ['7', '8'],
  )
  assert.equal(results[1], ex.results[1], 'onResult sees the very Results of the Execution')
  assert.deepEqual(errors, [])
  const failed = await sbx.runCode('1/0', { onError: (e) => errors.push(e) })
  assert.equal(errors.length, 1)
  assert.equal(errors[0], failed.error)
  assert.equal(errors[0].name, 'ZeroDivisionError')
})

test('context and language together reject, as E2B does; R and Java reject clearly', async () => {
  const ctx = (await sbx.listCodeContexts()).find((c) => c.language === 'python')
  await assert.rejects(
    sbx.runCode('1', { context: ctx, language: 'python' }),
    (e) => e instanceof InvalidArgumentError && /context or language/.test(e.message),
  )
  for (const language of ['r', 'java', 'R']) {
    await assert.rejects(
      sbx.runCode('1', { language }),
      (e) => e instanceof InvalidArgumentError && /no R or Java kernel/.test(e.message),
    )
  }
  await assert.rejects(
    sbx.runCode('1', { language: 'cobol' }),
    (e) => e instanceof InvalidArgumentError && /unsupported language "cobol"/.test(e.message),
  )
  await assert.rejects(sbx.runCode(42), InvalidArgumentError)
  await assert.rejects(sbx.runCode('1', { timeoutMs: -1 }), InvalidArgumentError)
  assert.equal((await sbx.runCode('3', { requestTimeoutMs: 5 })).text, '3', 'requestTimeoutMs is accepted')
})

test('timeoutMs interrupts the cell with TimeoutError and the context keeps its state', async () => {
  const ctx = await sbx.createCodeContext({ language: 'python' })
  await sbx.runCode('kept = [1, 2, 3]', { context: ctx })
  const t0 = Date.now()
  await assert.rejects(
    sbx.runCode('import time\nwhile True: time.sleep(0.05)', { context: ctx, timeoutMs: 300 }),
    (e) => e instanceof TimeoutError && /timed out/.test(e.message),
  )
  assert.ok(Date.now() - t0 < 5000)
  const ex = await sbx.runCode('sum(kept)', { context: ctx })
  assert.equal(ex.text, '6')
  assert.equal(ex.error, undefined)
  await sbx.removeCodeContext(ctx.id)
})

test("a timeoutMs past what a timer holds, or Infinity, means no deadline; a command's too", async () => {
  for (const timeoutMs of [Infinity, 3e9]) {
    const ex = await sbx.runCode('import time\ntime.sleep(0.2)\n7', { timeoutMs })
    assert.equal(ex.text, '7', String(timeoutMs))
  }
  const r = await sbx.commands.run('echo ok', { timeoutMs: Infinity })
  assert.equal(r.stdout, 'ok\n')
})

test('a timed-out cell that ignores the interrupt: the error says the state is lost, and the context restarts', async () => {
  const ctx = await sbx.createCodeContext({ language: 'python' })
  await sbx.runCode('kept = 41', { context: ctx })
  await assert.rejects(
    sbx.runCode(
      'import time\nwhile True:\n    try:\n        time.sleep(0.05)\n    except KeyboardInterrupt:\n        pass',
      { context: ctx, timeoutMs: 300 },
    ),
    (e) => e instanceof TimeoutError && /state is lost/.test(e.message),
  )
  const ex = await sbx.runCode('"kept" in globals()', { context: ctx })
  assert.equal(ex.text, 'False')
  assert.equal(ex.executionCount, 1, 'the restarted kernel counts afresh')
  await sbx.removeCodeContext(ctx.id)
})

test("kill() while a context's kernel is still starting returns promptly and leaves no box", async () => {
  const s = await Sandbox.create()
  // Every Python started in this sandbox waits 20 s before it can serve, in a `sleep` whose
  // argument is this test's own, so the box's processes can be found.
  const marker = `20.${String(Date.now()).slice(-6)}`
  await s.files.write('.deps/sitecustomize.py', `import subprocess\nsubprocess.run(['sleep', '${marker}'])\n`)
  const starting = s.createCodeContext({ language: 'python' }).then(
    () => 'created',
    (e) => e,
  )
  await new Promise((r) => setTimeout(r, 500))
  const t0 = Date.now()
  await s.kill()
  assert.ok(Date.now() - t0 < 5000, `kill() took ${Date.now() - t0} ms`)
  assert.notEqual(await starting, 'created')
  assert.ok(await waitFor(() => procsMatching(marker).length === 0, 5000), 'the starting box was left running')
})

test('create(template, opts) and create(opts): E2B template names mean the default image, others are images', async () => {
  const a = await Sandbox.create('code-interpreter-v1', { timeoutMs: 60_000 })
  const b = await Sandbox.create('base')
  try {
    assert.equal((await a.getInfo()).templateId, new kern.Sandbox().image)
    assert.equal((await b.getInfo()).name, 'base')
    assert.equal((await a.runCode('2 * 21')).text, '42')
  } finally {
    await a.kill()
    await b.kill()
  }
  await assert.rejects(
    Sandbox.create('not a valid image!'),
    (e) => e instanceof SandboxError && /image/.test(e.message),
  )
  await assert.rejects(Sandbox.create({ timeoutMs: 0 }), InvalidArgumentError)
  await assert.rejects(Sandbox.create({ allowInternetAccess: 'yes' }), InvalidArgumentError)
  await assert.rejects(
    Sandbox.create({ kern: { image: 'x' } }),
    (e) => e instanceof InvalidArgumentError && /kern\.image/.test(e.message),
  )
})

test('kern options pass through; the workspace is /home/user, the working directory too', async () => {
  const ws = tmpDir()
  const s = await Sandbox.create({ kern: { workspace: ws, memoryMb: 256 } })
  try {
    const ex = await s.runCode('import os\nopen("made.txt", "w").write("x")\n(os.getcwd(), os.path.expanduser("~"))')
    assert.equal(ex.text, "('/home/user', '/home/user')")
    assert.equal(require('node:fs').readFileSync(`${ws}/made.txt`, 'utf8'), 'x')
  } finally {
    await s.kill()
  }
  assert.ok(require('node:fs').existsSync(`${ws}/made.txt`), 'a named workspace outlives the sandbox')
})

test('the network is off unless allowInternetAccess', async () => {
  const ex = await sbx.runCode(
    'import socket\ntry:\n    socket.create_connection(("1.1.1.1", 53), timeout=2)\n    net = "up"\nexcept OSError:\n    net = "down"\nnet',
  )
  assert.equal(ex.text, "'down'")
})

test('setTimeout() sets the lifetime; at its end the sandbox is killed', async () => {
  const s = await Sandbox.create({ timeoutMs: 60_000 })
  await s.runCode('1')
  await s.setTimeout(200)
  const info = await s.getInfo()
  assert.ok(info.endAt - Date.now() <= 200)
  await new Promise((r) => setTimeout(r, 600))
  assert.equal(await s.isRunning(), false)
  await assert.rejects(s.runCode('1'), (e) => e instanceof SandboxError && /killed|lifetime/.test(e.message))
  await assert.rejects(Sandbox.connect(s.sandboxId), e2b.SandboxNotFoundError)
  await assert.rejects(sbx.setTimeout(-5), InvalidArgumentError)
})

test("kill() while runCode or a command is in flight rejects them with E2B's TimeoutError", async () => {
  const s = await Sandbox.create()
  await s.runCode('1')
  const killed = (e) =>
    e instanceof TimeoutError && /sandbox was killed while the request was in progress/.test(e.message)
  const inFlight = [
    assert.rejects(s.runCode('import time; time.sleep(30)'), killed),
    assert.rejects(s.commands.run('sleep 30'), killed),
    assert.rejects(s.runCode('sleep 30', { language: 'bash' }), killed),
  ]
  await new Promise((r) => setTimeout(r, 300))
  assert.equal(await s.kill(), true)
  await Promise.all(inFlight)
  assert.equal(await s.isRunning(), false)
  assert.equal(await s.kill(), false) // idempotent: false once it has ended, as E2B's
  assert.equal(await Sandbox.kill(s.sandboxId), false)
  await assert.rejects(s.files.read('x'), SandboxError)
})

test("a matplotlib figure's Result carries its PNG and its chart (E2B's shape)", async () => {
  const ex = await sbx.runCode(
    'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9], label="sq")\nplt.title("squares")\nplt.xlabel("n")\nplt.show()',
  )
  assert.equal(ex.error, undefined, ex.error && ex.error.traceback)
  const [r] = ex.results
  assert.ok(r.png && Buffer.from(r.png, 'base64').subarray(1, 4).toString() === 'PNG')
  assert.equal(r.chart.type, e2b.ChartType.LINE)
  assert.equal(r.chart.title, 'squares')
  assert.equal(r.chart.x_label, 'n')
  assert.deepEqual(
    r.chart.elements.map((e) => [e.label, e.points]),
    [
      [
        'sq',
        [
          [1, 1],
          [2, 4],
          [3, 9],
        ],
      ],
    ],
  )
  assert.equal(r.raw.chart, r.chart)
  assert.deepEqual(r.formats(), ['png'])
})

test("charts as E2B gives them: a pie wedge's own angle, no title is null, an empty extra is {}", async () => {
  const ex = await sbx.runCode(
    'import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.pie([90, 10], labels=["big", "small"])\nplt.show()',
  )
  assert.equal(ex.error, undefined, ex.error && ex.error.traceback)
  const [r] = ex.results
  assert.equal(r.chart.type, e2b.ChartType.PIE)
  assert.equal(r.chart.title, null)
  assert.deepEqual(
    r.chart.elements.map((w) => [w.label, w.angle]),
    [
      ['big', 324],
      ['small', 36],
    ],
  )
  assert.deepEqual(r.extra, {})
  const sup = await sbx.runCode(
    'fig, (a, b) = plt.subplots(1, 2)\na.plot([1, 2], [3, 4]); a.set_title("left")\nb.pie([1, 3])\nplt.show()',
  )
  const [s] = sup.results
  assert.equal(s.chart.type, e2b.ChartType.SUPERCHART)
  // E2B titles a figure by its suptitle, '' without one (an axes without a title is null).
  assert.equal(s.chart.title, '')
  assert.deepEqual(
    s.chart.elements.map((c) => c.title),
    ['left', null],
  )
  assert.deepEqual(
    s.chart.elements[1].elements.map((w) => w.angle),
    [90, 270],
  )
})
