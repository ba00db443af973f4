// Types of kern-sandbox/e2b's ESM entry (entry.mjs): the CommonJS declarations, plus the default
// export, the whole module object.
export * from './entry.js'
import * as e2b from './entry.js'
export default e2b
