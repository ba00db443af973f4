'use strict'
// kern-sandbox/openai-agents: `new KernSandboxClient(options)` runs OpenAI Agents' SandboxAgent on
// a local kern machine per session. Needs @openai/agents-core (an optional peer dependency);
// `require('kern-sandbox')` does not load it. The code lives beside this file.

module.exports = require('./index.js').make({
  core: require('@openai/agents-core'),
  sandbox: require('@openai/agents-core/sandbox'),
  internal: require('@openai/agents-core/sandbox/internal'),
})
