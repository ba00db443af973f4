'use strict'
// kern-sandbox/e2b: E2B's code-interpreter API (`Sandbox.create()`, `sandbox.runCode()`, contexts,
// files, commands), running locally on kern, network off by default. Change
// `from '@e2b/code-interpreter'` to `from 'kern-sandbox/e2b'`. The code lives in lib/e2b/.

const { Sandbox } = require('./lib/e2b/sandbox.js')
const { ChartType, ScaleType } = require('./lib/charts.js')
const { OutputMessage, ExecutionError, Result, Execution } = require('./lib/e2b/execution.js')
const {
  SandboxError,
  TimeoutError,
  InvalidArgumentError,
  NotFoundError,
  CommandExitError,
} = require('./lib/e2b/errors.js')

module.exports = {
  Sandbox,
  Execution,
  Result,
  ExecutionError,
  OutputMessage,
  SandboxError,
  TimeoutError,
  InvalidArgumentError,
  NotFoundError,
  CommandExitError,
  ChartType,
  ScaleType,
}
