// ESM entry of kern-sandbox/openai-agents: the classes built on @openai/agents-core's ES build (the
// one an ES app's runner uses), not on its CommonJS build.
import * as core from '@openai/agents-core'
import * as sandbox from '@openai/agents-core/sandbox'
import * as internal from '@openai/agents-core/sandbox/internal'
import { createRequire } from 'node:module'

const { make } = createRequire(import.meta.url)('./index.js')
const entry = make({ core, sandbox, internal })

export const { KernSandboxClient, KernSandboxSession } = entry
export default entry
