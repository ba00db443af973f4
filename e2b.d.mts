// Types of kern-sandbox/e2b's ESM entry (e2b.mjs): the CommonJS declarations, plus the default
// export, the whole module object.
export * from './e2b.js'
import * as e2b from './e2b.js'
export default e2b
