'use strict'
// kern-sandbox/e2b: E2B's sandbox API (the `e2b` SDK's commands, PTYs, files, ports, and
// `@e2b/code-interpreter`'s `runCode` and contexts), each sandbox one local machine on kern,
// network off by default. Change `from '@e2b/code-interpreter'` (or `'e2b'`) to
// `from 'kern-sandbox/e2b'`. The code lives beside this file.

const { Sandbox } = require('./sandbox.js')
const { ChartType, ScaleType } = require('../charts.js')
const { OutputMessage, ExecutionError, Result, Execution } = require('./execution.js')
const { FileType, FilesystemEventType } = require('./enums.js')
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
} = require('./errors.js')

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
