'use strict'
// kern-sandbox/openai-agents: a SandboxClient for OpenAI Agents' SandboxAgent, on kern machines.
// make(agentsCore) builds the classes on one copy of @openai/agents-core: the CommonJS entry passes
// its CommonJS build, the ES entry its ES build (each has its own Manifest and error classes).

const session = require('./session.js')
const client = require('./client.js')

/** @param {{ core: object, sandbox: object, internal: object }} deps the modules
 *   @openai/agents-core, @openai/agents-core/sandbox and @openai/agents-core/sandbox/internal */
function make(deps) {
  const { KernSandboxSession } = session.make(deps)
  const { KernSandboxClient } = client.make(deps, { KernSandboxSession })
  return { KernSandboxClient, KernSandboxSession }
}

module.exports = { make }
