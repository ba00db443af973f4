// kern-sandbox/mastra against @mastra/core's own types (CommonJS resolution).
import { KernSandbox, KernFilesystem } from 'kern-sandbox/mastra'
import { Workspace, type WorkspaceSandbox, type WorkspaceFilesystem, type CommandResult } from '@mastra/core/workspace'

export async function example(): Promise<CommandResult | undefined> {
  const sandbox = new KernSandbox({ memoryMb: 1024, env: { CI: '1' }, machine: { ports: [3000] } })
  const filesystem = new KernFilesystem({ sandbox })
  const asSandbox: WorkspaceSandbox = sandbox
  const asFs: WorkspaceFilesystem = filesystem
  const workspace = new Workspace({ sandbox, filesystem })
  await workspace.init()
  const r = await sandbox.executeCommand?.('ls', ['-la'], { timeout: 5000, cwd: '/tmp' })
  const url: string | null = await sandbox.networking.getPortUrl(3000)
  const h = await sandbox.processes.spawn('cat')
  await h.sendStdin('x')
  const text = await filesystem.readFile('/README.md', { encoding: 'utf8' })
  void [asSandbox, asFs, url, text]
  await workspace.destroy()
  return r
}
