// ESM entry of kern-sandbox/ai: the same objects as the CommonJS one.
import ai from './entry.js'

export const { createSandboxSession, codeInterpreterTool } = ai
export default ai
