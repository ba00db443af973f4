'use strict'
// What E2B's lifecycle, pause and fork options mean here, checked as E2B's SDK checks them before
// it calls its API, and E2B's snapshot listing over the package's snapshot store.

const { InvalidArgumentError } = require('./errors.js')
const store = require('../snapshot-store.js')
const { Paginator } = require('./live.js')

/** snapshotId → the sandboxId that made it (this process's: listSnapshots({ sandboxId }) filters
 * on it; a snapshot from another process has no sandbox here). */
const snapshotOrigin = new Map()

/** E2B's `lifecycle` option as `{ onTimeout: 'kill' | 'pause', autoResume }`. */
function lifecycleOf(given) {
  if (given == null) return { onTimeout: 'kill', autoResume: false }
  if (typeof given !== 'object' || Array.isArray(given)) throw new InvalidArgumentError('lifecycle must be an object')
  let onTimeout = 'kill'
  let keepMemory
  const t = given.onTimeout
  if (t === 'pause' || t === 'kill') onTimeout = t
  else if (t != null && typeof t === 'object' && (t.action === 'pause' || t.action === 'kill')) {
    onTimeout = t.action
    if (t.keepMemory != null) {
      if (t.action === 'kill')
        throw new InvalidArgumentError("keepMemory is only allowed with onTimeout action 'pause'")
      if (typeof t.keepMemory !== 'boolean') throw new InvalidArgumentError('keepMemory must be a boolean')
      keepMemory = t.keepMemory
    }
  } else if (t != null) {
    throw new InvalidArgumentError(`lifecycle.onTimeout must be 'pause' or 'kill' (or { action }), got ${String(t)}`)
  }
  const autoResume = given.autoResume ?? false
  if (typeof autoResume !== 'boolean') throw new InvalidArgumentError('lifecycle.autoResume must be a boolean')
  if (autoResume && onTimeout !== 'pause') {
    throw new InvalidArgumentError("lifecycle.autoResume needs onTimeout: 'pause'")
  }
  if (autoResume && keepMemory === false) {
    throw new InvalidArgumentError(
      'lifecycle.autoResume cannot be combined with a filesystem-only pause (keepMemory: false)',
    )
  }
  return { onTimeout, autoResume }
}

function checkPauseOpts(opts) {
  if (opts?.keepMemory != null && typeof opts.keepMemory !== 'boolean') {
    throw new InvalidArgumentError('keepMemory must be a boolean')
  }
}

/** fork's `count`: an integer of at least 1 (default 1). */
function checkForkCount(opts) {
  const count = opts?.count ?? 1
  if (!Number.isInteger(count) || count < 1) {
    throw new InvalidArgumentError(`count must be an integer of at least 1, got ${String(count)}`)
  }
  return count
}

/** The snapshot store of a sandbox's `kern` options (their `snapshotDir`, else the default). */
function storeOf(kern) {
  return store.storeDir(kern?.snapshotDir)
}

/** The snapshot a template names (its id, or its name), or null. */
function findSnapshot(dir, template) {
  if (template === '') return null
  return store.list(dir).find((s) => s.id === template || s.name === template) ?? null
}

/** E2B's SnapshotPaginator over the store: `{ snapshotId, names }`, oldest first, filtered by
 * `sandboxId` and `name`; `nextToken` resumes where an earlier page ended. */
function snapshotPages(dir, opts = {}) {
  opts = opts ?? {}
  const items = async () =>
    store
      .list(dir)
      .filter((s) => opts.sandboxId == null || snapshotOrigin.get(s.id) === opts.sandboxId)
      .filter((s) => opts.name == null || s.name === opts.name)
      .map((s) => ({ snapshotId: s.id, names: s.name ? [s.name] : [] }))
  return new Paginator(items, opts, opts.nextToken != null ? Number(opts.nextToken) || 0 : 0)
}

module.exports = {
  lifecycleOf,
  checkPauseOpts,
  checkForkCount,
  snapshotOrigin,
  storeOf,
  findSnapshot,
  snapshotPages,
}
