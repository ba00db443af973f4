'use strict'
// kern-sandbox/ai: the AI SDK 7 sandbox session on a Machine, and a code interpreter tool.

const { createSandboxSession } = require('./session.js')
const { codeInterpreterTool } = require('./code-interpreter.js')

module.exports = { createSandboxSession, codeInterpreterTool }
