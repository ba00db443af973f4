'use strict'
// kern-sandbox/e2b's network options (issue 37): E2B's `network` and `allowInternetAccess` as the
// machine's egress policy, `updateNetwork`, `getInfo().network`. The mapping is checked on its own
// (lib/e2b/network.js); then, once the core gives machines a policy, a sandbox on loopback: an
// HTTPS server on 127.0.0.1 with a CA made here, named `api.test` by `hosts`, the proxy trusting
// that CA upstream (`upstreamCa`); curl in the sandbox gets the header a rule sets, a host not
// allowed gets the proxy's 403, updateNetwork flips both ways, and the header's value is nowhere in
// the sandbox or in what the API returns.

const test = require('node:test')
const assert = require('node:assert/strict')
const https = require('node:https')
const cp = require('node:child_process')
const { tmpDir } = require('./helpers.js')
const { Sandbox, InvalidArgumentError } = require('../lib/e2b/entry.js')
const { toPolicy, networkInfo } = require('../lib/e2b/network.js')
const { Machine } = require('../lib/machine.js')
const { makeCerts } = require('./certs')

const SECRET = 'Bearer e2b-s3cret-value'
const NO_POLICIES =
  typeof Machine.prototype.updateNetwork !== 'function'
    ? 'the core gives machines no egress policy yet (Machine#updateNetwork, the issue 37 wiring)'
    : cp.spawnSync('openssl', ['version']).status !== 0
      ? 'the openssl CLI is not installed'
      : false

test("E2B's network options as the policy: allowInternetAccess, allTraffic, callbacks, Map rules", () => {
  const all = ['0.0.0.0/0', '::/0']
  assert.deepEqual(toPolicy(undefined, undefined), {}, 'the default: every public address')
  assert.deepEqual(toPolicy(undefined, true), {})
  assert.deepEqual(toPolicy(undefined, false), { denyOut: all })
  // E2B's "only these" idiom, as the core reads it too (the all-traffic denies give way to allowOut).
  assert.deepEqual(toPolicy({ allowOut: ['api.test'] }, false), { allowOut: ['api.test'], denyOut: all })
  assert.deepEqual(toPolicy({ allowOut: ['api.test'], denyOut: ['0.0.0.0/0', '10.0.0.0/8'] }, false), {
    allowOut: ['api.test'],
    denyOut: ['0.0.0.0/0', '10.0.0.0/8', '::/0'],
  })
  assert.deepEqual(toPolicy({ denyOut: ({ allTraffic }) => [allTraffic] }), { denyOut: ['0.0.0.0/0'] })
  const rules = new Map([['api.test', [{ transform: { headers: { Authorization: SECRET } } }]]])
  assert.deepEqual(toPolicy({ allowOut: (ctx) => [...ctx.rules.keys()], rules, hosts: { 'api.test': '127.0.0.1' } }), {
    allowOut: ['api.test'],
    rules: { 'api.test': [{ transform: { headers: { Authorization: SECRET } } }] },
    hosts: { 'api.test': '127.0.0.1' },
  })
  assert.deepEqual(toPolicy({ denyOut: ['1.2.3.4'], allowPublicTraffic: false }), { denyOut: ['1.2.3.4'] })
  for (const [network, allow, message] of [
    [{ egressProxy: { address: 'p:1080' } }, undefined, /egressProxy/],
    [{ rules: { 'a.test': [{ transform: () => ({}) }] } }, undefined, /callback/],
    [{ allowOut: 'a.test' }, undefined, /allowOut must be an array/],
    [[], undefined, /network must be an object/],
    [undefined, 'no', /allowInternetAccess must be a boolean/],
  ]) {
    assert.throws(
      () => toPolicy(network, allow),
      (e) => e instanceof InvalidArgumentError && message.test(e.message),
    )
  }
  // getInfo().network: E2B's SandboxNetworkInfo, header values masked.
  const given = { allowOut: ['api.test'], rules, httpsPorts: [3000] }
  const info = networkInfo(given, toPolicy(given))
  assert.deepEqual(info, {
    allowOut: ['api.test'],
    rules: { 'api.test': [{ transform: { headers: { Authorization: '***' } } }] },
    httpsPorts: [3000],
  })
  assert.deepEqual(networkInfo(undefined, toPolicy(undefined, false)), { denyOut: all })
})

test(
  'Sandbox.create({ network }): the rule header reaches the server, other hosts get 403, updateNetwork flips, no secret in the sandbox',
  { skip: NO_POLICIES },
  async (t) => {
    const certs = makeCerts(tmpDir('e2b-net-'), ['api.test', 'other.test'])
    const server = https.createServer({ key: certs.key, cert: certs.cert }, (req, res) =>
      res.end(`${req.headers.host.split(':')[0]} auth=${req.headers.authorization ?? '-'}`),
    )
    await new Promise((r) => server.listen(0, '127.0.0.1', r))
    t.after(() => {
      server.closeAllConnections()
      server.close()
    })
    const port = server.address().port
    const base = { hosts: { 'api.test': '127.0.0.1', 'other.test': '127.0.0.1' }, upstreamCa: certs.ca }
    const events = []
    const sbx = await Sandbox.create({
      network: {
        ...base,
        allowOut: ['api.test'],
        rules: { 'api.test': [{ transform: { headers: { Authorization: SECRET } } }] },
      },
      onRequest: (e) => events.push(e),
    })
    t.after(() => sbx.kill())
    // The test CA for the tunnelled host (its own certificate reaches curl); api.test is terminated
    // by the proxy, whose CA the sandbox trusts already.
    await sbx.files.write('/tmp/test-ca.pem', certs.ca)
    const curl = (host, extra = '') =>
      sbx.commands.run(`curl -sS --max-time 20 ${extra} https://${host}:${port}/`).then(
        (r) => r,
        (e) => ({ exitCode: e.exitCode, stdout: e.stdout, stderr: e.stderr }),
      )

    const ruled = await curl('api.test')
    assert.equal(ruled.stdout, `api.test auth=${SECRET}`, ruled.stderr)
    const refused = await curl('other.test', '--cacert /tmp/test-ca.pem')
    assert.notEqual(refused.exitCode, 0)
    assert.match(refused.stderr, /403/)

    // The secret is nowhere in the sandbox: not its env, not its processes, not its files (the
    // command spells the needle in two pieces, so its own argv does not hold it).
    const look = await sbx.commands.run(
      'env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr \'\\0\' \'\\n\'; grep -rls "e2b-s3""cret" /tmp /home/user /etc /dev/shm /.kern-sandbox || true',
    )
    assert.ok(!look.stdout.includes('e2b-s3cret'), 'the header value is not in the sandbox')

    // getInfo(): E2B's fields, the value masked.
    const info = await sbx.getInfo()
    assert.equal(info.allowInternetAccess, false)
    assert.deepEqual(info.network, {
      allowOut: ['api.test'],
      rules: { 'api.test': [{ transform: { headers: { Authorization: '***' } } }] },
    })
    assert.ok(!JSON.stringify(info).includes('s3cret'))

    // updateNetwork replaces the whole policy: other.test opens (tunnelled, no header), then
    // allowInternetAccess: false with no allowOut closes everything.
    await sbx.updateNetwork({ ...base, allowOut: ['api.test', 'other.test'] })
    assert.equal((await curl('other.test', '--cacert /tmp/test-ca.pem')).stdout, 'other.test auth=-')
    assert.equal((await curl('api.test', '--cacert /tmp/test-ca.pem')).stdout, 'api.test auth=-', 'the rule is gone')
    await Sandbox.updateNetwork(sbx.sandboxId, { ...base, allowInternetAccess: false })
    const closed = await curl('api.test')
    assert.notEqual(closed.exitCode, 0)
    assert.match(closed.stderr, /403/)
    assert.equal((await sbx.getInfo()).allowInternetAccess, false)
    // E2B's "deny all, allow these": allowOut still opens its hosts.
    await sbx.updateNetwork({ ...base, allowOut: ['api.test'], allowInternetAccess: false })
    assert.equal((await curl('api.test', '--cacert /tmp/test-ca.pem')).stdout, 'api.test auth=-')
    await sbx.updateNetwork({ ...base, allowInternetAccess: false })

    // A bad policy is E2B's InvalidArgumentError, the core's code kept, and nothing changes.
    await assert.rejects(
      sbx.updateNetwork({ allowOut: ['a.*.test'] }),
      (e) => e instanceof InvalidArgumentError && e.code === 'ERR_BAD_NETWORK_POLICY',
    )
    assert.match((await curl('api.test')).stderr, /403/)

    assert.ok(events.some((e) => e.host === 'api.test' && e.allowed))
    assert.ok(events.some((e) => e.host === 'other.test' && !e.allowed))
    assert.ok(!JSON.stringify(events).includes('s3cret'))
  },
)

test('the default and allowInternetAccess: false, as getInfo() reports them', { skip: NO_POLICIES }, async (t) => {
  const open = await Sandbox.create()
  t.after(() => open.kill())
  assert.equal((await open.getInfo()).allowInternetAccess, true)
  assert.deepEqual((await open.getInfo()).network, {})
  const closed = await Sandbox.create({ allowInternetAccess: false })
  t.after(() => closed.kill())
  const info = await closed.getInfo()
  assert.equal(info.allowInternetAccess, false)
  assert.deepEqual(info.network, { denyOut: ['0.0.0.0/0', '::/0'] })
  // The machine has a policy either way, so it can be opened later.
  await closed.updateNetwork({ allowInternetAccess: true })
  assert.equal((await closed.getInfo()).allowInternetAccess, true)
})

test(
  'without egress policies in the core, network and updateNetwork say what they need',
  { skip: !NO_POLICIES || NO_POLICIES.startsWith('the openssl') ? 'the core has egress policies' : false },
  async () => {
    await assert.rejects(Sandbox.create({ network: { allowOut: ['api.test'] } }), /egress policies/)
    const sbx = await Sandbox.create()
    try {
      await assert.rejects(sbx.updateNetwork({ allowOut: [] }), /egress policies/)
      assert.equal((await sbx.getInfo()).network, undefined)
    } finally {
      await sbx.kill()
    }
  },
)
