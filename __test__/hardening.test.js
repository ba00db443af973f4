'use strict'
// Hardening options: capDrop, securityProfile, requireLimits, apparmor.

const test = require('node:test')
const assert = require('node:assert/strict')
const { kern, openSandbox, realKern, wrapKern } = require('./helpers')

const { Sandbox, SandboxError } = kern

function capEff(stdout) {
  const m = /CapEff:\s*([0-9a-f]+)/.exec(stdout)
  assert.ok(m, stdout)
  return BigInt('0x' + m[1])
}

test('capDrop: default drops ALL capabilities, [] opts out, a named cap drops just that', async () => {
  const probe = (opts) => kern.runCode('grep CapEff /proc/self/status', { language: 'bash', ...opts })
  const dflt = await probe({})
  assert.equal(capEff(dflt.stdout), 0n, 'default: no capabilities')
  const none = await probe({ capDrop: [] })
  assert.notEqual(capEff(none.stdout), 0n, 'capDrop [] keeps the runtime defaults')
  const one = await probe({ capDrop: ['NET_RAW'] })
  const NET_RAW = 1n << 13n
  assert.equal(capEff(one.stdout), capEff(none.stdout) & ~NET_RAW)
})

test('capDrop: entries that could smuggle a flag are refused', () => {
  for (const bad of ['--net', 'NET RAW', '', 'NET-RAW', 'ALL,NET_RAW', '-v', '1CAP']) {
    assert.throws(() => new Sandbox({ capDrop: [bad] }), SandboxError, JSON.stringify(bad))
  }
  new Sandbox({ capDrop: ['ALL'] })
  new Sandbox({ capDrop: ['NET_RAW', 'cap_sys_admin'] })
})

test('securityProfile: "untrusted" is accepted and hardens the box; anything else is refused', async () => {
  for (const bad of ['strict', 'UNTRUSTED', '', '--net', 'untrusted ']) {
    assert.throws(() => new Sandbox({ securityProfile: bad }), SandboxError, JSON.stringify(bad))
  }
  const r = await kern.runCode(
    'grep CapEff /proc/self/status; touch /root-write-test 2>/dev/null && echo wrote || echo read-only; echo ok > /workspace/w.txt && echo ws-ok',
    {
      language: 'bash',
      securityProfile: 'untrusted',
      capDrop: [],
    },
  )
  assert.equal(r.exitCode, 0, r.stderr)
  assert.equal(capEff(r.stdout), 0n)
  assert.match(r.stdout, /read-only/)
  assert.match(r.stdout, /ws-ok/)
})

test('requireLimits: where caps cannot be enforced, a startup_failed fault that says so', async (t) => {
  const bin = realKern ? process.env.KERN_BIN : wrapKern({ KERN_STANDIN_WARN_CAPS: '1' })
  const sbx = await openSandbox(t, { requireLimits: true }, { bin })
  const r = await sbx.runCode('open("ran.txt", "w").write("x")')
  assert.equal(r.fault && r.fault.type, 'startup_failed', JSON.stringify(r))
  assert.match(r.fault.message, /require-limits|REQUIRE_LIMITS/)
  assert.equal(r.success, false)
  await assert.rejects(sbx.readFile('ran.txt'), SandboxError, 'the workload never ran')
})

test('apparmor: names are validated; an unloaded profile does not run the workload', async (t) => {
  for (const bad of ['-bad', 'a b', '', 'x/y', '--net']) {
    assert.throws(() => new Sandbox({ apparmor: bad }), SandboxError, JSON.stringify(bad))
  }
  const sbx = await openSandbox(t, { apparmor: 'kern-sandbox-test-not-loaded' })
  const r = await sbx.runCode('open("ran.txt", "w").write("x")')
  assert.equal(r.success, false)
  assert.match(r.stderr, /apparmor/i)
  await assert.rejects(sbx.readFile('ran.txt'), SandboxError, 'the workload never ran')
})
