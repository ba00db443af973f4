'use strict'
// kern-sandbox/mastra: `new Workspace({ sandbox: new KernSandbox(), filesystem: new KernFilesystem({ sandbox }) })`
// gives a Mastra agent every workspace tool on a local kern machine. Needs @mastra/core (an
// optional peer dependency); `require('kern-sandbox')` does not load it. The code lives beside this file.

module.exports = require('./index.js').make(require('@mastra/core/workspace'))
