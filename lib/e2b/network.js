'use strict'
// E2B's network options (`network`, `allowInternetAccess`, `updateNetwork`) as this package's
// egress policy (docs/network.md), which reads E2B's shape the same way: its all-traffic denies
// (`0.0.0.0/0`, `::/0`) give way to `allowOut`, so "deny all, allow these" keeps its meaning, and
// `allowInternetAccess: false` is those two denies added. The sandbox's machine always gets a
// policy, so updateNetwork() can open it up or close it later.

const { InvalidArgumentError } = require('./errors.js')

/** E2B's all-traffic sentinel (`allTraffic`) and its IPv6 twin. */
const ALL_TRAFFIC = '0.0.0.0/0'
const ALL = [ALL_TRAFFIC, '::/0']
/** E2B network options that are about inbound traffic (sandbox URLs): kept for getInfo(). */
const INBOUND = ['allowPublicTraffic', 'maskRequestHost', 'httpsPorts']
/** This package's additions, for offline tests (docs/network.md). */
const OURS = ['hosts', 'upstreamCa']

function rulesOf(rules) {
  if (rules == null) return undefined
  const entries = rules instanceof Map ? [...rules.entries()] : Object.entries(rules)
  if (typeof rules !== 'object' || Array.isArray(rules))
    throw new InvalidArgumentError('network.rules must be an object (or a Map) of host to rules')
  for (const [host, list] of entries) {
    if (!Array.isArray(list)) throw new InvalidArgumentError(`network.rules[${JSON.stringify(host)}] must be an array`)
    list.forEach((r, i) => {
      if (r && typeof r.transform === 'function') {
        throw new InvalidArgumentError(
          `network.rules[${JSON.stringify(host)}][${i}].transform: a callback (E2B's workload identity) is not supported; give { headers }`,
        )
      }
    })
  }
  return Object.fromEntries(entries)
}

function selector(v, what, rules) {
  if (v == null) return undefined
  const list = typeof v === 'function' ? v({ allTraffic: ALL_TRAFFIC, rules: new Map(Object.entries(rules ?? {})) }) : v
  if (!Array.isArray(list))
    throw new InvalidArgumentError(`network.${what} must be an array of strings (or return one)`)
  return [...list]
}

/** The egress policy for E2B's `network` and `allowInternetAccess` (create and updateNetwork). */
function toPolicy(network, allowInternetAccess) {
  if (allowInternetAccess != null && typeof allowInternetAccess !== 'boolean')
    throw new InvalidArgumentError('allowInternetAccess must be a boolean')
  const n = network ?? {}
  if (typeof n !== 'object' || Array.isArray(n)) throw new InvalidArgumentError('network must be an object')
  if (n.egressProxy != null) {
    throw new InvalidArgumentError(
      'network.egressProxy (a SOCKS5 proxy of your own) is not supported by kern-sandbox/e2b: traffic leaves through the host',
    )
  }
  const rules = rulesOf(n.rules)
  const allowOut = selector(n.allowOut, 'allowOut', rules)
  const denyOut = selector(n.denyOut, 'denyOut', rules) ?? []
  if (allowInternetAccess === false) for (const all of ALL) if (!denyOut.includes(all)) denyOut.push(all)
  const policy = {}
  if (allowOut) policy.allowOut = allowOut
  if (denyOut.length) policy.denyOut = denyOut
  if (rules) policy.rules = rules
  for (const k of OURS) if (n[k] !== undefined) policy[k] = n[k]
  return policy
}

/** What getInfo().network gives: E2B's SandboxNetworkInfo, header values masked (they never leave
 * the host's proxy, not even into a result). */
function networkInfo(network, policy) {
  const info = {}
  if (policy.allowOut) info.allowOut = [...policy.allowOut]
  if (policy.denyOut) info.denyOut = [...policy.denyOut]
  if (policy.rules) {
    info.rules = Object.fromEntries(
      Object.entries(policy.rules).map(([host, list]) => [
        host,
        list.map((r) =>
          r?.transform?.headers
            ? { transform: { headers: Object.fromEntries(Object.keys(r.transform.headers).map((h) => [h, '***'])) } }
            : {},
        ),
      ]),
    )
  }
  for (const k of INBOUND) if (network?.[k] !== undefined) info[k] = network[k]
  return info
}

module.exports = { toPolicy, networkInfo, ALL_TRAFFIC }
