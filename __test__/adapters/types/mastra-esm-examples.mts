// kern-sandbox/mastra's ESM entry against @mastra/core's own types.
import entry, { KernSandbox, KernFilesystem } from 'kern-sandbox/mastra'
import { Workspace } from '@mastra/core/workspace'

const sandbox = new KernSandbox()
const workspace = new Workspace({ sandbox, filesystem: new KernFilesystem({ sandbox }) })
const same: typeof KernSandbox = entry.KernSandbox
void [workspace, same]
