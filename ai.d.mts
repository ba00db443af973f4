// Types of kern-sandbox/ai's ESM entry (ai.mjs): the CommonJS declarations, plus the default export.
export * from './ai.js'
import * as ai from './ai.js'
export default ai
