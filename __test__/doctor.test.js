'use strict'
// doctor (issue 35): the report's shape and the CLI's exit codes on this host (the stand-in or a
// real kern), a missing kern, the reading of kern's own doctor output, and the diagnosis a failed
// box start gets: from host facts given as data, since this host has none of the blockers
// (__test__/nested.test.js meets them for real inside podman).

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const cp = require('node:child_process')
const { tmpDir, sandboxWith, fakeKern } = require('./helpers.js')
const kern = require('..')
const { parseDoctor, parseImages, parseInfo } = require('../lib/doctor/kern.js')
const checks = require('../lib/doctor/checks.js')
const { diagnose, causeOf } = require('../lib/host/diagnose.js')
const { fixFor } = require('../lib/host/fixes.js')
const { procMasks } = require('../lib/host/facts.js')

const repo = path.resolve(__dirname, '..')
const cli = path.join(repo, 'bin', 'kern-sandbox.js')
const IDS = [
  'kern',
  'kern-doctor',
  'images',
  'agent',
  'userns',
  'seccomp',
  'proc',
  'apparmor',
  'cgroup',
  'scratch',
  'runtime-dir',
  'bubblewrap',
  'box',
]

function assertShape(report) {
  assert.deepEqual(Object.keys(report).sort(), ['checks', 'durationMs', 'environment', 'ok'])
  assert.equal(typeof report.ok, 'boolean')
  assert.ok(['host', 'docker', 'podman', 'kubernetes', 'container'].includes(report.environment))
  assert.ok(Number.isInteger(report.durationMs) && report.durationMs >= 0)
  const ids = report.checks.map((c) => c.id)
  assert.deepEqual(
    ids,
    IDS.filter((id) => ids.includes(id)),
    'each check at most once, in the documented order',
  )
  for (const c of report.checks) {
    assert.ok(['ok', 'warn', 'fail'].includes(c.status), JSON.stringify(c))
    assert.ok(typeof c.why === 'string' && c.why.length > 0 && !c.why.includes('\n'), JSON.stringify(c))
    if ('fix' in c) assert.ok(typeof c.fix === 'string' && c.fix.length > 0, JSON.stringify(c))
    assert.deepEqual(
      Object.keys(c).filter((k) => !['id', 'status', 'why', 'fix'].includes(k)),
      [],
    )
  }
  assert.equal(report.ok, report.checks.find((c) => c.id === 'box').status === 'ok')
}

function runCli(args, env = {}) {
  return cp.spawnSync(process.execPath, [cli, ...args], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 120_000,
  })
}

test('doctor() on this host: every check, a box ran, stable JSON', async () => {
  const report = await kern.doctor()
  assertShape(report)
  assert.deepEqual(
    report.checks.map((c) => c.id),
    IDS,
  )
  assert.equal(report.ok, true, JSON.stringify(report, null, 2))
  assert.deepEqual(JSON.parse(JSON.stringify(report)), report)
  assert.equal(report.checks.find((c) => c.id === 'kern').status, 'ok')
  // bubblewrap is only ever a warning: the stand-in needs it, users do not.
  assert.notEqual(report.checks.find((c) => c.id === 'bubblewrap').status, 'fail')
})

test('doctor() checks its options', async () => {
  await assert.rejects(kern.doctor({ timeoutS: 0 }), TypeError)
  await assert.rejects(kern.doctor({ image: '' }), TypeError)
  await assert.rejects(kern.doctor(null), TypeError)
})

test('CLI --json: the report, exit code 0 when a box runs; text mode says ready', () => {
  const r = runCli(['doctor', '--json'])
  assert.equal(r.status, 0, r.stderr + r.stdout)
  const report = JSON.parse(r.stdout)
  assertShape(report)
  assert.equal(report.ok, true)
  const text = runCli(['doctor'])
  assert.equal(text.status, 0, text.stderr)
  assert.match(text.stdout, /^ {2}ok {3}box: a box ran `true`/m)
  assert.match(text.stdout, /^ready: a box runs here/m)
})

test('a KERN_BIN that is missing: kern fails with the fix, no box, exit code 1', () => {
  const missing = path.join(tmpDir('kst-doctor-'), 'no-such-kern')
  const r = runCli(['doctor', '--json'], { KERN_BIN: missing })
  assert.equal(r.status, 1, r.stderr)
  const report = JSON.parse(r.stdout)
  assertShape(report)
  assert.equal(report.ok, false)
  const k = report.checks.find((c) => c.id === 'kern')
  assert.equal(k.status, 'fail')
  assert.match(k.why, /no-such-kern' is not an executable file/)
  assert.match(k.fix, /export KERN_BIN=/)
  assert.equal(report.checks.find((c) => c.id === 'box').status, 'fail')
  // Checks that need kern are left out rather than guessed.
  assert.deepEqual(
    report.checks.map((c) => c.id),
    ['kern', 'agent', 'bubblewrap', 'box'],
  )
})

test('no kern on PATH: the fix says where kern comes from', () => {
  const r = runCli(['doctor', '--json'], { KERN_BIN: '', PATH: tmpDir('kst-doctor-path-') })
  assert.equal(r.status, 1, r.stderr)
  const k = JSON.parse(r.stdout).checks.find((c) => c.id === 'kern')
  assert.equal(k.status, 'fail')
  assert.match(k.fix, /install kern \(https:\/\/github\.com\/getkern\/kern\)/)
})

test('CLI usage errors exit 2', () => {
  assert.equal(runCli([]).status, 2)
  assert.equal(runCli(['doctor', '--bogus']).status, 2)
  assert.equal(runCli(['nope']).status, 2)
  assert.equal(runCli(['--help']).status, 0)
})

const KERN_DOCTOR = `kern doctor
  ✔ unprivileged user namespaces: enabled
  ! AppArmor: restricting unprivileged user namespaces
      set kernel.apparmor_restrict_unprivileged_userns=0
  ✔ max_user_namespaces: 96367
  ! cgroup v2 not found - memory/pids caps (\`--memory\`, \`--pids-limit\`) won't be enforced
      boxes still run (isolation holds); enable the unified cgroup v2 hierarchy for resource caps
  ✘ overlayfs: unavailable
      load the overlay module
  ✔ kernel: 6.18.44

not ready - 3 ok, 2 warning(s), 1 failure(s).
  try it: kern box hello --image alpine -- echo 'hello from a box'
`

test("kern's doctor output: its lines, hints and verdict, turned into checks", () => {
  const parsed = parseDoctor(KERN_DOCTOR)
  assert.equal(parsed.findings.length, 6)
  assert.deepEqual(parsed.findings[1], {
    mark: 'warn',
    text: 'AppArmor: restricting unprivileged user namespaces',
    hint: 'set kernel.apparmor_restrict_unprivileged_userns=0',
  })
  assert.equal(parsed.findings[4].mark, 'fail')
  assert.match(parsed.verdict, /^not ready/)
  const userns = checks.usernsCheck(parsed, {}, 'host')
  assert.equal(userns.status, 'warn')
  assert.match(userns.fix, /apparmor_restrict_unprivileged_userns=0/)
  assert.equal(checks.cgroupCheck(parsed, { v2: false }, 'kubernetes').status, 'warn')
  assert.match(checks.cgroupCheck(parsed, { v2: false }, 'kubernetes').fix, /resources\.limits/)
  const other = checks.kernDoctorCheck(parsed)
  assert.equal(other.status, 'fail')
  assert.match(other.why, /overlayfs: unavailable/)
  assert.equal(other.fix, 'load the overlay module')
  assert.deepEqual(parseImages('[{"image":"python:3.12-slim","dangling":false},{"image":"x","dangling":true}]'), [
    'python:3.12-slim',
  ])
  assert.equal(parseImages('error: unknown command'), null)
  assert.equal(parseInfo('kern 0.0.0\nruntime dir      /run/user/0/kern\n')['runtime dir'], '/run/user/0/kern')
  assert.equal(checks.imagesCheck(['docker.io/library/python:3.12-slim'], 'python:3.12-slim').status, 'ok')
  assert.equal(checks.imagesCheck([], 'python:3.12-slim').status, 'warn')
})

test('without kern doctor, user namespaces are read from the sysctls', () => {
  assert.equal(checks.usernsCheck(null, { unprivilegedUsernsClone: 0 }, 'host').status, 'fail')
  assert.match(checks.usernsCheck(null, { maxUserNamespaces: 0 }, 'docker').fix, /host's \(the node's\) setting/)
  assert.equal(checks.usernsCheck(null, { maxUserNamespaces: 100 }, 'host').status, 'ok')
})

const FACTS = {
  environment: 'docker',
  seccomp: { mode: 0, filters: 0 },
  procMasks: [],
  userns: { unprivilegedUsernsClone: null, maxUserNamespaces: 1000, apparmorRestrict: null },
  apparmor: null,
}
const PROC = 'kern: sandbox setup failed: mount(proc) failed: Operation not permitted (os error 1)'
const USERNS =
  'error: sandbox: unprivileged user namespaces are unavailable (kernel.unprivileged_userns_clone=0 or an AppArmor restriction)'

test('a failed start is diagnosed from the facts that explain it, and only then', () => {
  const masked = { ...FACTS, procMasks: ['/proc/kcore', '/proc/keys'] }
  assert.equal(causeOf(PROC, masked), 'proc_masked')
  assert.equal(causeOf(PROC, FACTS), null, 'no mask, no claim')
  const d = diagnose(PROC, masked)
  assert.equal(d.code, 'proc_masked')
  assert.match(d.cause, /\/proc\/kcore, \/proc\/keys/)
  assert.match(d.fix, /docker run --security-opt systempaths=unconfined/)
  const filtered = { ...FACTS, seccomp: { mode: 2, filters: 1 } }
  assert.equal(causeOf(USERNS, filtered), 'seccomp_blocked')
  assert.equal(
    causeOf(USERNS, { ...filtered, userns: { ...FACTS.userns, unprivilegedUsernsClone: 0 } }),
    'userns_disabled',
  )
  assert.equal(causeOf(USERNS, FACTS), null)
  assert.equal(
    causeOf('kern: sandbox setup failed: pivot_root failed: Operation not permitted', filtered),
    'seccomp_blocked',
  )
  assert.equal(
    causeOf('kern: sandbox setup failed: mount(MS_PRIVATE) failed: Operation not permitted', {
      ...FACTS,
      apparmor: 'docker-default (enforce)',
    }),
    'apparmor_blocked',
  )
  assert.equal(causeOf('error: image: python:9 not found', filtered), null)
  assert.match(fixFor('proc_masked', 'kubernetes'), /procMount: Unmasked/)
  assert.match(fixFor('seccomp_blocked', 'kubernetes'), /type: Localhost/)
  assert.match(fixFor('proc_masked', 'podman'), /unmask=ALL/)
})

test("a startup failure doctor cannot explain here keeps kern's text and no code", async () => {
  const sbx = sandboxWith(fakeKern({ started: [], stderr: 'error: image: python:9 not found\n', exitCode: 1 }).bin)
  await sbx.open()
  try {
    const r = await sbx.run(['true'])
    assert.equal(r.fault.type, 'startup_failed')
    assert.equal(r.fault.message, 'error: image: python:9 not found')
    assert.equal('code' in r.fault, false)
  } finally {
    await sbx.close()
  }
})

test('an in-box setup failure (125) stays an ordinary result when no host fact fails every box', async (t) => {
  if (procMasks().length) {
    t.skip('this host masks /proc, so such a box is a startup_failed fault here')
    return
  }
  // The started channel spoke, then kern's in-box setup failed.
  const sbx = sandboxWith(fakeKern({ started: [1, 0], stderr: `${PROC}\n`, exitCode: 125 }).bin)
  await sbx.open()
  try {
    const r = await sbx.run(['true'])
    assert.equal(r.fault, null)
    assert.equal(r.exitCode, 125)
    assert.match(r.stderr, /sandbox setup failed/)
  } finally {
    await sbx.close()
  }
})
