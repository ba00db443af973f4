// Types of kern-sandbox/openai-agents's ESM entry: the CommonJS declarations, plus the default export.
export * from './openai-agents.js'
import * as entry from './openai-agents.js'
export default entry
