// kern-sandbox/openai-agents's ESM entry against @openai/agents-core's own types.
import entry, { KernSandboxClient } from 'kern-sandbox/openai-agents'
import type { SandboxClient } from '@openai/agents-core/sandbox'

const client: SandboxClient = new KernSandboxClient()
const same: typeof KernSandboxClient = entry.KernSandboxClient
void [client, same]
