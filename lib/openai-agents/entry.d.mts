// Types of kern-sandbox/openai-agents's ESM entry: the CommonJS declarations, plus the default export.
export * from './entry.js'
import * as entry from './entry.js'
export default entry
