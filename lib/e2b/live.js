'use strict'
// The live sandboxes of this process (E2B's are remote and listed by its API; here a sandbox lives
// in the process that created it), and `Sandbox.list()`'s paginator over them.

/** sandboxId → Sandbox */
const live = new Map()

function matches(info, query) {
  if (!query) return true
  if (query.state && !query.state.includes(info.state)) return false
  for (const [k, v] of Object.entries(query.metadata ?? {})) if (info.metadata[k] !== v) return false
  return true
}

/** E2B's paginators (SandboxPaginator, SnapshotPaginator): `hasNext`, `nextToken` (the offset of
 * the next page, as a string, while there is one) and `nextItems()`, pages of `limit` (default:
 * all) of what `items()` resolves to. */
class Paginator {
  #items
  #limit
  #offset
  #done = false

  constructor(items, opts, offset = 0) {
    this.#items = items
    this.#limit = Number.isInteger(opts.limit) && opts.limit > 0 ? opts.limit : Infinity
    this.#offset = offset
  }

  get hasNext() {
    return !this.#done
  }

  get nextToken() {
    return this.#done ? undefined : String(this.#offset)
  }

  /** The next page. Throws when there is none (check `hasNext`), as E2B's does. */
  async nextItems() {
    if (this.#done) throw new Error('No more items to fetch')
    const all = await this.#items()
    const page = all.slice(this.#offset, this.#offset + this.#limit)
    this.#offset += page.length
    if (this.#offset >= all.length) this.#done = true
    return page
  }
}

/** E2B's SandboxPaginator: the live sandboxes' SandboxInfo in creation order; `query` filters on
 * `metadata` and `state` as E2B's does. */
function sandboxPages(opts = {}) {
  opts = opts ?? {}
  const infos = async () => {
    const out = []
    for (const s of live.values()) {
      const info = await s.getInfo().catch(() => null) // killed meanwhile: not listed
      if (info && matches(info, opts.query)) out.push(info)
    }
    return out
  }
  return new Paginator(infos, opts)
}

module.exports = { live, Paginator, sandboxPages }
