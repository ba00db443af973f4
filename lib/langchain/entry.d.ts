// Types of kern-sandbox/langchain: a LangChain deep agents sandbox backend (deepagents'
// SandboxBackendProtocolV2) on a kern machine. Hand-kept; checked against deepagents' own types by
// __test__/adapters/types.test.js.

/// <reference types="node" />

import {
  BaseSandbox,
  type ExecuteResponse,
  type FileUploadResponse,
  type FileDownloadResponse,
  type LsResult,
  type ReadResult,
  type ReadRawResult,
  type WriteResult,
  type EditResult,
  type DeleteResult,
  type GrepResult,
  type GlobResult,
} from 'deepagents'
import type { ExposedPort, Machine, MachineOptions, SandboxOptions } from '../../index.js'

export interface KernSandboxBackendOptions extends SandboxOptions {
  /** The backend's id. Default `kern-<uuid>`. */
  id?: string
  /** Options of the machine (its own image, ports to expose at start). */
  machine?: MachineOptions
  /** Files written when the backend starts: path (absolute, or relative to /workspace) → content. */
  initialFiles?: Record<string, string | Uint8Array>
  /** Deadline of each `execute`, seconds. Default the session's timeoutS. */
  timeoutS?: number
  /** Output `execute` keeps (stdout and stderr merged), bytes; past it `truncated` is set. Default 1 MiB. */
  maxOutputBytes?: number
}

/** A deep agents sandbox backend on a kern machine: `createDeepAgent({ backend })`. Files and
 * searches are done by the machine itself; paths are absolute (relative ones resolve against
 * /workspace). */
export class KernSandboxBackend extends BaseSandbox {
  constructor(options?: KernSandboxBackendOptions)
  /** A started backend. */
  static create(options?: KernSandboxBackendOptions): Promise<KernSandboxBackend>
  readonly id: string
  /** True from initialize() until close(). */
  readonly isRunning: boolean
  /** The machine; throws before initialize(). */
  readonly machine: Machine
  /** Starts the machine and writes initialFiles. */
  initialize(): Promise<void>
  /** Ends the machine. Idempotent. */
  close(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
  /** Makes a machine port reachable on 127.0.0.1 of the host. */
  exposePort(port: number): Promise<ExposedPort>
  execute(command: string): Promise<ExecuteResponse>
  uploadFiles(files: Array<[string, Uint8Array]>): Promise<FileUploadResponse[]>
  downloadFiles(paths: string[]): Promise<FileDownloadResponse[]>
  ls(path: string): Promise<LsResult>
  read(filePath: string, offset?: number, limit?: number): Promise<ReadResult>
  readRaw(filePath: string): Promise<ReadRawResult>
  write(filePath: string, content: string): Promise<WriteResult>
  edit(filePath: string, oldString: string, newString: string, replaceAll?: boolean): Promise<EditResult>
  delete(filePath: string): Promise<DeleteResult>
  grep(pattern: string, path?: string | null, glob?: string | null, maxCount?: number | null): Promise<GrepResult>
  glob(pattern: string, path?: string): Promise<GlobResult>
}
