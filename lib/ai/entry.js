'use strict'
// kern-sandbox/ai: the AI SDK's `experimental_sandbox` on a kern machine, and a code interpreter
// tool on a warm kernel. Needs the `ai` package (an optional peer dependency); `require('kern-sandbox')`
// does not load it. The code lives beside this file.

module.exports = require('./index.js')
