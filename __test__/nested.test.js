'use strict'
// Nested (issue 35): the package inside a podman container, as users deploy it. With podman's
// default flags doctor must name the blocker and its fix (and a box's startup_failed fault carry
// its code); with Docker's default seccomp profile it must name seccomp; with the flags
// docs/deploy.md documents, doctor reports ok and a one-shot call, a kernel cell and a machine
// exec succeed. Runs when podman is installed and KERN_BIN is a real kern; skipped otherwise.
//
// No image registry is reachable, so the container's image is made locally from the test image
// archive (/tmp/kern-test-image.tar, /work/shared/tools/make-test-image: Debian with python3 and
// nodejs), once, and kept by tag; kern inside loads the same archive into a named volume, also
// kept. The package (this checkout, built) and kern are bind-mounted read-only.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const cp = require('node:child_process')
const { realKern, tmpDir } = require('./helpers.js')
const { onPath } = require('../lib/host/facts.js')

const repo = path.resolve(__dirname, '..')
const podman = onPath('podman')
const imageTar = process.env.KERN_TEST_IMAGE_TAR || '/tmp/kern-test-image.tar'
const built =
  fs.readdirSync(repo).some((f) => f.endsWith('.node')) && fs.existsSync(path.join(repo, 'kern-sandbox-agent'))
const TAG = 'localhost/kern-sandbox-nested:debian'
const VOLUME = 'kern-sandbox-nested-kern-cache'

const skip = !podman
  ? 'podman is not installed'
  : !realKern
    ? 'KERN_BIN is not set to a real kern (the stand-in cannot run in a container)'
    : !fs.existsSync(imageTar)
      ? `no test image archive at ${imageTar} (make it with make-test-image, or set KERN_TEST_IMAGE_TAR)`
      : !built
        ? 'the addon and the agent are not built (npm run build)'
        : false

function pod(args, { timeout = 600_000 } = {}) {
  return cp.spawnSync(podman, args, { encoding: 'utf8', timeout, maxBuffer: 64 << 20 })
}

/** Flags this host needs for any container, whatever the test: podman's default rlimits above
 * this process's hard limits cannot be set, and crun refuses a hybrid cgroup layout (runc runs). */
let hostFlags = null
function containerFlags() {
  if (hostFlags) return hostFlags
  const limits = fs.readFileSync('/proc/self/limits', 'utf8')
  const soft = (name) => Number(new RegExp(`^${name}\\s+(\\d+)`, 'm').exec(limits)?.[1] ?? 4096)
  const flags = [
    '--ulimit',
    `nofile=${Math.min(soft('Max open files'), 4096)}:${Math.min(soft('Max open files'), 4096)}`,
    '--ulimit',
    `nproc=${Math.min(soft('Max processes'), 4096)}:${Math.min(soft('Max processes'), 4096)}`,
  ]
  const probe = pod(['run', '--rm', ...flags, TAG, 'true'])
  if (probe.status !== 0 && onPath('runc') && /cgroup/i.test(probe.stderr)) flags.unshift('--runtime', 'runc')
  hostFlags = flags
  return flags
}

/** The container image (the test image, tagged) and kern's image cache volume, made once. */
function prepare() {
  if (pod(['image', 'exists', TAG]).status !== 0) {
    const loaded = pod(['load', '-q', '-i', imageTar])
    assert.equal(loaded.status, 0, loaded.stderr)
    const ref = /Loaded image(?:\(s\))?: (\S+)/.exec(loaded.stdout)?.[1]
    assert.ok(ref, `podman load named no image: ${loaded.stdout}`)
    assert.equal(pod(['tag', ref, TAG]).status, 0)
  }
  const load = podRun(
    [],
    ['sh', '-c', 'kern images --json | grep -q \'"python:3.12-slim"\' || kern load -i /image.tar >/dev/null'],
    ['-v', `${imageTar}:/image.tar:ro`],
  )
  assert.equal(load.status, 0, load.stderr)
}

/** `podman run` of `command` in the container with the package at /pkg and kern on PATH. */
function podRun(securityFlags, command, extra = []) {
  return pod([
    'run',
    '--rm',
    '--network=none',
    ...containerFlags(),
    ...securityFlags,
    '-v',
    `${repo}:/pkg:ro`,
    '-v',
    `${fs.realpathSync(process.env.KERN_BIN)}:/usr/local/bin/kern:ro`,
    '-v',
    `${VOLUME}:/root/.cache/kern`,
    '-e',
    'KERN_BIN=/usr/local/bin/kern',
    ...extra,
    TAG,
    ...command,
  ])
}

function doctorIn(securityFlags, extra) {
  const r = podRun(securityFlags, ['node', '/pkg/bin/kern-sandbox.js', 'doctor', '--json'], extra)
  let report
  try {
    report = JSON.parse(r.stdout)
  } catch {
    assert.fail(`doctor printed no JSON (exit ${r.status}):\n${r.stdout}\n${r.stderr}`)
  }
  return { status: r.status, report, check: (id) => report.checks.find((c) => c.id === id) }
}

/** The flags docs/deploy.md gives for rootful podman, least privilege first. */
const DOCUMENTED = [
  '--security-opt',
  `seccomp=${path.join(repo, 'deploy', 'seccomp.json')}`,
  '--security-opt',
  'unmask=ALL',
]
const SCRATCH = ['--tmpfs', '/run/kern:rw,exec,mode=700', '-e', 'XDG_RUNTIME_DIR=/run/kern']

test('nested in podman: default flags, Docker seccomp, documented flags', { skip, timeout: 1_800_000 }, async (t) => {
  prepare()

  await t.test('default flags: doctor names the masked /proc and its podman fix; the fault carries the code', () => {
    const { status, report, check } = doctorIn([])
    assert.equal(status, 1, JSON.stringify(report, null, 2))
    assert.equal(report.ok, false)
    assert.equal(report.environment, 'podman')
    assert.equal(check('proc').status, 'fail', JSON.stringify(check('proc')))
    assert.match(check('proc').fix, /podman run --security-opt unmask=ALL/)
    assert.equal(check('box').status, 'fail')
    assert.match(check('box').why, /mount\(proc\)/)
    assert.match(check('box').fix, /unmask=ALL/)
    const r = podRun([], ['node', '/pkg/__test__/fixtures/nested-calls.js', 'fault'])
    assert.equal(r.status, 0, r.stderr)
    const { fault, kernel, machine } = JSON.parse(r.stdout)
    for (const start of [kernel, machine]) {
      assert.match(
        start,
        /^SandboxError ERR_SANDBOX: \/proc is masked.*Fix: podman run --security-opt unmask=ALL .*mount\(proc\)/s,
      )
    }
    assert.equal(fault.type, 'startup_failed')
    assert.equal(fault.code, 'proc_masked')
    assert.match(
      fault.message,
      /\/proc is masked.*Fix: podman run --security-opt unmask=ALL.*kern said: .*mount\(proc\)/s,
    )
  })

  await t.test(
    "Docker's default seccomp profile (ours less kern's calls): doctor names seccomp and the profile",
    () => {
      const ours = JSON.parse(fs.readFileSync(path.join(repo, 'deploy', 'seccomp.json'), 'utf8'))
      const kernGroup = ours.syscalls.find((s) => s.names.includes('pivot_root'))
      const dockers = { ...ours, syscalls: ours.syscalls.filter((s) => s !== kernGroup) }
      dockers.syscalls.push({
        names: ['mount', 'sethostname', 'umount2', 'unshare'],
        action: 'SCMP_ACT_ALLOW',
        includes: { caps: ['CAP_SYS_ADMIN'] },
      })
      const file = path.join(tmpDir('nested-seccomp-'), 'docker-default.json')
      fs.writeFileSync(file, JSON.stringify(dockers))
      const flags = ['--security-opt', `seccomp=${file}`, '--security-opt', 'unmask=ALL']
      const { status, report, check } = doctorIn(flags)
      assert.equal(status, 1, JSON.stringify(report, null, 2))
      assert.equal(check('seccomp').status, 'fail', JSON.stringify(check('seccomp')))
      assert.match(check('seccomp').fix, /--security-opt seccomp=kern-sandbox\/deploy\/seccomp\.json/)
      assert.equal(check('proc').status, 'ok')
      // kern refuses before its started channel speaks: a startup_failed fault from kern, explained.
      const r = podRun(flags, ['node', '/pkg/__test__/fixtures/nested-calls.js', 'fault'])
      assert.equal(r.status, 0, r.stderr)
      const { fault, kernel, machine } = JSON.parse(r.stdout)
      for (const start of [kernel, machine]) assert.match(start, /^SandboxError ERR_SANDBOX: a seccomp filter .*Fix: /s)
      assert.equal(fault.code, 'seccomp_blocked', JSON.stringify(fault))
      assert.match(
        fault.message,
        /seccomp filter.*Fix: podman run --security-opt seccomp=.*kern said: error: sandbox: /s,
      )
    },
  )

  await t.test('documented flags: doctor is ok, and a one-shot call, a kernel and a machine run', () => {
    const { status, report } = doctorIn(DOCUMENTED, SCRATCH)
    assert.equal(status, 0, JSON.stringify(report, null, 2))
    assert.equal(report.ok, true)
    assert.deepEqual(
      report.checks.filter((c) => c.status === 'fail'),
      [],
    )
    const r = podRun(DOCUMENTED, ['node', '/pkg/__test__/fixtures/nested-calls.js'], SCRATCH)
    assert.equal(r.status, 0, r.stderr)
    const out = JSON.parse(r.stdout)
    assert.deepEqual(out.oneShot, { stdout: '42\n', success: true, fault: null })
    assert.deepEqual(out.kernel, { text: '21', success: true })
    assert.deepEqual(out.machine, { stdout: 'machine-42\n', exitCode: 0, fault: null })
  })
})
