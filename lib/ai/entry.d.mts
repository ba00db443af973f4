// Types of kern-sandbox/ai's ESM entry (entry.mjs): the CommonJS declarations, plus the default export.
export * from './entry.js'
import * as ai from './entry.js'
export default ai
