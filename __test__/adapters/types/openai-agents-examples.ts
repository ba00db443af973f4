// kern-sandbox/openai-agents against @openai/agents-core's own types (CommonJS resolution).
import { KernSandboxClient, KernSandboxSession } from 'kern-sandbox/openai-agents'
import { run, tool } from '@openai/agents-core'
import {
  SandboxAgent,
  Manifest,
  filesystem,
  shell,
  type SandboxClient,
  type SandboxSession,
} from '@openai/agents-core/sandbox'

export async function example(): Promise<unknown> {
  const client = new KernSandboxClient({ memoryMb: 1024, machine: { ports: [8000] }, defaultShell: '/bin/bash' })
  const asClient: SandboxClient = client
  const agent = new SandboxAgent({
    name: 'builder',
    instructions: 'Build it.',
    capabilities: [filesystem(), shell()],
    defaultManifest: new Manifest({ entries: { 'README.md': { type: 'file', content: '# hi' } } }),
  })
  const result = await run(agent, 'go', { sandbox: { client, options: { sandbox: { cpus: 2 } } } })
  const session: KernSandboxSession = await client.create({ manifest: new Manifest() })
  const asSession: SandboxSession = session
  const out: string = await session.execCommand({ cmd: 'ls', yieldTimeMs: 1000 })
  const url: string | undefined = (await session.resolveExposedPort(8000)).url
  const archive: Uint8Array = await session.persistWorkspace()
  await session.hydrateWorkspace(archive, { archiveLimits: { maxMembers: 100 } })
  const record = await client.serializeSessionState(session.state)
  const again: KernSandboxSession = await client.resume(await client.deserializeSessionState(record))
  const machineAlive: boolean = session.machine.alive
  void [asClient, asSession, out, url, again, machineAlive, tool]
  await session.close()
  return result.finalOutput
}
