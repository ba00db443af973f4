'use strict'
// kern-sandbox/e2b's sandbox.commands: processes of the sandbox's machine. Foreground runs with
// E2B's result and CommandExitError, envs, cwd, user, live output, timeouts; background handles,
// stdin, list/kill/connect.

const test = require('node:test')
const assert = require('node:assert/strict')
require('./helpers')
const {
  Sandbox,
  CommandExitError,
  TimeoutError,
  InvalidArgumentError,
  SandboxError,
  NotFoundError,
} = require('kern-sandbox/e2b')
const { waitFor } = require('./helpers')

let sbx
test.before(async () => {
  sbx = await Sandbox.create({ envs: { KST_SBX: 'sandbox-wide' } })
})
test.after(async () => {
  await sbx.kill()
})

test('run resolves to { stdout, stderr, exitCode, error } in /home/user, with the files cells wrote', async () => {
  await sbx.runCode('open("from-cell.txt", "w").write("hi")')
  const r = await sbx.commands.run('pwd; cat from-cell.txt; echo; echo oops >&2; echo "$KST_SBX"')
  assert.equal(r.stdout, '/home/user\nhi\nsandbox-wide\n')
  assert.match(r.stderr, /oops\n/)
  assert.equal(r.exitCode, 0)
  assert.equal(r.error, undefined)
  assert.deepEqual(Object.keys(r).sort(), ['error', 'exitCode', 'stderr', 'stdout'])
})

test('envs and cwd apply to that command', async () => {
  await sbx.files.makeDir('proj')
  const r = await sbx.commands.run('pwd; echo "$A-$B"', { envs: { A: '1', B: 'two words' }, cwd: '/home/user/proj' })
  assert.equal(r.stdout, '/home/user/proj\n1-two words\n')
  assert.equal((await sbx.commands.run('echo "${A:-unset}"')).stdout, 'unset\n')
  await assert.rejects(sbx.commands.run('true', { envs: { 'BAD=NAME': 'x' } }), InvalidArgumentError)
  assert.equal((await sbx.commands.run('pwd', { cwd: 'proj' })).stdout, '/home/user/proj\n', 'relative to the home')
  await assert.rejects(sbx.commands.run('true', { cwd: '' }), InvalidArgumentError)
  await assert.rejects(sbx.commands.run('true', { cwd: '/home/user/missing' }), SandboxError)
})

test('a non-zero exit rejects with CommandExitError carrying the result', async () => {
  await assert.rejects(sbx.commands.run('echo out; echo err >&2; exit 7'), (e) => {
    assert.ok(e instanceof CommandExitError)
    assert.equal(e.exitCode, 7)
    assert.equal(e.stdout, 'out\n')
    assert.match(e.stderr, /err\n/)
    assert.equal(e.error, 'exit status 7')
    return true
  })
})

test('onStdout/onStderr get the output as strings while it runs', async () => {
  const out = []
  const err = []
  await sbx.commands.run('echo one; echo two >&2; printf "é"', {
    onStdout: (d) => out.push(d),
    onStderr: (d) => err.push(d),
  })
  assert.equal(out.join(''), 'one\né')
  assert.ok(out.every((d) => typeof d === 'string'))
  assert.match(err.join(''), /two\n/)
})

test('timeoutMs stops the command with TimeoutError; bad arguments reject, naming the value', async () => {
  await assert.rejects(sbx.commands.run('sleep 30', { timeoutMs: 300 }), TimeoutError)
  await assert.rejects(sbx.commands.run(['ls']), InvalidArgumentError)
  await assert.rejects(
    sbx.commands.run('true', { timeoutMs: -1 }),
    (e) => e instanceof InvalidArgumentError && /-1/.test(e.message),
  )
  await assert.rejects(
    sbx.commands.run('true', { user: 'no body' }),
    (e) => e instanceof InvalidArgumentError && /no body/.test(e.message),
  )
  await assert.rejects(sbx.commands.kill(-3), (e) => e instanceof InvalidArgumentError && /-3/.test(e.message))
  await assert.rejects(sbx.commands.run('true', { onStdout: 'x' }), InvalidArgumentError)
})

test("a command runs as E2B's do: bash login shell, in the user's home; user 'root' runs in /root", async () => {
  const r = await sbx.commands.run('shopt -q login_shell && echo login; echo "$HOME"; pwd')
  assert.equal(r.stdout, 'login\n/home/user\n/home/user\n')
  const root = await sbx.commands.run('id -u; echo "$HOME"; pwd', { user: 'root' })
  assert.equal(root.stdout, '0\n/root\n/root\n')
})

test('background: a handle with pid, output so far, exitCode, wait(); listed while it runs', async () => {
  const h = await sbx.commands.run('echo started; sleep 30', { background: true, envs: { TAG: 'bg' } })
  assert.ok(Number.isInteger(h.pid) && h.pid > 0)
  assert.ok(await waitFor(() => h.stdout === 'started\n', 10_000), `stdout so far: ${JSON.stringify(h.stdout)}`)
  assert.equal(h.exitCode, undefined)
  const listed = (await sbx.commands.list()).find((p) => p.pid === h.pid)
  assert.ok(listed, 'the running command is listed')
  assert.equal(listed.args.at(-1), 'echo started; sleep 30')
  assert.deepEqual(listed.envs, { TAG: 'bg' })
  assert.equal(listed.cwd, '/home/user')
  assert.equal(await sbx.commands.kill(h.pid), true)
  await assert.rejects(h.wait(), (e) => e instanceof CommandExitError && e.exitCode !== 0 && e.stdout === 'started\n')
  assert.ok(h.exitCode !== undefined && h.exitCode !== 0)
  assert.equal(await sbx.commands.kill(h.pid), false, 'a pid that is gone')
  assert.ok(!(await sbx.commands.list()).some((p) => p.pid === h.pid))
  const ok = await sbx.commands.run('echo fine', { background: true })
  assert.deepEqual(await ok.wait(), { exitCode: 0, error: undefined, stdout: 'fine\n', stderr: '' })
  assert.equal(ok.exitCode, 0)
  assert.equal(await ok.kill(), false)
})

test('stdin: sendStdin and closeStdin, by handle and by pid', async () => {
  const h = await sbx.commands.run('cat', { background: true, stdin: true })
  await h.sendStdin('one ')
  await sbx.commands.sendStdin(h.pid, new TextEncoder().encode('two'))
  await sbx.commands.closeStdin(h.pid)
  assert.equal((await h.wait()).stdout, 'one two')
  const h2 = await sbx.commands.run('wc -c', { background: true, stdin: true })
  await h2.sendStdin('abc')
  await h2.closeStdin()
  assert.equal((await h2.wait()).stdout.trim(), '3')
  await assert.rejects(sbx.commands.sendStdin(999_999, 'x'), NotFoundError)
})

test('connect(pid) gets the output from then on; disconnect() stops the callbacks, not the command', async () => {
  const h = await sbx.commands.run('read line; echo "got $line"; read more; echo "then $more"', {
    background: true,
    stdin: true,
  })
  const seen = []
  const c = await sbx.commands.connect(h.pid, { onStdout: (d) => seen.push(d) })
  assert.equal(c.pid, h.pid)
  await h.sendStdin('a\n')
  assert.ok(await waitFor(() => seen.join('') === 'got a\n', 10_000), JSON.stringify(seen))
  await c.disconnect()
  await h.sendStdin('b\n')
  assert.equal((await h.wait()).stdout, 'got a\nthen b\n')
  assert.equal(seen.join(''), 'got a\n', 'nothing after disconnect()')
  await assert.rejects(sbx.commands.connect(999_999), NotFoundError)
})

test('a background command past its timeoutMs: wait() rejects with TimeoutError', async () => {
  const h = await sbx.commands.run('sleep 30', { background: true, timeoutMs: 300 })
  await assert.rejects(h.wait(), (e) => e instanceof TimeoutError && /300 ms/.test(e.message))
})

test('a process of one command is seen by the next: they share the machine', async () => {
  const h = await sbx.commands.run('echo $$ > /tmp/bg.pid; exec sleep 30', { background: true })
  assert.ok(
    await waitFor(
      async () => (await sbx.files.exists('/tmp/bg.pid')) && (await sbx.files.read('/tmp/bg.pid')).trim() !== '',
      10_000,
    ),
  )
  const pid = (await sbx.files.read('/tmp/bg.pid')).trim()
  assert.equal((await sbx.commands.run(`kill -0 ${pid} && echo alive`)).stdout, 'alive\n')
  await h.kill()
})

test('commands have no network unless allowInternetAccess', async () => {
  const r = await sbx.commands.run("awk 'NR > 2 { print $1 }' /proc/net/dev")
  assert.equal(r.stdout, 'lo:\n', 'only the loopback interface')
})

test("a command that floods its output stays bounded: the sandbox's maxOutputBytes, while it runs and after", async () => {
  const s = await Sandbox.create({ kern: { maxOutputBytes: 10_000 } })
  try {
    let streamed = 0
    const h = await s.commands.run('seq 1 200000; sleep 30', {
      background: true,
      onStdout: (d) => (streamed += d.length),
    })
    assert.ok(await waitFor(() => streamed > 100_000, 15_000), `streamed ${streamed}`)
    assert.ok(h.stdout.length <= 10_000, `kept while running: ${h.stdout.length}`)
    await h.kill()
    const end = await h.wait().catch((e) => e)
    assert.ok(end.stdout.length <= 10_000, `kept at the end: ${end.stdout.length}`)
    const r = await s.commands.run('seq 1 200000')
    assert.ok(r.stdout.length <= 10_000 && r.stdout.startsWith('1\n2\n3\n'), `foreground: ${r.stdout.length}`)
  } finally {
    await s.kill()
  }
})
