// kern-sandbox/langchain's ESM entry against deepagents' own types.
import entry, { KernSandboxBackend } from 'kern-sandbox/langchain'
import type { SandboxBackendProtocolV2 } from 'deepagents'

const backend: SandboxBackendProtocolV2 = await KernSandboxBackend.create()
const same: typeof KernSandboxBackend = entry.KernSandboxBackend
void [backend, same]
