// Types of kern-sandbox/mastra: Mastra's WorkspaceSandbox and WorkspaceFilesystem (@mastra/core/workspace)
// on a kern machine. Hand-kept; checked against Mastra's own types by __test__/adapters/types.test.js.

/// <reference types="node" />

import {
  MastraSandbox,
  MastraFilesystem,
  SandboxProcessManager,
  ProcessHandle,
  type MastraSandboxOptions,
  type MastraFilesystemOptions,
  type SandboxFileInput,
  type WriteFilesOptions,
  type SandboxNetworking,
  type SandboxInfo,
  type SandboxStartResult,
  type ProviderStatus,
  type CommandResult,
  type SpawnProcessOptions,
  type ProcessInfo,
  type FileContent,
  type FileEntry,
  type FileStat,
  type FilesystemInfo,
  type ReadOptions,
  type WriteOptions,
  type ListOptions,
  type RemoveOptions,
  type CopyOptions,
} from '@mastra/core/workspace'
import type { Machine, MachineOptions, SandboxOptions } from '../../index.js'

export interface KernSandboxOptions
  extends
    Omit<SandboxOptions, 'env'>,
    Pick<MastraSandboxOptions, 'env' | 'workingDirectory' | 'onStart' | 'onStop' | 'onDestroy'> {
  id?: string
  /** Options of the machine (its own image, ports exposed at start). */
  machine?: MachineOptions
  /** Appended to getInstructions(). */
  instructions?: string
}

/** Mastra's process handle on a machine process; `pid` is the pid in the machine. */
export class KernProcessHandle extends ProcessHandle {
  private constructor()
  readonly pid: string
  readonly exitCode: number | undefined
  kill(): Promise<boolean>
  sendStdin(data: string): Promise<void>
  closeStdin(): Promise<void>
  wait(): Promise<CommandResult>
}

export class KernProcessManager extends SandboxProcessManager<KernSandbox> {
  spawn(command: string, options?: SpawnProcessOptions): Promise<KernProcessHandle>
  list(): Promise<ProcessInfo[]>
}

/** A Mastra sandbox on a kern machine: `new Workspace({ sandbox: new KernSandbox() })`. Commands
 * run by /bin/sh -c in the machine; stop() and destroy() end the machine (kern cannot pause). */
export class KernSandbox extends MastraSandbox {
  constructor(options?: KernSandboxOptions)
  readonly id: string
  readonly name: string
  readonly provider: 'kern'
  status: ProviderStatus
  readonly processes: KernProcessManager
  /** getPortUrl(port): the host URL (127.0.0.1) of a machine port; null while not running. */
  readonly networking: SandboxNetworking
  /** The running machine; throws before start. */
  readonly machine: Machine
  start(): Promise<SandboxStartResult>
  stop(): Promise<void>
  destroy(): Promise<void>
  writeFiles(files: SandboxFileInput[], options?: WriteFilesOptions): Promise<void>
  getInstructions(): string
  getInfo(): Promise<SandboxInfo>
}

export interface KernFilesystemOptions extends MastraFilesystemOptions {
  sandbox: KernSandbox
  /** The machine directory this filesystem's `/` is. Default the sandbox's working directory. */
  basePath?: string
  readOnly?: boolean
  id?: string
}

/** A Mastra filesystem over the files of a KernSandbox's machine. */
export class KernFilesystem extends MastraFilesystem {
  constructor(options: KernFilesystemOptions)
  readonly id: string
  readonly name: string
  readonly provider: 'kern'
  status: ProviderStatus
  readonly readOnly: boolean
  readonly sandbox: KernSandbox
  readonly basePath: string
  init(): Promise<void>
  getInstructions(): string
  realpath(path: string): Promise<string>
  readFile(path: string, options?: ReadOptions): Promise<string | Buffer>
  writeFile(path: string, content: FileContent, options?: WriteOptions): Promise<void>
  appendFile(path: string, content: FileContent): Promise<void>
  deleteFile(path: string, options?: RemoveOptions): Promise<void>
  copyFile(src: string, dest: string, options?: CopyOptions): Promise<void>
  moveFile(src: string, dest: string, options?: CopyOptions): Promise<void>
  mkdir(path: string, options?: { recursive?: boolean }): Promise<void>
  rmdir(path: string, options?: RemoveOptions): Promise<void>
  readdir(path: string, options?: ListOptions): Promise<FileEntry[]>
  exists(path: string): Promise<boolean>
  stat(path: string): Promise<FileStat>
  getInfo(): Promise<FilesystemInfo>
}
