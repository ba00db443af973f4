// ESM entry of kern-sandbox/e2b: the same objects as the CommonJS one, so instanceof holds across both.
import e2b from './entry.js'

export const {
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
} = e2b
export default e2b
