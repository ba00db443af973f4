// Types of kern-sandbox/e2b: E2B's code-interpreter API (`@e2b/code-interpreter`), running
// locally on kern. Hand-kept; __test__/types/e2b-drift.test.js holds it to the runtime.

/// <reference types="node" />

import type { SandboxOptions as KernSandboxOptions, ChartTypes } from './index.js'

/** E2B's chart enums and shapes: `Result.chart` of a matplotlib figure. */
export { ChartType, ScaleType } from './index.js'
export type {
  ChartTypes,
  Chart,
  Chart2D,
  PointChart,
  LineChart,
  ScatterChart,
  BarChart,
  PieChart,
  BoxAndWhiskerChart,
  SuperChart,
  UnknownChart,
} from './index.js'

/** A code context's language as runCode and createCodeContext take it, in any case. `"r"` and
 * `"java"` are E2B languages that reject here (no R or Java kernel). */
export type RunCodeLanguage =
  'python' | 'python3' | 'js' | 'javascript' | 'node' | 'ts' | 'typescript' | 'bash' | 'sh' | 'r' | 'java'

/** A code context: one warm kernel, independent of the others. */
export interface Context {
  id: string
  /** "python", "javascript", "typescript" or "bash". */
  language: string
  /** Its working directory in the sandbox. */
  cwd: string
}

/** One line of a cell's output, streamed to onStdout/onStderr. */
export class OutputMessage {
  /** The line, ending in its newline (but for an unterminated last line). */
  readonly line: string
  /** Unix epoch in nanoseconds. */
  readonly timestamp: number
  /** True for stderr. */
  readonly error: boolean
  toString(): string
}

/** An uncaught exception of a cell. */
export class ExecutionError {
  name: string
  value: string
  traceback: string
}

/** E2B's tabular data of a pandas DataFrame: its columns by name. */
export type ResultData = Record<string, unknown>

/** A result's formats by E2B's names, and any other MIME type by its own. */
export type RawData = { [key: string]: any }

/** A value a cell produced (its last expression, a display() call, a figure, a saved PIL image). */
export class Result {
  readonly text?: string
  readonly html?: string
  readonly markdown?: string
  readonly svg?: string
  /** Base64. */
  readonly png?: string
  /** Base64. */
  readonly jpeg?: string
  /** Base64. */
  readonly pdf?: string
  readonly latex?: string
  readonly json?: string
  readonly javascript?: string
  /** A DataFrame's columns (`to_dict(orient="list")`, timestamps as ISO strings, NaN as null). */
  readonly data?: ResultData
  /** A matplotlib figure read as data (E2B's chart shape); narrow it on `type`. */
  readonly chart?: ChartTypes
  /** The MIME types without a field of their own. */
  readonly extra?: any
  /** True for the value of the cell's last expression. */
  readonly isMainResult: boolean
  readonly raw: RawData
  /** The formats present: html, markdown, svg, png, jpeg, pdf, latex, json, javascript, data,
   * then the extra MIME types. */
  formats(): string[]
  toJSON(): Record<string, unknown>
}

export interface Logs {
  stdout: string[]
  stderr: string[]
}

/** What one runCode produced. */
export class Execution {
  results: Result[]
  /** Output, line by line. */
  logs: Logs
  error?: ExecutionError
  /** The cell's number in its context (1, 2, ...; a restart starts over). */
  executionCount?: number
  /** The main result's text. */
  readonly text: string | undefined
  toJSON(): { results: Result[]; logs: Logs; error?: ExecutionError }
}

export interface RunCodeOpts {
  /** Default "python". Exclusive with `context`. */
  language?: RunCodeLanguage
  /** The context to run in. Exclusive with `language`. */
  context?: Context
  onStdout?: (output: OutputMessage) => Promise<any> | any
  onStderr?: (output: OutputMessage) => Promise<any> | any
  onResult?: (data: Result) => Promise<any> | any
  onError?: (error: ExecutionError) => Promise<any> | any
  /** Environment variables for this execution only. */
  envs?: Record<string, string>
  /** The cell's deadline; past it the cell is interrupted, the context keeps its state, and the
   * call rejects with TimeoutError. Default 60000; 0 for none. */
  timeoutMs?: number
  /** Accepted for E2B compatibility; there is no request to time out here. */
  requestTimeoutMs?: number
}

export interface CreateCodeContextOpts {
  /** Default "python". */
  language?: RunCodeLanguage
  /** Its working directory (created if missing). Default "/home/user". */
  cwd?: string
  requestTimeoutMs?: number
}

export interface SandboxOpts {
  /** Environment variables of every cell and command. */
  envs?: Record<string, string>
  /** The sandbox's lifetime: it is killed this long after creation (or the last setTimeout).
   * Default 300000 (5 minutes). */
  timeoutMs?: number
  /** Kept, and returned by getInfo(). */
  metadata?: Record<string, string>
  /** Network access for cells and commands. Default false (E2B's default is true). */
  allowInternetAccess?: boolean
  /** kern-sandbox's own Sandbox options, e.g. `{ memoryMb: 1024, cpus: 2 }`, except those the
   * options above set (image, env, network, boxWorkspace). */
  kern?: Omit<KernSandboxOptions, 'image' | 'env' | 'network' | 'boxWorkspace'>
  /** Accepted for E2B compatibility and ignored (nothing is remote). */
  apiKey?: string
  requestTimeoutMs?: number
  [option: string]: unknown
}

export interface SandboxInfo {
  sandboxId: string
  /** The image the sandbox runs. */
  templateId: string
  /** The template name it was created with. */
  name?: string
  metadata: Record<string, string>
  startedAt: Date
  endAt: Date
}

export type FileType = 'file' | 'dir'

export interface EntryInfo {
  name: string
  /** A symlink is a "file" with its `symlinkTarget`. */
  type: FileType
  /** Absolute, under /home/user. */
  path: string
  size: number
  mode: number
  permissions: string
  modifiedTime: Date
  symlinkTarget?: string
}

export interface WriteInfo {
  name: string
  type?: FileType
  path: string
}

export interface WriteEntry {
  path: string
  data: string | ArrayBuffer | ArrayBufferView | Blob | ReadableStream
}

/** sandbox.files: the workspace, at /home/user. Paths are absolute under it or relative to it. */
export interface Filesystem {
  read(path: string, opts?: { format?: 'text' }): Promise<string>
  read(path: string, opts: { format: 'bytes' }): Promise<Uint8Array>
  read(path: string, opts: { format: 'blob' }): Promise<Blob>
  read(path: string, opts: { format: 'stream' }): Promise<ReadableStream<Uint8Array>>
  write(path: string, data: string | ArrayBuffer | ArrayBufferView | Blob | ReadableStream): Promise<WriteInfo>
  write(files: WriteEntry[]): Promise<WriteInfo[]>
  list(path: string, opts?: { depth?: number }): Promise<EntryInfo[]>
  exists(path: string): Promise<boolean>
  getInfo(path: string): Promise<EntryInfo>
  remove(path: string): Promise<void>
  /** False when it already existed. */
  makeDir(path: string): Promise<boolean>
  rename(oldPath: string, newPath: string): Promise<EntryInfo>
}

export interface CommandResult {
  stdout: string
  stderr: string
  exitCode: number
  error?: string
}

export interface CommandStartOpts {
  envs?: Record<string, string>
  /** Default "/home/user". */
  cwd?: string
  onStdout?: (data: string) => void | Promise<void>
  onStderr?: (data: string) => void | Promise<void>
  /** Default 60000; 0 for none (the sandbox's lifetime bounds it). */
  timeoutMs?: number
  requestTimeoutMs?: number
  /** Not supported here: true rejects. */
  background?: false
}

/** sandbox.commands: each command a fresh box on the workspace, run by bash. */
export interface Commands {
  run(cmd: string, opts?: CommandStartOpts): Promise<CommandResult>
}

/** E2B's code-interpreter sandbox, local: one workspace at /home/user, a warm kernel per code
 * context, a fresh box per command, network off unless `allowInternetAccess`. */
export class Sandbox {
  private constructor()
  readonly sandboxId: string
  readonly metadata: Record<string, string>
  readonly files: Filesystem
  readonly commands: Commands
  static create(opts?: SandboxOpts): Promise<Sandbox>
  static create(template: string, opts?: SandboxOpts): Promise<Sandbox>
  /** The live sandbox of this process with that id. */
  static connect(sandboxId: string): Promise<Sandbox>
  /** Kills the live sandbox of this process with that id; false when there is none. */
  static kill(sandboxId: string): Promise<boolean>
  runCode(code: string, opts?: RunCodeOpts): Promise<Execution>
  createCodeContext(opts?: CreateCodeContextOpts): Promise<Context>
  listCodeContexts(): Promise<Context[]>
  restartCodeContext(context: Context | string): Promise<void>
  removeCodeContext(context: Context | string): Promise<void>
  setTimeout(timeoutMs: number): Promise<void>
  isRunning(): Promise<boolean>
  getInfo(): Promise<SandboxInfo>
  kill(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
}

export class SandboxError extends Error {
  /** The core's error code (see kern-sandbox's SandboxErrorCode) when the error came from the
   * core: match on it, never on the message. */
  code?: string
}
/** A cell's or command's timeoutMs passed, or the sandbox was killed mid-request. */
export class TimeoutError extends SandboxError {}
export class InvalidArgumentError extends SandboxError {}
export class NotFoundError extends SandboxError {}
/** A command exited non-zero. */
export class CommandExitError extends SandboxError implements CommandResult {
  readonly stdout: string
  readonly stderr: string
  readonly exitCode: number
  readonly error?: string
}
