// ESM entry of kern-sandbox/openai-agents: the same objects as the CommonJS one.
import entry from './openai-agents.js'

export const { KernSandboxClient, KernSandboxSession } = entry
export default entry
