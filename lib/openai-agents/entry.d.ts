// Types of kern-sandbox/openai-agents: a SandboxClient of OpenAI Agents (@openai/agents-core) on
// kern machines. Hand-kept; checked against agents-core's own types by __test__/adapters/types.test.js.

/// <reference types="node" />

import type {
  Manifest,
  SandboxClient,
  SandboxClientCreateArgs,
  SandboxClientOptions,
  SandboxClientResumeOptions,
  SandboxSession,
  SandboxSessionState,
  SandboxArchiveLimits,
  ExecCommandArgs,
  SandboxExecResult,
  WriteStdinArgs,
  ReadFileArgs,
  ListDirectoryArgs,
  SandboxDirectoryEntry,
  ViewImageArgs,
  MaterializeEntryArgs,
  WorkspaceArchiveData,
  WorkspaceArchiveOptions,
  ExposedPortEndpoint,
  SandboxPreStopHook,
} from '@openai/agents-core/sandbox'
import type { Editor, ToolOutputImage } from '@openai/agents-core'
import type { Machine, MachineOptions, SandboxOptions } from '../../index.js'

/** Options of the client: kern-sandbox's Sandbox options (each session is one Sandbox), plus: */
export interface KernSandboxClientOptions extends SandboxOptions {
  /** Options of each session's machine (its own image, ports to expose at start). */
  machine?: MachineOptions
  /** Output a running command may hold unread between calls, bytes; later output is dropped and
   * the model is told so. Default 1 MiB. */
  maxOutputBytes?: number
  /** The shell exec_command runs (with -lc, or -c for login: false). Default /bin/sh. */
  defaultShell?: string
  /** Machine ports exposed on 127.0.0.1 when a session is created. */
  exposedPorts?: number[]
}

/** Per-run options (`run(agent, input, { sandbox: { client, options } })`). */
export interface KernSandboxCreateOptions extends SandboxClientOptions {
  /** Sandbox options for this session, over the client's. */
  sandbox?: SandboxOptions
  machine?: MachineOptions
}

/** What a kern session's state holds (JSON through serializeSessionState). */
export interface KernSandboxSessionState extends SandboxSessionState {
  /** Names the live session in this process, for resume() and delete(). */
  sessionKey: string
  sandboxOptions: Record<string, unknown>
  machineOptions: Record<string, unknown>
}

/** One agent session: a kern Sandbox and its machine. Paths are the manifest root's (/workspace
 * by default). */
export class KernSandboxSession implements SandboxSession<KernSandboxSessionState> {
  private constructor()
  state: KernSandboxSessionState
  /** The machine this session drives. */
  readonly machine: Machine
  start(): Promise<void>
  running(): Promise<boolean>
  registerPreStopHook(hook: SandboxPreStopHook): () => void
  runPreStopHooks(): Promise<void>
  preStop(): Promise<void>
  /** Ends the commands it started; the machine keeps running. */
  stop(): Promise<void>
  shutdown(): Promise<void>
  delete(): Promise<void>
  /** Ends the machine and its Sandbox. Idempotent. */
  close(): Promise<void>
  supportsPty(): boolean
  exec(args: ExecCommandArgs): Promise<SandboxExecResult>
  /** A command still running after `yieldTimeMs` returns what it printed so far and a session id. */
  execCommand(args: ExecCommandArgs): Promise<string>
  /** Types `chars` into a tty session (empty: polls any session) and returns its new output. */
  writeStdin(args: WriteStdinArgs): Promise<string>
  readFile(args: ReadFileArgs): Promise<Uint8Array>
  listDir(args: ListDirectoryArgs): Promise<SandboxDirectoryEntry[]>
  pathExists(path: string, runAs?: string): Promise<boolean>
  directoryExists(path: string, runAs?: string): Promise<boolean>
  viewImage(args: ViewImageArgs): Promise<ToolOutputImage>
  /** apply_patch operations (V4A diffs) on the machine's files. */
  createEditor(runAs?: string): Editor
  materializeEntry(args: MaterializeEntryArgs): Promise<void>
  applyManifest(manifest: Manifest, runAs?: string): Promise<void>
  setArchiveLimits(limits?: SandboxArchiveLimits | null): void
  /** The manifest root as a tar archive. */
  persistWorkspace(): Promise<Uint8Array>
  /** Unpacks a tar archive into the manifest root, within the archive limits. */
  hydrateWorkspace(data: WorkspaceArchiveData, options?: WorkspaceArchiveOptions): Promise<void>
  /** A machine port on 127.0.0.1 of the host. */
  resolveExposedPort(port: number): Promise<ExposedPortEndpoint>
}

/** `SandboxClient` of OpenAI Agents for kern: `run(agent, input, { sandbox: { client } })`. */
export class KernSandboxClient implements SandboxClient<KernSandboxCreateOptions, KernSandboxSessionState> {
  constructor(options?: KernSandboxClientOptions)
  readonly backendId: 'kern'
  create(
    args?: SandboxClientCreateArgs<KernSandboxCreateOptions> | Manifest,
    manifestOptions?: KernSandboxCreateOptions,
  ): Promise<KernSandboxSession>
  /** The live session of this process when it still runs, else a new machine with the state's
   * options and manifest. */
  resume(
    state: KernSandboxSessionState,
    options?: SandboxClientResumeOptions<KernSandboxCreateOptions>,
  ): Promise<KernSandboxSession>
  delete(state: KernSandboxSessionState): Promise<void>
  serializeSessionState(state: KernSandboxSessionState): Promise<Record<string, unknown>>
  deserializeSessionState(state: Record<string, unknown>): Promise<KernSandboxSessionState>
  canPersistOwnedSessionState(state: KernSandboxSessionState): boolean
}
