'use strict'
// E2B's network options (`network`, `allowInternetAccess`, `updateNetwork`) as this package's
// egress policy (docs/network.md). E2B's idiom "deny all traffic, allow these" is `allowOut` plus
// `denyOut: [allTraffic]`, where an allowed entry beats the deny; in the policy a deny wins, and
// a listed `allowOut` already refuses everything else, so the all-traffic deny is dropped when
// there is an `allowOut`. The sandbox's machine always gets a policy, so updateNetwork() can
// open it up or close it later.

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
  let denyOut = selector(n.denyOut, 'denyOut', rules) ?? []
  const denyAll = allowInternetAccess === false || denyOut.some((d) => ALL.includes(d))
  const policy = {}
  if (denyAll) {
    denyOut = denyOut.filter((d) => !ALL.includes(d))
    // Nothing but what allowOut lists; nothing at all when it lists nothing.
    if (allowOut && allowOut.length) policy.allowOut = allowOut
    else denyOut = [...ALL, ...denyOut]
  } else if (allowOut) policy.allowOut = allowOut
  if (denyOut.length) policy.denyOut = denyOut
  if (rules) policy.rules = rules
  for (const k of OURS) if (n[k] !== undefined) policy[k] = n[k]
  return policy
}

/** What getInfo().network gives: E2B's SandboxNetworkInfo, header values masked (they never leave
 * the host's proxy, not even into a result). */
function networkInfo(network, policy) {
  const info = {}
  if (network?.allowOut != null || policy.allowOut) info.allowOut = [...(policy.allowOut ?? [])]
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
