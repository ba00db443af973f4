'use strict'
// kern-sandbox/mastra: a Mastra WorkspaceSandbox and WorkspaceFilesystem on a kern machine.
// make(workspaceModule) builds the classes on the given copy of @mastra/core/workspace: the
// CommonJS entry passes its CommonJS build, the ES entry its ES build, so each app gets classes
// extending the very base classes (and throwing the very errors) its Mastra checks for.

const process_ = require('./process.js')
const sandbox = require('./sandbox.js')
const filesystem = require('./filesystem.js')

function make(mastra) {
  const { KernProcessManager, KernProcessHandle } = process_.make(mastra)
  const { KernSandbox } = sandbox.make(mastra, { KernProcessManager })
  const { KernFilesystem } = filesystem.make(mastra, { KernSandbox })
  return { KernSandbox, KernFilesystem, KernProcessManager, KernProcessHandle }
}

module.exports = { make }
