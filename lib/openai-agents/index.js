'use strict'
// kern-sandbox/openai-agents: a SandboxClient for OpenAI Agents' SandboxAgent, on kern machines.

const { KernSandboxClient } = require('./client.js')
const { KernSandboxSession } = require('./session.js')

module.exports = { KernSandboxClient, KernSandboxSession }
