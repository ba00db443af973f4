'use strict'
// The `kern box` argv contract, flag for flag and in order, and what reaches kern besides argv
// (its environment, the private env file). argv-order tests read the stand-in's argv log and are
// skipped against a real kern; env/env-file tests use a fake kern script and run everywhere.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { kern, openSandbox, STANDIN_ONLY, recordingKern, fakeKern, sandboxWith, tmpDir } = require('./helpers')

/** Splits a recorded `box` argv into its parts and checks the fixed head. */
function parseBox(argv) {
  assert.equal(argv[0], 'box')
  const name = argv[1]
  assert.match(name, /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, 'a valid kern box name')
  const dd = argv.indexOf('--')
  assert.ok(dd > 0, 'argv has a -- separator')
  return { name, flags: argv.slice(2, dd), command: argv.slice(dd + 1) }
}

/** Replaces the per-call values (env file path) with placeholders, checking their form. */
function normalise(flags, ws) {
  const out = [...flags]
  const i = out.indexOf('--env-file')
  assert.ok(i >= 0, '--env-file is passed')
  assert.equal(i, out.length - 2, '--env-file FILE is the last flag before --')
  const envFile = out[i + 1]
  assert.ok(path.isAbsolute(envFile))
  assert.ok(!envFile.startsWith(ws + '/'), `env file ${envFile} is outside the workspace ${ws}`)
  out[i + 1] = '<ENVFILE>'
  return { flags: out.map((f) => f.split(ws).join('<WS>')), envFile }
}

test('argv: defaults, exact order', { skip: STANDIN_ONLY }, async (t) => {
  const rec = recordingKern()
  const sbx = await openSandbox(t, {}, { bin: rec.bin })
  const r = await sbx.runCode('print(1)')
  assert.equal(r.stdout, '1\n', r.stderr)
  const ws = sbx.workspacePath
  assert.ok(ws && path.isAbsolute(ws))
  const calls = rec.boxCalls()
  assert.equal(calls.length, 1)
  const { flags, command } = parseBox(calls[0])
  assert.deepEqual(normalise(flags, ws).flags, [
    '--image',
    'python:3.12-slim',
    '--ro',
    '-v',
    '<WS>:/workspace',
    '--workdir',
    '/workspace',
    '--timeout',
    '35',
    '--memory',
    '512m',
    '--pids-limit',
    '256',
    '--cap-drop',
    'ALL',
    '--env-file',
    '<ENVFILE>',
  ])
  // Python goes through the rich-result runner, as in 0.1.23: the code is in a workspace file.
  assert.equal(command.length, 2)
  assert.equal(command[0], 'python3')
  assert.match(command[1], /^\/workspace\/\.run-[0-9a-f]{8}\.py$/)
  const bash = await sbx.runCode('echo 1', { language: 'bash' })
  assert.equal(bash.stdout, '1\n')
  // bash where the image has it, else sh, chosen in the box; the code is an argument of its own.
  const shell = parseBox(rec.boxCalls()[1]).command
  assert.deepEqual([shell[0], shell[1], shell.at(-1)], ['sh', '-c', 'echo 1'])
  assert.match(shell[2], /command -v bash/)
})

test('argv: every optional flag in its place', { skip: STANDIN_ONLY }, async (t) => {
  const rec = recordingKern({ KERN_STANDIN_PROFILES: 'vcpu:heavy' })
  const ro = tmpDir('kst-ro-')
  const rw = tmpDir('kst-rw-')
  const wsDir = path.join(tmpDir(), 'ws')
  const sbx = await openSandbox(
    t,
    {
      workspace: wsDir,
      image: 'python:3.12-slim',
      memoryMb: 256,
      cpus: 1.5,
      pids: 64,
      timeoutS: 7,
      egressAllow: ['pkgs.example.org', 'files.example.net'],
      profiles: ['vcpu:heavy'],
      mounts: { [ro]: ['/data', 'ro'], [rw]: '/out' },
      securityProfile: 'untrusted',
      depsReadonly: true,
    },
    { bin: rec.bin },
  )
  await sbx.writeFile('.deps/marker.txt', 'x')
  const r = await sbx.run(['true'])
  assert.equal(r.exitCode, 0, r.stderr)
  const ws = fs.realpathSync(wsDir)
  const { flags, command } = parseBox(rec.boxCalls()[0])
  assert.deepEqual(normalise(flags, ws).flags, [
    '--image',
    'python:3.12-slim',
    '--ro',
    '-v',
    '<WS>:/workspace',
    '--workdir',
    '/workspace',
    '-v',
    '<WS>/.deps:/workspace/.deps:ro',
    '--timeout',
    '12',
    '--memory',
    '256m',
    '--cpus',
    '1.5',
    '--pids-limit',
    '64',
    '--egress-allow',
    'pkgs.example.org,files.example.net',
    'vcpu:heavy',
    '-v',
    `${fs.realpathSync(ro)}:/data:ro`,
    '-v',
    `${fs.realpathSync(rw)}:/out`,
    '--cap-drop',
    'ALL',
    '--security-profile',
    'untrusted',
    '--env-file',
    '<ENVFILE>',
  ])
  assert.deepEqual(command, ['true'])
})

test('argv: requireLimits and apparmor flags follow --cap-drop', { skip: STANDIN_ONLY }, async (t) => {
  const rec = recordingKern()
  const sbx = await openSandbox(
    t,
    {
      requireLimits: true,
      apparmor: 'kern-box',
      capDrop: ['NET_RAW', 'cap_sys_admin'],
    },
    { bin: rec.bin },
  )
  await sbx.run(['true'])
  const { flags } = parseBox(rec.boxCalls()[0])
  const tail = flags.slice(flags.indexOf('--cap-drop'))
  assert.deepEqual(tail.slice(0, -2), [
    '--cap-drop',
    'NET_RAW',
    '--cap-drop',
    'SYS_ADMIN',
    '--require-limits',
    '--apparmor',
    'kern-box',
  ])
})

test('argv: memoryMb:null and pids:null omit their flags', { skip: STANDIN_ONLY }, async (t) => {
  const rec = recordingKern()
  const sbx = await openSandbox(t, { memoryMb: null, pids: null }, { bin: rec.bin })
  const r = await sbx.run(['true'])
  assert.equal(r.exitCode, 0, r.stderr)
  const { flags } = parseBox(rec.boxCalls()[0])
  assert.ok(!flags.includes('--memory'), flags.join(' '))
  assert.ok(!flags.includes('--pids-limit'), flags.join(' '))
  assert.ok(!flags.includes('--cpus'))
  assert.deepEqual(flags.slice(flags.indexOf('--timeout'), flags.indexOf('--timeout') + 3), [
    '--timeout',
    '35',
    '--cap-drop',
  ])
})

test('argv: network:true gives --net to run boxes', { skip: STANDIN_ONLY }, async (t) => {
  const rec = recordingKern()
  const sbx = await openSandbox(t, { network: true }, { bin: rec.bin })
  await sbx.run(['true'])
  const { flags } = parseBox(rec.boxCalls()[0])
  assert.equal(flags[flags.indexOf('--pids-limit') + 2], '--net')
  assert.ok(!flags.includes('--egress-allow'))
})

test('argv: default run boxes have no network flag', { skip: STANDIN_ONLY }, async (t) => {
  const rec = recordingKern()
  const sbx = await openSandbox(t, {}, { bin: rec.bin })
  await sbx.run(['true'])
  const { flags } = parseBox(rec.boxCalls()[0])
  assert.ok(!flags.includes('--net') && !flags.includes('--network') && !flags.includes('--egress-allow'))
})

test(
  'argv: egressAllow -> --net for the setup box, --egress-allow for run boxes',
  { skip: STANDIN_ONLY },
  async (t) => {
    const rec = recordingKern()
    const sbx = await openSandbox(
      t,
      {
        egressAllow: ['pkgs.example.org'],
        setup: 'echo set > /workspace/s.txt',
      },
      { bin: rec.bin },
    )
    await sbx.run(['true'])
    const [setup, run] = rec.boxCalls()
    const s = parseBox(setup)
    assert.ok(s.flags.includes('--net'), s.flags.join(' '))
    assert.ok(!s.flags.includes('--egress-allow'))
    assert.deepEqual(s.command, ['sh', '-c', 'echo set > /workspace/s.txt'])
    const r = parseBox(run)
    assert.ok(!r.flags.includes('--net'))
    assert.equal(r.flags[r.flags.indexOf('--egress-allow') + 1], 'pkgs.example.org')
    assert.notEqual(s.name, r.name, 'each box has its own name')
  },
)

test('argv: depsReadonly binds .deps only when it exists, never for setup', { skip: STANDIN_ONLY }, async (t) => {
  const rec = recordingKern()
  const sbx = await openSandbox(t, { depsReadonly: true, setup: 'mkdir -p /workspace/.deps' }, { bin: rec.bin })
  await sbx.run(['true'])
  const [setup, run] = rec.boxCalls()
  const hasDeps = (flags) => flags.some((f) => f.endsWith(':/workspace/.deps:ro'))
  assert.ok(!hasDeps(parseBox(setup).flags), 'setup box has no read-only deps bind')
  assert.ok(hasDeps(parseBox(run).flags), 'run box binds the deps read-only')
  const rec2 = recordingKern()
  const sbx2 = await openSandbox(t, { depsReadonly: true }, { bin: rec2.bin })
  await sbx2.run(['true'])
  assert.ok(!parseBox(rec2.boxCalls()[0]).flags.some((f) => f.includes('.deps')), 'no .deps yet: no bind')
})

test('argv: --timeout is the deadline + 5, per call too', { skip: STANDIN_ONLY }, async (t) => {
  const rec = recordingKern()
  const sbx = await openSandbox(t, { timeoutS: 3 }, { bin: rec.bin })
  await sbx.run(['true'])
  await sbx.run(['true'], { timeoutS: 10 })
  await sbx.run(['true'], { timeoutS: 2.5 })
  const timeouts = rec.boxCalls().map((a) => a[a.indexOf('--timeout') + 1])
  assert.equal(timeouts[0], '8')
  assert.equal(timeouts[1], '15')
  assert.match(timeouts[2], /^\d+$/, 'kern takes whole seconds')
  assert.ok(Number(timeouts[2]) >= 7.5, timeouts[2])
})

test(
  'argv: runCode languages (node runs its cell runner by path) and large code by path',
  { skip: STANDIN_ONLY },
  async (t) => {
    const rec = recordingKern()
    const sbx = await openSandbox(t, {}, { bin: rec.bin })
    await sbx.runCode('echo hi', { language: 'bash' })
    await sbx.runCode('console.log(1)', { language: 'node' })
    const big = '# ' + 'x'.repeat(130 * 1024) + '\nprint("big")\n'
    const r = await sbx.runCode(big)
    assert.equal(r.stdout, 'big\n', r.stderr)
    const [b, n, p] = rec.boxCalls().map((a) => parseBox(a).command)
    assert.deepEqual([b[0], b[1], b.at(-1)], ['sh', '-c', 'echo hi'])
    // As 0.1.23 runs Python cells: a runner file with the cell beside it, for rich results.
    assert.equal(n.length, 2)
    assert.equal(n[0], 'node')
    assert.match(n[1], /^\/workspace\/\.run-[0-9a-f]{8}\.js$/)
    assert.equal(p.length, 2)
    assert.equal(p[0], 'python3')
    assert.match(p[1], /^\/workspace\/\S+\.py$/)
  },
)

test('argv: env values never appear in argv', { skip: STANDIN_ONLY }, async (t) => {
  const rec = recordingKern()
  const secret = 'sk-SECRET-' + Date.now()
  const sbx = await openSandbox(t, { env: { API_KEY: secret } }, { bin: rec.bin })
  const r = await sbx.runCode('import os; print(os.environ["API_KEY"])')
  assert.equal(r.stdout, secret + '\n', r.stderr)
  for (const a of rec.calls()) assert.ok(!a.join(' ').includes(secret), 'secret leaked into argv')
})

// --- fake kern: kern's environment and the env file -------------------------------------------

test('env file: private 0600 file in a 0700 dir outside the workspace, removed at close', async (t) => {
  const fake = fakeKern()
  const secret = 'tok-' + Date.now()
  const sbx = await openSandbox(t, { env: { API_KEY: secret, EMPTY: '', EQ: 'a=b' } }, { bin: fake.bin })
  const r = await sbx.run(['true'])
  assert.equal(r.exitCode, 0, r.stderr)
  const [call] = fake.boxCalls()
  const ws = sbx.workspacePath
  assert.ok(call.envFile, 'the fake kern got --env-file')
  assert.equal(call.envFile.error, undefined, call.envFile.error)
  assert.equal(call.envFile.mode, 0o600)
  assert.equal(call.envFile.dirMode, 0o700)
  assert.ok(!fs.realpathSync(path.dirname(call.envFile.path)).startsWith(ws), 'outside the workspace')
  const lines = call.envFile.content.split('\n').filter(Boolean).sort()
  assert.deepEqual(lines, [`API_KEY=${secret}`, 'EMPTY=', 'EQ=a=b', 'PYTHONPATH=/workspace/.deps'].sort())
  assert.ok(!call.argv.join('\0').includes(secret), 'value not in argv')
  await sbx.close()
  assert.ok(!fs.existsSync(call.envFile.path), 'env file removed at close')
})

test('env file: a caller PYTHONPATH wins over the default; no env still gets PYTHONPATH', async (t) => {
  const fake = fakeKern()
  const a = await openSandbox(t, { env: { PYTHONPATH: '/opt/x' } }, { bin: fake.bin })
  const b = await openSandbox(t, {}, { bin: fake.bin })
  await a.run(['true'])
  await b.run(['true'])
  const [ca, cb] = fake.boxCalls()
  assert.equal(ca.envFile.content, 'PYTHONPATH=/opt/x\n')
  assert.equal(cb.envFile.content, 'PYTHONPATH=/workspace/.deps\n')
})

test('env file: concurrent calls all read it whole; the box cannot reach it (no /workspace/.kern-env)', async (t) => {
  const fake = fakeKern({ sleepMs: 200 })
  const sbx = await openSandbox(t, { env: { A: '1' } }, { bin: fake.bin })
  const rs = await Promise.all([sbx.run(['true']), sbx.run(['true']), sbx.run(['true'])])
  assert.deepEqual(
    rs.map((r) => r.exitCode),
    [0, 0, 0],
  )
  const calls = fake.boxCalls()
  assert.equal(calls.length, 3)
  for (const c of calls) {
    assert.equal(c.envFile.error, undefined, c.envFile.error)
    assert.equal(c.envFile.content.split('\n').filter(Boolean).sort().join(','), 'A=1,PYTHONPATH=/workspace/.deps')
    assert.ok(!fs.realpathSync(c.envFile.path).startsWith(sbx.workspacePath))
  }
  assert.ok(!fs.existsSync(path.join(sbx.workspacePath, '.kern-env')))
})

test('enforceLimits:false sets KERN_NO_SCOPE=1 in kern env; default does not', async (t) => {
  assert.equal(process.env.KERN_NO_SCOPE, undefined, 'test precondition')
  const fake = fakeKern()
  const loose = await openSandbox(t, { enforceLimits: false }, { bin: fake.bin })
  const strict = await openSandbox(t, {}, { bin: fake.bin })
  await loose.run(['true'])
  await strict.run(['true'])
  const [l, s] = fake.boxCalls()
  assert.equal(l.env.KERN_NO_SCOPE, '1')
  assert.equal(s.env.KERN_NO_SCOPE, undefined)
})

test('setup: `pip install X` is rewritten to --target /workspace/.deps in a network-on box', async (t) => {
  const fake = fakeKern()
  await openSandbox(t, { setup: 'pip install requests==2.31.0 rich' }, { bin: fake.bin })
  const [call] = fake.boxCalls()
  const dd = call.argv.indexOf('--')
  assert.deepEqual(call.argv.slice(dd + 1), [
    'sh',
    '-c',
    'pip install --target /workspace/.deps --no-cache-dir --disable-pip-version-check requests==2.31.0 rich',
  ])
  assert.ok(call.argv.slice(0, dd).includes('--net'), 'setup box has the network')
  const timeout = Number(call.argv[call.argv.indexOf('--timeout') + 1])
  assert.ok(timeout >= 125, `setup gets at least 120 s (+5 backstop), got ${timeout}`)
})

test('setup: a non-pip command is passed to sh -c unchanged', async (t) => {
  const fake = fakeKern()
  await openSandbox(t, { setup: 'apt-get update && echo pip install x' }, { bin: fake.bin })
  const [call] = fake.boxCalls()
  assert.deepEqual(call.argv.slice(call.argv.indexOf('--') + 1), ['sh', '-c', 'apt-get update && echo pip install x'])
})

test('an already-aborted signal starts no box at all', async (t) => {
  const fake = fakeKern()
  const sbx = await openSandbox(t, {}, { bin: fake.bin })
  const ac = new AbortController()
  ac.abort()
  await assert.rejects(sbx.run(['true'], { signal: ac.signal }), (e) => e.name === 'AbortError')
  await assert.rejects(sbx.runCode('print(1)', { signal: ac.signal }), (e) => e.name === 'AbortError')
  assert.equal(fake.calls().length, 0, 'kern was never invoked')
})

test('top-level runCode with an already-aborted signal invokes no kern', async () => {
  const fake = fakeKern()
  const saved = process.env.KERN_BIN
  process.env.KERN_BIN = fake.bin
  try {
    const ac = new AbortController()
    const reason = new Error('stop now')
    ac.abort(reason)
    await assert.rejects(kern.runCode('print(1)', { signal: ac.signal }), (e) => e === reason)
  } finally {
    process.env.KERN_BIN = saved
  }
  assert.equal(fake.calls().length, 0)
})

test("boxWorkspace moves the one bind, --workdir, PYTHONPATH and setup's pip target together", async () => {
  const fake = fakeKern()
  const sbx = await sandboxWith(fake.bin, { boxWorkspace: '/home/user', depsReadonly: true, setup: 'pip install rich' })
  assert.equal(sbx.boxWorkspace, '/home/user')
  await sbx.open()
  try {
    fs.mkdirSync(path.join(sbx.workspacePath, '.deps'), { recursive: true })
    await sbx.runCode('print(1)')
    const [setup, run] = fake.boxCalls()
    const ws = sbx.workspacePath
    const dd = setup.argv.indexOf('--')
    assert.equal(
      setup.argv.slice(dd + 1)[2],
      'pip install --target /home/user/.deps --no-cache-dir --disable-pip-version-check rich',
    )
    const flags = run.argv.slice(0, run.argv.indexOf('--'))
    assert.deepEqual(flags.slice(flags.indexOf('--ro') + 1, flags.indexOf('--timeout')), [
      '-v',
      `${ws}:/home/user`,
      '--workdir',
      '/home/user',
      '-v',
      `${ws}/.deps:/home/user/.deps:ro`,
    ])
    assert.equal(flags.filter((f) => f === '-v').length, 2, 'the workspace is bound once (plus .deps)')
    assert.match(run.argv[run.argv.length - 1], /^\/home\/user\/\.run-[0-9a-f]{8}\.py$/)
    assert.equal(run.envFile.content, 'PYTHONPATH=/home/user/.deps\n')
  } finally {
    await sbx.close()
  }
})

test('boxWorkspace must be a plain absolute path that is not / or under /proc, /sys, /dev', () => {
  for (const bad of [
    '',
    '/',
    'home/user',
    '/home/user/',
    '/a/../b',
    '/a/./b',
    '/a:b',
    '/a,b',
    '/a b',
    '/proc',
    '/dev/x',
    '/a\nb',
    '-v',
  ]) {
    assert.throws(
      () => new kern.Sandbox({ boxWorkspace: bad }),
      (e) =>
        e instanceof kern.SandboxError && /^invalid option boxWorkspace: expected an absolute path/.test(e.message),
      JSON.stringify(bad),
    )
  }
  assert.throws(() => new kern.Sandbox({ boxWorkspace: 7 }), /invalid option boxWorkspace: expected a string/)
  assert.equal(new kern.Sandbox().boxWorkspace, '/workspace')
})

test('a box sees the workspace at boxWorkspace, as its working directory', async (t) => {
  const sbx = await openSandbox(t, { boxWorkspace: '/home/user' })
  await sbx.writeFile('probe.txt', 'here')
  const r = await sbx.runCode(
    'import os; print(os.getcwd(), open("/home/user/probe.txt").read(), os.path.exists("/workspace/probe.txt"))',
  )
  assert.equal(r.stdout, '/home/user here False\n', r.stderr)
  const k = await sbx.kernel()
  assert.equal((await k.runCode('import os; os.getcwd()')).results[0].text, "'/home/user'")
  await k.close()
})
