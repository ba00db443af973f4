'use strict'
// kern-sandbox/langchain: a deep agents sandbox backend on a kern machine. make(deepagents) builds
// the class on one copy of deepagents (its CommonJS or its ES build), as its entry passes it.

const backend = require('./backend.js')

function make(deepagents) {
  return backend.make(deepagents)
}

module.exports = { make }
