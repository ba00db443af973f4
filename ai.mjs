// ESM entry of kern-sandbox/ai: the same objects as the CommonJS one.
import ai from './ai.js'

export const { createSandboxSession, codeInterpreterTool } = ai
export default ai
