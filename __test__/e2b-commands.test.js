'use strict'
// kern-sandbox/e2b's sandbox.commands.run: a command in a fresh box on the workspace, E2B's result
// and CommandExitError, envs, cwd, live output and its timeout.

const test = require('node:test')
const assert = require('node:assert/strict')
require('./helpers')
const { Sandbox, CommandExitError, TimeoutError, InvalidArgumentError } = require('kern-sandbox/e2b')

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
  await assert.rejects(sbx.commands.run('true', { cwd: 'relative' }), InvalidArgumentError)
  await assert.rejects(sbx.commands.run('true', { cwd: '/home/user/missing' }), CommandExitError)
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

test('timeoutMs stops the command with TimeoutError; background is refused', async () => {
  const t0 = Date.now()
  await assert.rejects(sbx.commands.run('sleep 30', { timeoutMs: 300 }), TimeoutError)
  assert.ok(Date.now() - t0 < 5000)
  await assert.rejects(sbx.commands.run('sleep 1', { background: true }), InvalidArgumentError)
  await assert.rejects(sbx.commands.run(['ls']), InvalidArgumentError)
})

test('commands have no network unless allowInternetAccess', async () => {
  const r = await sbx.commands.run("awk 'NR > 2 { print $1 }' /proc/net/dev")
  assert.equal(r.stdout, 'lo:\n', 'only the loopback interface')
})
