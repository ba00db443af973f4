// Types of kern-sandbox/mastra's ESM entry: the CommonJS declarations, plus the default export.
export * from './mastra.js'
import * as entry from './mastra.js'
export default entry
