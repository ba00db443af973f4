// Types of kern-sandbox/langchain's ESM entry: the CommonJS declarations, plus the default export.
export * from './langchain.js'
import * as entry from './langchain.js'
export default entry
