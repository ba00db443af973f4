// ESM entry: the same objects as the CommonJS entry, so instanceof holds across both.
import kern from './index.js'

export const {
  Sandbox,
  Kernel,
  Machine,
  Result,
  withSandbox,
  runCode,
  ExecutionResult,
  SandboxError,
  MountRefused,
  ChartType,
  ScaleType,
  LANGUAGE_NAMES,
  resolveLanguage,
  doctor,
  version,
} = kern
export default kern
