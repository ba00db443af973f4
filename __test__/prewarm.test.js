'use strict'
// prewarm: boxes started ahead of calls. A call that takes a ready box must see what a fresh box
// shows (workspace, env, stdin, exit codes, deadline from the call), ready boxes never outlive
// close() or Node, and a ready box that died behind our back costs the call nothing.

const test = require('node:test')
const assert = require('node:assert/strict')
const cp = require('node:child_process')
const {
  kern,
  kernBin,
  openSandbox,
  recordingKern,
  STANDIN_ONLY,
  runNode,
  lastJson,
  procsMatching,
  sleep,
  waitFor,
} = require('./helpers')

/** Every ready box's kern and waiter carry this in their command line. */
const WAITER = 'KERN-SANDBOX-READY'

/** Waits until `sbx` holds `n` ready boxes. */
async function ready(sbx, n = 1) {
  const got = await waitFor(() => sbx.readyBoxes >= n, 60_000, 50)
  assert.ok(got, `${n} ready boxes within 60 s (have ${sbx.readyBoxes})`)
}

/** Seconds since the box's PID 1 started: a ready box's is older than the call. */
const PY_AGE =
  "import os\nst = open('/proc/1/stat').read().rsplit(')', 1)[1].split()\n" +
  "print(float(open('/proc/uptime').read().split()[0]) - int(st[19]) / os.sysconf('SC_CLK_TCK'))"
const SH_AGE =
  "t=$(cut -d' ' -f1 /proc/uptime); s=$(sed 's/.*) //' /proc/1/stat | cut -d' ' -f20); " +
  'echo "$t $s $(getconf CLK_TCK)" | awk \'{print $1 - $2 / $3}\''

/** Names of the ready boxes `kern ps` lists (their command is a waiter). */
function listedReady() {
  const out = cp.execFileSync(kernBin, ['ps', '--json'], { encoding: 'utf8' })
  return JSON.parse(out)
    .filter((b) => String(b.command).includes(WAITER))
    .map((b) => b.name)
}

/** A scratch file outside the workspace: in the first place the box lets us write. */
const PY_SCRATCH =
  "import os\nSCRATCH = next(d for d in ('/tmp', '/dev/shm', '/root') if os.access(d, os.W_OK)) + '/scratch'"

test('prewarm: a Python call takes a ready box, which is fresh and sees the workspace', async (t) => {
  const sbx = await openSandbox(t, { prewarm: 2, env: { GIVEN: 'yes' } })
  const first = await sbx.runCode(
    `${PY_SCRATCH}\nopen(SCRATCH, 'w').write('x')\nopen('kept.txt', 'w').write('k')\nos.environ['LEAK'] = '1'`,
  )
  assert.equal(first.exitCode, 0, first.stderr)
  await ready(sbx, 2)
  await sleep(600)
  await sbx.writeFile('late.txt', 'written just before the call')
  const r = await sbx.runCode(
    [
      'import os, sys',
      PY_AGE,
      PY_SCRATCH,
      "print(os.path.exists(SCRATCH), open('kept.txt').read(), open('late.txt').read())",
      "print(os.environ.get('LEAK'), os.environ.get('GIVEN'), sys.stdin.read() == '')",
      'print(sys.argv[0].endswith(".py"), sys.path[0], __name__)',
      'x = 41',
      'x + 1',
    ].join('\n'),
  )
  assert.equal(r.exitCode, 0, r.stderr)
  const [age, files, env, argv] = r.stdout.trim().split('\n')
  assert.ok(Number(age) > 0.5, `the call ran in a box started ahead (PID 1 is ${age} s old)`)
  assert.equal(files, 'False k written just before the call')
  assert.equal(env, 'None yes True')
  assert.equal(argv, 'True /workspace __main__')
  assert.deepEqual(
    r.results.map((x) => x.text),
    ['42'],
  )
})

test('prewarm: a Python ready box sees packages put in .deps after it started', async (t) => {
  const sbx = await openSandbox(t, { prewarm: 1 })
  await sbx.runCode('pass')
  await ready(sbx)
  await sbx.writeFile('.deps/latemod.py', 'X = "found"\n')
  const r = await sbx.runCode('import latemod\nprint(latemod.X)')
  assert.equal(r.stdout, 'found\n', r.stderr)
})

test('prewarm: errors, exit codes and stderr of a ready Python box are a fresh one’s', async (t) => {
  const cold = await openSandbox(t, { prewarm: 0 })
  const warm = await openSandbox(t, { prewarm: 1 })
  await warm.runCode('pass')
  const cases = [
    'raise ValueError("bad")',
    'import sys; sys.exit(3)',
    'import sys; print("o"); print("e", file=sys.stderr)',
  ]
  for (const code of cases) {
    await ready(warm)
    const [a, b] = [await cold.runCode(code), await warm.runCode(code)]
    assert.equal(b.exitCode, a.exitCode, code)
    assert.equal(b.stdout, a.stdout, code)
    assert.equal(b.stderr.replace(/\.cell-[0-9a-f]+/g, 'C'), a.stderr.replace(/\.cell-[0-9a-f]+/g, 'C'), code)
    const tb = (e) => e && { ...e, traceback: e.traceback.replace(/\.cell-[0-9a-f]+/g, 'C') }
    assert.deepEqual(tb(b.error), tb(a.error), code)
  }
})

test('prewarm: run() and bash take ready sh boxes: argv, stdin, PWD, exit codes as fresh', async (t) => {
  const cold = await openSandbox(t, { prewarm: 0 })
  const warm = await openSandbox(t, { prewarm: 2 })
  await warm.run(['true'])
  await ready(warm, 2)
  await sleep(600)
  const age = await warm.run(['sh', '-c', SH_AGE])
  assert.ok(Number(age.stdout) > 0.5, `run() took a box started ahead (${age.stdout} ${age.stderr})`)
  const argv = ['sh', '-c', 'printf "%s|" "$0" "$@"; cat; echo "$PWD"; env | sort; exit 7', "it's", 'a\nb', '$HOME']
  await ready(warm)
  const [a, b] = [await cold.run(argv), await warm.run(argv)]
  assert.equal(b.exitCode, 7)
  assert.equal(b.stdout.replace(/HOSTNAME=.*/, ''), a.stdout.replace(/HOSTNAME=.*/, ''))
  await ready(warm)
  const bash = await warm.runCode('echo "$0"; exit 4', { language: 'bash' })
  assert.equal(bash.exitCode, 4)
  assert.equal(bash.stdout, 'bash\n')
  await ready(warm)
  const [m1, m2] = [await cold.run(['no-such-command-here']), await warm.run(['no-such-command-here'])]
  assert.equal(m2.exitCode, m1.exitCode)
  assert.equal(m2.stderr.split('\n')[0], m1.stderr.split('\n')[0])
})

test('prewarm: the deadline starts with the call, not with the box', async (t) => {
  const sbx = await openSandbox(t, { prewarm: 1 })
  await sbx.run(['true'])
  await ready(sbx)
  await sleep(2500)
  const ok = await sbx.run(['sleep', '0.3'], { timeoutS: 2 })
  assert.equal(ok.exitCode, 0, ok.stderr)
  assert.equal(ok.fault, null)
  await ready(sbx)
  const slow = await sbx.run(['sleep', '30'], { timeoutS: 1 })
  assert.equal(slow.fault?.type, 'timeout')
})

test('prewarm: more calls at once than ready boxes all run', async (t) => {
  const sbx = await openSandbox(t, { prewarm: 2 })
  await sbx.runCode('pass')
  await ready(sbx, 2)
  const got = await Promise.all(Array.from({ length: 6 }, (_, i) => sbx.runCode(`print(${i} * 2)`)))
  assert.deepEqual(
    got.map((r) => r.stdout),
    [0, 2, 4, 6, 8, 10].map((v) => `${v}\n`),
  )
})

test('prewarm: a ready box killed behind our back is replaced without the call noticing', async (t) => {
  const sbx = await openSandbox(t, { prewarm: 2 })
  await sbx.run(['true'])
  await ready(sbx, 2)
  const ours = procsMatching(WAITER).filter((p) => /\bbox\b/.test(p.cmd))
  assert.ok(ours.length >= 2, 'the ready boxes are visible')
  for (const p of ours) process.kill(p.pid, 'SIGKILL')
  await waitFor(() => procsMatching(WAITER).every((p) => !ours.some((o) => o.pid === p.pid)), 10_000)
  const r = await sbx.run(['echo', 'still fine'])
  assert.equal(r.stdout, 'still fine\n', r.stderr)
  assert.equal(r.exitCode, 0)
  await ready(sbx, 2)
})

test('prewarm: close() stops every ready box; prewarm:0 starts none', async (t) => {
  const sbx = await openSandbox(t, { prewarm: 3 })
  await sbx.run(['true'])
  await ready(sbx, 3)
  const names = listedReady()
  assert.ok(names.length >= 3, 'kern lists the ready boxes')
  await sbx.close()
  assert.deepEqual(procsMatching(WAITER), [], 'no ready box or waiter after close()')
  const after = listedReady()
  assert.deepEqual(
    names.filter((n) => after.includes(n)),
    [],
  )
  assert.equal(sbx.readyBoxes, 0)

  const none = await openSandbox(t, { prewarm: 0 })
  await none.run(['true'])
  await none.runCode('pass')
  await sleep(500)
  assert.equal(none.readyBoxes, 0)
  assert.deepEqual(procsMatching(WAITER), [])
})

test('prewarm: Node exits on its own with ready boxes alive, and they are gone', async () => {
  const child = await runNode(`
    const { Sandbox } = require(REPO)
    ;(async () => {
      const s = await new Sandbox({ prewarm: 2 }).open()
      await s.runCode('pass')
      while (s.readyBoxes < 2) await new Promise((r) => setTimeout(r, 50))
      console.log(JSON.stringify({ ready: s.readyBoxes }))
    })()
  `)
  assert.equal(child.timedOut, false, 'the child exited by itself')
  assert.equal(child.code, 0, child.stderr)
  assert.deepEqual(lastJson(child.stdout), { ready: 2 })
  const left = await waitFor(() => procsMatching(WAITER).length === 0, 5000)
  assert.ok(left, `no ready box outlived Node: ${JSON.stringify(procsMatching(WAITER))}`)
})

test('prewarm: option and KERN_SANDBOX_PREWARM are checked; the env sets the default', async () => {
  for (const bad of [-1, 17, 1.5, Number.NaN, '2']) {
    assert.throws(() => new kern.Sandbox({ prewarm: bad }), { code: 'ERR_INVALID_OPTION' }, String(bad))
  }
  const child = await runNode(
    `
    const { Sandbox } = require(REPO)
    ;(async () => {
      const out = {}
      try { new Sandbox() } catch (e) { out.bad = e.code }
      process.env.KERN_SANDBOX_PREWARM = '0'
      const off = await new Sandbox().open()
      await off.run(['true'])
      await new Promise((r) => setTimeout(r, 500))
      out.off = off.readyBoxes
      await off.close()
      process.env.KERN_SANDBOX_PREWARM = '3'
      const on = await new Sandbox().open()
      await on.run(['true'])
      while (on.readyBoxes < 3) await new Promise((r) => setTimeout(r, 50))
      out.on = on.readyBoxes
      const given = await new Sandbox({ prewarm: 1 }).open()
      await given.run(['true'])
      while (given.readyBoxes < 1) await new Promise((r) => setTimeout(r, 50))
      await new Promise((r) => setTimeout(r, 500))
      out.given = given.readyBoxes
      await on.close()
      await given.close()
      console.log(JSON.stringify(out))
    })()
  `,
    { env: { KERN_SANDBOX_PREWARM: 'lots' } },
  )
  assert.equal(child.code, 0, child.stderr)
  assert.deepEqual(lastJson(child.stdout), { bad: 'ERR_INVALID_OPTION', off: 0, on: 3, given: 1 })
})

test(
  'prewarm: a ready box has the call box’s argv but for the backstop and the waiter',
  { skip: STANDIN_ONLY },
  async (t) => {
    const rec = recordingKern()
    const sbx = await openSandbox(t, { prewarm: 1 }, { bin: rec.bin })
    await sbx.run(['true'])
    await ready(sbx)
    const calls = rec.boxCalls()
    const call = calls.find((a) => a.at(-1) === 'true')
    const box = calls.find((a) => a.at(-1) === 'kern-sandbox-waiter')
    assert.ok(call && box, 'the call and a ready box were recorded')
    const flags = (a) => a.slice(2, a.indexOf('--'))
    const strip = (f) => f.map((v, i) => (f[i - 1] === '--timeout' ? 'T' : v))
    assert.deepEqual(strip(flags(box)), strip(flags(call)))
    assert.equal(flags(call)[flags(call).indexOf('--timeout') + 1], '35')
    assert.equal(flags(box)[flags(box).indexOf('--timeout') + 1], '95', 'the deadline + 60 s of waiting + 5')
    assert.deepEqual(box.slice(box.indexOf('--') + 1, box.indexOf('--') + 3), ['sh', '-c'])
    assert.ok(box.at(-2).includes(WAITER))
    assert.equal(calls.length, 2)
  },
)

test(
  'prewarm: off by default, so a session starts exactly one box per call, as 0.1.1 did',
  { skip: STANDIN_ONLY },
  async () => {
    const rec = recordingKern()
    const child = await runNode(
      `
    const { Sandbox } = require(REPO)
    ;(async () => {
      const sbx = new Sandbox()
      const prewarm = sbx.prewarm
      await sbx.open()
      await sbx.runCode('x = 1')
      await sbx.run(['true'])
      await new Promise((r) => setTimeout(r, 500))
      const ready = sbx.readyBoxes
      await sbx.close()
      console.log(JSON.stringify({ prewarm, ready }))
    })()
  `,
      { env: { KERN_BIN: rec.bin, KERN_SANDBOX_PREWARM: undefined } },
    )
    assert.equal(child.code, 0, child.stderr)
    const out = lastJson(child.stdout)
    assert.equal(out.ready, 0)
    assert.ok(out.prewarm === 0 || out.prewarm === undefined, `prewarm property: ${out.prewarm}`)
    const boxes = rec.boxCalls()
    assert.equal(boxes.length, 2, `one box per call: ${JSON.stringify(boxes)}`)
    assert.ok(!boxes.some((a) => a.join(' ').includes(WAITER)), 'no waiter box')
  },
)
