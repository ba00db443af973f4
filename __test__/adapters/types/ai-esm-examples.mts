// kern-sandbox/ai's ESM entry against ai 7's own types.
import ai, { createSandboxSession, codeInterpreterTool } from 'kern-sandbox/ai'
import { Sandbox } from 'kern-sandbox'
import type { Experimental_SandboxSession } from 'ai'

const sbx = await new Sandbox().open()
const machine = await sbx.machine()
const session: Experimental_SandboxSession = createSandboxSession(machine)
const same: typeof createSandboxSession = ai.createSandboxSession
void [session, same, codeInterpreterTool(machine)]
