// kern-sandbox/langchain against deepagents' own types (CommonJS resolution).
import { KernSandboxBackend } from 'kern-sandbox/langchain'
import { createDeepAgent, type SandboxBackendProtocolV2 } from 'deepagents'

export async function example(): Promise<unknown> {
  const backend = await KernSandboxBackend.create({ memoryMb: 1024, initialFiles: { '/workspace/a.txt': 'x' } })
  const protocol: SandboxBackendProtocolV2 = backend
  const agent = createDeepAgent({ backend })
  const later = new KernSandboxBackend({ timeoutS: 60 })
  await later.initialize()
  const running: boolean = later.isRunning
  const r = await backend.execute('ls')
  const exit: number | null = r.exitCode
  const url: string = (await backend.exposePort(8000)).url
  void [protocol, running, exit, url]
  await later.close()
  return agent
}
