'use strict'
// kern-sandbox/langchain: `await KernSandboxBackend.create(options)` is a LangChain deep agents
// sandbox backend (SandboxBackendProtocolV2) on a local kern machine, for
// `createDeepAgent({ backend })`. Needs deepagents (an optional peer dependency);
// `require('kern-sandbox')` does not load it. The code lives beside this file.

module.exports = require('./index.js').make(require('deepagents'))
