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

/** E2B's SandboxPaginator: `hasNext`, `nextToken`, `nextItems()`. Pages of `limit` (default:
 * all) in creation order; `query` filters on `metadata` and `state` as E2B's does. */
class SandboxPaginator {
  #query
  #limit
  #offset = 0
  #done = false

  constructor(opts = {}) {
    opts = opts ?? {}
    this.#query = opts.query
    this.#limit = Number.isInteger(opts.limit) && opts.limit > 0 ? opts.limit : Infinity
  }

  get hasNext() {
    return !this.#done
  }

  /** The offset of the next page, as a string, while there is one. */
  get nextToken() {
    return this.#done ? undefined : String(this.#offset)
  }

  /** The next page of SandboxInfo. Throws when there is none (check `hasNext`), as E2B's does. */
  async nextItems() {
    if (this.#done) throw new Error('No more items to fetch')
    const infos = []
    for (const s of live.values()) {
      const info = await s.getInfo().catch(() => null) // killed meanwhile: not listed
      if (info && matches(info, this.#query)) infos.push(info)
    }
    const page = infos.slice(this.#offset, this.#offset + this.#limit)
    this.#offset += page.length
    if (this.#offset >= infos.length) this.#done = true
    return page
  }
}

module.exports = { live, SandboxPaginator }
