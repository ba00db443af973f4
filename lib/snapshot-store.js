'use strict'
// The machine snapshot store as `kern-sandbox snapshots` reads it, without a session (and without
// kern): the layout src/snapshots/mod.rs writes and docs/machines.md documents. `<store>/<id>/`
// holds a snapshot (meta.json names it); `.tmp-*` entries are snapshots or fork copies being
// written, or removals under way; `baselines/` caches each image's walk.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const ID = /^snap-[0-9a-zA-Z-]{1,59}$/

/** The store: `dir`, else $KERN_SANDBOX_SNAPSHOT_DIR, $XDG_DATA_HOME/kern-sandbox/snapshots or
 * ~/.local/share/kern-sandbox/snapshots (the order a session without `snapshotDir` uses). */
function storeDir(dir, env = process.env) {
  if (dir) return path.resolve(dir)
  if (env.KERN_SANDBOX_SNAPSHOT_DIR) return path.resolve(env.KERN_SANDBOX_SNAPSHOT_DIR)
  if (env.XDG_DATA_HOME) return path.join(env.XDG_DATA_HOME, 'kern-sandbox', 'snapshots')
  return path.join(env.HOME || os.homedir(), '.local', 'share', 'kern-sandbox', 'snapshots')
}

/** Every complete snapshot, oldest first: { id, name, image, createdAt (Date), sizeBytes }. */
function list(dir) {
  let names
  try {
    names = fs.readdirSync(dir)
  } catch (e) {
    if (e.code === 'ENOENT') return []
    throw e
  }
  const out = []
  for (const n of names.filter((n) => ID.test(n))) {
    try {
      const m = JSON.parse(fs.readFileSync(path.join(dir, n, 'meta.json'), 'utf8'))
      out.push({
        id: m.id,
        name: m.name ?? null,
        image: m.image,
        createdAt: new Date(m.createdAt),
        sizeBytes: m.sizeBytes,
      })
    } catch {
      // damaged or being removed: not listed
    }
  }
  return out.sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1))
}

/** Removes a snapshot by id: renamed out of the list first, as the native store does. False when
 * there is none. */
function remove(dir, id) {
  if (!ID.test(id) || !fs.existsSync(path.join(dir, id, 'meta.json'))) return false
  const doomed = path.join(dir, `.tmp-rm-${process.pid}-${Date.now()}`)
  fs.renameSync(path.join(dir, id), doomed)
  fs.rmSync(doomed, { recursive: true, force: true })
  return true
}

/** "90s", "30m", "12h", "7d" (or a bare number of seconds) as milliseconds; NaN when malformed. */
function parseDuration(text) {
  const m = /^(\d+(?:\.\d+)?)([smhd]?)$/.exec(String(text).trim())
  if (!m) return Number.NaN
  return Number(m[1]) * { '': 1e3, s: 1e3, m: 60e3, h: 3600e3, d: 86400e3 }[m[2]]
}

/** Removes the snapshots created more than `olderThanMs` ago, and temp entries (a snapshot or
 * fork copy whose process died) not touched for as long. Returns what went. */
function gc(dir, olderThanMs, now = Date.now()) {
  const removed = []
  for (const s of list(dir)) {
    if (now - s.createdAt.getTime() > olderThanMs && remove(dir, s.id)) removed.push(s.id)
  }
  let names = []
  try {
    names = fs.readdirSync(dir)
  } catch {
    // no store: nothing to collect
  }
  for (const n of names.filter((n) => n.startsWith('.tmp-'))) {
    const p = path.join(dir, n)
    try {
      if (now - fs.statSync(p).mtimeMs > olderThanMs) {
        fs.rmSync(p, { recursive: true, force: true })
        removed.push(n)
      }
    } catch {
      // gone meanwhile
    }
  }
  return removed
}

module.exports = { storeDir, list, remove, gc, parseDuration }
