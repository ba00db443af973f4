'use strict'
// kern-sandbox/e2b: E2B's sandbox API (the `e2b` SDK's commands, PTYs, files, ports, and
// `@e2b/code-interpreter`'s `runCode` and contexts), each sandbox one local machine on kern,
// network off by default. Change `from '@e2b/code-interpreter'` (or `'e2b'`) to
// `from 'kern-sandbox/e2b'`. The code lives in lib/e2b/.

const { Sandbox } = require('./lib/e2b/sandbox.js')
const { ChartType, ScaleType } = require('./lib/charts.js')
const { OutputMessage, ExecutionError, Result, Execution } = require('./lib/e2b/execution.js')
const { FileType, FilesystemEventType } = require('./lib/e2b/enums.js')
const {
  SandboxError,
  TimeoutError,
  InvalidArgumentError,
  NotFoundError,
  FileNotFoundError,
  SandboxNotFoundError,
  NotEnoughSpaceError,
  AuthenticationError,
  GitAuthError,
  GitUpstreamError,
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
  FileNotFoundError,
  SandboxNotFoundError,
  NotEnoughSpaceError,
  AuthenticationError,
  GitAuthError,
  GitUpstreamError,
  CommandExitError,
  FileType,
  FilesystemEventType,
  ChartType,
  ScaleType,
}
