'use strict'
// Running code: languages, the README examples, exit codes, large code, argument refusals, setup.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const {
  kern,
  openSandbox,
  realKern,
  tmpDir,
  rand,
  sessionDirs,
  fakeKern,
  wrapKern,
  procsMatching,
  waitFor,
} = require('./helpers')

const { Sandbox, SandboxError } = kern

function interfaces(procNetDev) {
  return procNetDev
    .split('\n')
    .slice(2)
    .map((l) => l.split(':')[0].trim())
    .filter(Boolean)
    .sort()
}

let sbx
test.before(async () => {
  sbx = await new Sandbox({ env: { GREETING: 'hello from env' } }).open()
})
test.after(async () => {
  await sbx.close()
})

test('runCode python (default language)', async () => {
  const r = await sbx.runCode('import sys\nprint("py", sys.version_info[0])')
  assert.equal(r.stdout, 'py 3\n', r.stderr)
  assert.equal(r.exitCode, 0)
  assert.equal(r.success, true)
})

test('runCode bash', async () => {
  const r = await sbx.runCode('echo "sh $((6 * 7))"; echo err >&2', { language: 'bash' })
  assert.equal(r.stdout, 'sh 42\n')
  assert.ok(r.stderr.endsWith('err\n'), r.stderr)
  assert.equal(r.success, true)
})

test('README: runCode node on node:20-slim', async () => {
  const r = await kern.runCode('console.log([1,2,3].map(x => x * x))', { image: 'node:20-slim', language: 'node' })
  assert.equal(r.stdout, '[ 1, 4, 9 ]\n', r.stderr)
  assert.equal(r.success, true)
})

test('node code is evaluated (-e), not just syntax-checked', async () => {
  const r = await sbx.runCode('require("fs").writeFileSync("from-node.txt", "n"); process.exitCode = 4', {
    language: 'node',
  })
  assert.equal(r.exitCode, 4, r.stderr)
  assert.equal((await sbx.readFile('from-node.txt')).toString(), 'n')
  // The names `node -e` code finds, as 0.1.x ran it.
  const names = await sbx.runCode('console.log(__filename, __dirname, typeof require)', { language: 'node' })
  assert.equal(names.stdout, '[eval] . function\n', names.stderr)
})

test('a non-zero exit from the code is a result, not a fault', async () => {
  const r = await sbx.runCode('import sys\nprint("partial")\nsys.exit(3)')
  assert.equal(r.exitCode, 3)
  assert.equal(r.fault, null)
  assert.equal(r.success, false)
  assert.equal(r.stdout, 'partial\n')
  const e = await sbx.runCode('raise ValueError("boom")')
  assert.equal(e.exitCode, 1)
  assert.equal(e.fault, null)
  assert.match(e.stderr, /ValueError: boom/)
  const x = await sbx.run(['sh', '-c', 'exit 255'])
  assert.equal(x.exitCode, 255)
  assert.equal(x.fault, null)
})

test('run() takes an argv array, no shell', async () => {
  const r = await sbx.run(['python3', '-c', 'import sys; print(sys.argv[1:])', 'a b', '$HOME', ';rm -rf /'])
  assert.equal(r.stdout, "['a b', '$HOME', ';rm -rf /']\n", r.stderr)
})

test('the box runs in /workspace with the session env and PYTHONPATH', async () => {
  const r = await sbx.runCode(
    'import os\nprint(os.getcwd())\nprint(os.environ["GREETING"])\nprint(os.environ["PYTHONPATH"])',
  )
  assert.equal(r.stdout, '/workspace\nhello from env\n/workspace/.deps\n', r.stderr)
})

test('files persist across calls, memory does not', async () => {
  await sbx.runCode('x = 41\nopen("state.txt", "w").write("41")')
  const r = await sbx.runCode('print("x" in globals(), int(open("state.txt").read()) + 1)')
  assert.equal(r.stdout, 'False 42\n', r.stderr)
})

test('runCode: code over 128 KiB runs through a workspace file that is removed and not reported', async () => {
  const filler = '#' + 'y'.repeat(200 * 1024) + '\n'
  const code =
    filler +
    'open("big-ran.txt", "w").write("ok")\nprint(len(open(__file__).read()) if "__file__" in dir() else "nofile")'
  assert.ok(Buffer.byteLength(code) > 128 * 1024)
  const r = await sbx.runCode(code)
  assert.equal(r.exitCode, 0, r.stderr)
  assert.equal(r.fault, null)
  assert.deepEqual(
    r.files.map((f) => f.path),
    ['big-ran.txt'],
    "only the code's own file is reported",
  )
  const listed = (await sbx.listFiles()).map((f) => f.path)
  assert.ok(
    !listed.some((p) => p !== 'big-ran.txt' && p !== 'state.txt' && p !== 'from-node.txt'),
    `leftover: ${listed}`,
  )
  const onDisk = fs.readdirSync(sbx.workspacePath)
  assert.ok(!onDisk.some((n) => n.startsWith('.cell')), `cell file left: ${onDisk}`)
})

test('runCode: large bash and node code also work', async () => {
  const bash = '#' + 'z'.repeat(130 * 1024) + '\necho big-bash'
  const r = await sbx.runCode(bash, { language: 'bash' })
  assert.equal(r.stdout, 'big-bash\n', r.stderr)
  const node = '//' + 'z'.repeat(130 * 1024) + '\nconsole.log("big-node")'
  const n = await sbx.runCode(node, { language: 'node' })
  assert.equal(n.stdout, 'big-node\n', n.stderr)
})

test('run() refuses a string, an empty array, a non-string element', async () => {
  await assert.rejects(sbx.run('echo hi'), SandboxError)
  await assert.rejects(sbx.run([]), SandboxError)
  await assert.rejects(sbx.run(['echo', 1]), SandboxError)
  await assert.rejects(sbx.run(['echo', null]), SandboxError)
  await assert.rejects(sbx.run(null), SandboxError)
})

test('a NUL byte in code or argv is a SandboxError', async () => {
  await assert.rejects(sbx.runCode('print(1)\0'), SandboxError)
  await assert.rejects(sbx.runCode('echo a\0b', { language: 'bash' }), SandboxError)
  await assert.rejects(sbx.run(['echo', 'a\0b']), SandboxError)
  await assert.rejects(sbx.run(['ec\0ho']), SandboxError)
})

test('an unsupported language is a SandboxError', async () => {
  for (const language of ['ruby', 'Python', '', 'sh ']) {
    await assert.rejects(sbx.runCode('x', { language }), SandboxError, `language ${JSON.stringify(language)}`)
  }
})

test('every method before open() fails with SandboxError', async () => {
  const s = new Sandbox()
  await assert.rejects(s.runCode('print(1)'), SandboxError)
  await assert.rejects(s.run(['true']), SandboxError)
  await assert.rejects(s.writeFile('a.txt', 'x'), SandboxError)
  await assert.rejects(s.readFile('a.txt'), SandboxError)
  await assert.rejects(s.listFiles(), SandboxError)
  assert.throws(() => s.snapshot(path.join(tmpDir(), 's.tar.gz')), SandboxError)
  assert.throws(() => s.restore(path.join(tmpDir(), 's.tar.gz')), SandboxError)
})

test('runCode/run after close() fail with SandboxError', async () => {
  const s = await new Sandbox().open()
  await s.close()
  await assert.rejects(s.runCode('print(1)'), SandboxError)
  await assert.rejects(s.readFile('x'), SandboxError)
})

test('network is off in run boxes by default', async () => {
  const r = await sbx.runCode('print(open("/proc/net/dev").read())')
  assert.deepEqual(interfaces(r.stdout), ['lo'])
})

test('network:true shares the host network with run boxes', async () => {
  const host = interfaces(fs.readFileSync('/proc/net/dev', 'utf8'))
  const r = await kern.runCode('print(open("/proc/net/dev").read())', { network: true })
  assert.equal(r.exitCode, 0)
  assert.deepEqual(interfaces(r.stdout), host)
})

test('env values never show in any process command line while the box runs', async (t) => {
  const secret = `kst-secret-${rand()}`
  const marker = `kst-envps-${rand()}`
  const s = await openSandbox(t, { env: { API_TOKEN: secret } })
  const call = s.runCode(`# ${marker}\nimport os, time\nassert os.environ["API_TOKEN"]\ntime.sleep(2)\nprint("seen")`)
  assert.ok(await waitFor(() => procsMatching(marker).length > 0, 15_000), 'the box started')
  assert.deepEqual(procsMatching(secret), [], 'the secret is visible in a command line')
  const r = await call
  assert.equal(r.stdout, 'seen\n', r.stderr)
})

test('setup runs once at open() in a network-on box; its files are visible', async (t) => {
  const host = interfaces(fs.readFileSync('/proc/net/dev', 'utf8'))
  const s = await openSandbox(t, { setup: 'echo hi > /workspace/marker; cat /proc/net/dev > /workspace/setup-net' })
  assert.equal((await s.readFile('marker')).toString(), 'hi\n')
  const setupNet = interfaces((await s.readFile('setup-net')).toString())
  if (host.length > 1) assert.deepEqual(setupNet, host, 'setup box shares the host network')
  const r = await s.runCode('print(open("/proc/net/dev").read())')
  assert.deepEqual(interfaces(r.stdout), ['lo'], 'run boxes stay network-off')
})

test('a failing setup throws SandboxError and leaves no temp dir behind', async () => {
  const before = sessionDirs().length
  const s = new Sandbox({ setup: 'echo setup-broke >&2; exit 7' })
  await assert.rejects(s.open(), (e) => e instanceof SandboxError && /setup failed \(exit 7\)/.test(e.message))
  assert.equal(sessionDirs().length, before, 'no session dir left')
  assert.equal(s.workspacePath, null)
  await assert.rejects(s.runCode('print(1)'), SandboxError)
  await s.close()
})

test("a setup failure message carries the setup's own error, not kern's host warnings", async () => {
  // kern prints a long `kern: warning: --memory is not enforced ...` line on every box on hosts
  // without cgroup delegation; the message must still show what the setup command said.
  const s = new Sandbox({ setup: 'echo setup-broke >&2; exit 7' })
  await assert.rejects(s.open(), (e) => {
    assert.ok(e instanceof SandboxError)
    assert.match(e.message, /setup-broke/)
    assert.doesNotMatch(e.message, /kern: warning/)
    return true
  })
})

test('a setup failure does not delete a caller-provided workspace', async () => {
  const ws = tmpDir('kst-userws-')
  fs.writeFileSync(path.join(ws, 'keep.txt'), 'keep')
  await assert.rejects(new Sandbox({ workspace: ws, setup: 'exit 1' }).open(), SandboxError)
  assert.equal(fs.readFileSync(path.join(ws, 'keep.txt'), 'utf8'), 'keep')
})

test('top-level runCode passes options through and cleans up', async () => {
  const before = sessionDirs().length
  const r = await kern.runCode('echo $FOO', { language: 'bash', env: { FOO: 'bar' } })
  assert.equal(r.stdout, 'bar\n')
  assert.equal(sessionDirs().length, before)
})

test('env values reach the box exactly, or are refused: never silently altered', async () => {
  // kern's --env-file parser trims each line, so a value ending in whitespace would lose it.
  const env = { TRAIL: 'secret  ', TAB: 'v\t', LEAD: '  lead', EQ: 'a=b', QUOTE: '"q"', EMPTY: '' }
  const s = new Sandbox({ env })
  let r
  try {
    await s.open()
    r = await s.runCode(
      'import os, json\nprint(json.dumps({k: os.environ.get(k) for k in ' + JSON.stringify(Object.keys(env)) + '}))',
    )
  } catch (e) {
    assert.ok(e instanceof SandboxError, `refusal must be a SandboxError, got ${e}`)
    return
  } finally {
    await s.close()
  }
  assert.equal(r.exitCode, 0, r.stderr)
  assert.deepEqual(JSON.parse(r.stdout), env)
})

test('env names kern would read differently are refused, not silently dropped', async () => {
  for (const key of ['#COMMENTED', ' SPACED', 'TRAILING ']) {
    const s = new Sandbox({ env: { [key]: 'v', OTHER: 'o' } })
    let r
    try {
      await s.open()
      r = await s.runCode('import os, json\nprint(json.dumps(dict(os.environ)))')
    } catch (e) {
      assert.ok(e instanceof SandboxError, `refusal must be a SandboxError, got ${e}`)
      continue
    } finally {
      await s.close()
    }
    assert.equal(JSON.parse(r.stdout)[key], 'v', `env name ${JSON.stringify(key)} was altered or dropped`)
  }
})

test('an env value with a newline or NUL fails the call with SandboxError', async () => {
  for (const env of [{ A: 'x\ny' }, { A: 'x\ry' }, { 'A=B': 'x' }, { 'A\nB': 'x' }]) {
    const s = await new Sandbox({ env }).open()
    try {
      await assert.rejects(s.runCode('print(1)'), SandboxError, JSON.stringify(env))
    } finally {
      await s.close()
    }
  }
})

test('mounts: a ro mount is readable but not writable, a rw mount writes through to the host', async () => {
  const ro = tmpDir('kst-ro-')
  const rw = tmpDir('kst-rw-')
  fs.writeFileSync(path.join(ro, 'in.txt'), 'read me')
  const s = await new Sandbox({ mounts: { [ro]: ['/data', 'ro'], [rw]: '/out' } }).open()
  try {
    const r = await s.runCode(
      'print(open("/data/in.txt").read())\ntry:\n    open("/data/x", "w").write("x")\n    print("ro-writable")\nexcept OSError:\n    print("ro-refused")\nopen("/out/result.txt", "w").write("written")',
    )
    assert.equal(r.stdout, 'read me\nro-refused\n', r.stderr)
    assert.equal(fs.readFileSync(path.join(rw, 'result.txt'), 'utf8'), 'written')
    assert.ok(!fs.existsSync(path.join(ro, 'x')))
  } finally {
    await s.close()
  }
  assert.ok(fs.existsSync(path.join(rw, 'result.txt')), 'close() never touches mounts')
})

test('depsReadonly: setup deps are importable but read-only in run boxes', async (t) => {
  const setup = 'mkdir -p /workspace/.deps/kstmod && echo "VALUE = 42" > /workspace/.deps/kstmod/__init__.py'
  const code =
    'import kstmod\nprint(kstmod.VALUE)\ntry:\n    open("/workspace/.deps/kstmod/__init__.py", "w").write("VALUE = 666")\n    print("poisoned")\nexcept OSError:\n    print("refused")'
  const ro = await openSandbox(t, { setup, depsReadonly: true })
  const fromRo = await ro.runCode(code)
  assert.equal(fromRo.stdout, '42\nrefused\n', fromRo.stderr)
  const rw = await openSandbox(t, { setup })
  const fromRw = await rw.runCode(code)
  assert.equal(fromRw.stdout, '42\npoisoned\n', fromRw.stderr)
})

test('an undefined resource profile is a startup_failed fault naming it', async (t) => {
  // real kern without a kern.toml knows no profile; the stand-in is told which ones exist
  const bin = realKern ? process.env.KERN_BIN : wrapKern({ KERN_STANDIN_PROFILES: 'vcpu:someother' })
  const s = await openSandbox(t, { profiles: ['vcpu:kstnosuchprofile'] }, { bin })
  const r = await s.runCode('print(1)')
  assert.equal(r.fault && r.fault.type, 'startup_failed', JSON.stringify(r))
  assert.match(r.fault.message, /kstnosuchprofile/)
  assert.equal(r.stdout, '')
})

test('kern vanishing after construction fails the call with SandboxError', async (t) => {
  const fake = fakeKern()
  const s = await openSandbox(t, {}, { bin: fake.bin })
  fs.rmSync(fake.bin)
  await assert.rejects(s.run(['true']), SandboxError)
})

test('a kern that cannot be executed fails the call with SandboxError', async (t) => {
  const d = tmpDir()
  const bad = path.join(d, 'kern')
  fs.writeFileSync(bad, '#!/nonexistent/interpreter\n', { mode: 0o755 })
  const s = await openSandbox(t, {}, { bin: bad })
  await assert.rejects(s.run(['true']), SandboxError)
})

test('a command missing in the box is a failed result (exit 127), not a thrown error', async () => {
  const r = await sbx.run(['kst-no-such-command', 'x'])
  assert.equal(r.exitCode, 127)
  assert.equal(r.success, false)
  assert.match(r.stderr, /kst-no-such-command/)
})

test('durationMs reflects the call', async () => {
  const r = await sbx.run(['sh', '-c', 'sleep 1'])
  assert.equal(r.exitCode, 0)
  assert.ok(r.durationMs >= 900, `durationMs ${r.durationMs}`)
  assert.ok(r.durationMs < 30_000)
})

test('a user workspace path with spaces and non-ASCII characters works', async (t) => {
  const ws = path.join(tmpDir('kst-odd-'), 'my work space ü')
  const s = await openSandbox(t, { workspace: ws })
  const r = await s.runCode('open("made here.txt", "w").write("ok")\nprint(__import__("os").getcwd())')
  assert.equal(r.stdout, '/workspace\n', r.stderr)
  assert.equal(fs.readFileSync(path.join(ws, 'made here.txt'), 'utf8'), 'ok')
})

test('a workspace or mount path containing ":" is refused (it would change kern\'s -v split)', async () => {
  const base = tmpDir('kst-colon-')
  const colon = path.join(base, 'a:b')
  fs.mkdirSync(colon)
  await assert.rejects(new Sandbox({ workspace: colon }).open(), kern.MountRefused)
  assert.throws(() => new Sandbox({ mounts: { [colon]: '/data' } }), kern.MountRefused)
  assert.throws(() => new Sandbox({ mounts: { [base]: '/data:ro' } }), kern.MountRefused)
})
