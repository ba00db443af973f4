// Types of kern-sandbox/mastra's ESM entry: the CommonJS declarations, plus the default export.
export * from './entry.js'
import * as entry from './entry.js'
export default entry
