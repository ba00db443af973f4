// A Mastra workspace on a kern machine, offline: the workspace tools a Mastra agent gets
// (`new Agent({ workspace, ... })`) are called here directly, in the order a model would call them.
//
//   node examples/mastra.mjs      (needs kern, or KERN_BIN pointing at the stand-in)
import { Workspace, createWorkspaceTools, WORKSPACE_TOOLS } from '@mastra/core/workspace'
import { KernSandbox, KernFilesystem } from 'kern-sandbox/mastra'

const sandbox = new KernSandbox({ memoryMb: 512 })
const workspace = new Workspace({ sandbox, filesystem: new KernFilesystem({ sandbox }) })
await workspace.init()
try {
  const tools = await createWorkspaceTools(workspace)
  const call = (name, input) => tools[name].execute(input, { workspace })
  const { FILESYSTEM: FS, SANDBOX: SB } = WORKSPACE_TOOLS

  console.log(
    await call(FS.WRITE_FILE, {
      path: '/stats.py',
      content: 'import statistics\nprint(statistics.mean([3, 5, 10]))\n',
    }),
  )
  console.log(`run -> ${String(await call(SB.EXECUTE_COMMAND, { command: 'python3 stats.py' })).trim()}`)
  await call(FS.READ_FILE, { path: '/stats.py' })
  await call(FS.EDIT_FILE, { path: '/stats.py', old_string: 'mean', new_string: 'median' })
  console.log(`after edit -> ${String(await call(SB.EXECUTE_COMMAND, { command: 'python3 stats.py' })).trim()}`)
  console.log(`files -> ${String(await call(FS.LIST_FILES, { path: '/' })).replace(/\n/g, ' ')}`)
} finally {
  await workspace.destroy()
}
