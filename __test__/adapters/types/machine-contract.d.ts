// The Machine API contract (issue 25, /work/wt/machine-api.d.ts) as an augmentation of the
// package's index.d.ts, used by types.test.js ONLY while index.d.ts does not declare Machine yet
// (machines not merged). Delete this file once it does: the test then compiles against the real
// declarations.

import type { ExecutionResult, ChunkCallback, Kernel, KernelOptions } from '../../../index.js'

declare module '../../../index.js' {
  export interface MachineOptions {
    /** The machine's own image (checked like the session's). Default: the session's `image`. */
    image?: string
    /** Ports to expose at start (each as by `exposePort`). */
    ports?: number[]
    /** Deadline for the machine to start, seconds. Default: the session's `timeoutS`. */
    timeoutS?: number
  }

  /** Options of `Machine.exec()`. */
  export interface MachineExecOptions {
    /** Working directory in the machine (absolute, or relative to the machine's working directory,
     * which is the session's `boxWorkspace`). */
    cwd?: string
    /** Added to the session's env for this process. */
    env?: Record<string, string>
    /** Written to the process's stdin, then EOF. Default: stdin at EOF. */
    stdin?: string | Buffer
    /** Deadline, seconds: the process group is killed, fault `timeout`, the machine lives on.
     * @default the session's timeoutS */
    timeoutS?: number
    signal?: AbortSignal
    onStdout?: ChunkCallback | null
    onStderr?: ChunkCallback | null
    /** Cap on captured stdout+stderr (each); past it output is discarded and `truncated` is set.
     * @default the session's maxOutputBytes */
    maxOutputBytes?: number
    /** Run as this user of the image (name or numeric uid). Default: root. Where the host maps no uid
     * range into the box, only root can be mapped: then a non-root user runs as root with that user's
     * HOME/USER/LOGNAME set (see docs/machines.md). */
    user?: string
  }

  export interface PtySize {
    cols: number
    rows: number
  }

  /** Options of `Machine.spawn()`. */
  export interface SpawnOptions extends Omit<MachineExecOptions, 'stdin'> {
    /** true: stdin stays open for `write()`/`end()`. Default false: stdin at EOF (a PTY's input is
     * always open). */
    stdin?: boolean
    /** Run on a pseudo-terminal of this size (TERM=xterm-256color, a login-like environment); output
     * then arrives merged through `onData`. */
    pty?: PtySize
    /** PTY output (and, for a non-PTY process, stdout and stderr merged as they arrive). */
    onData?: ((data: Buffer) => void) | null
    /** Default: none for spawned processes. */
    timeoutS?: number
  }

  /** A process started by `Machine.spawn()` or found by `Machine.attach()`. */
  export interface Process {
    /** The pid as seen inside the machine. */
    readonly pid: number
    /** null while it runs; the exit code (128+n for signal n) once it ended. */
    readonly exitCode: number | null
    /** Writes to its stdin (a PTY: types). Rejects with a SandboxError after `end()` or exit. */
    write(data: string | Buffer): Promise<void>
    /** Closes its stdin (a PTY: sends EOF, ^D). */
    end(): Promise<void>
    /** Signals its process group; resolves true, or false when it had already exited. */
    kill(signal?: NodeJS.Signals | number): Promise<boolean>
    /** Resizes its PTY (SIGWINCH). Rejects for a non-PTY process or non-positive sizes. */
    resize(size: PtySize): Promise<void>
    /** Resolves to its result once it exits (stdout/stderr as captured, bounded by maxOutputBytes;
     * a PTY's output is in stdout). Never rejects for a non-zero exit. */
    wait(): Promise<ExecutionResult>
    /** Stops this handle's callbacks; the process keeps running. */
    detach(): void
  }

  export interface ProcessInfo {
    pid: number
    command: string
    args: string[]
    cwd: string
    /** true if it runs on a PTY. */
    pty: boolean
  }

  export interface AttachOptions {
    onStdout?: ChunkCallback | null
    onStderr?: ChunkCallback | null
    onData?: ((data: Buffer) => void) | null
  }

  export type MachineEntryType = 'file' | 'dir' | 'symlink' | 'other'

  export interface MachineEntry {
    name: string
    /** Absolute path in the machine. */
    path: string
    type: MachineEntryType
    size: number
    /** Permission bits and type bits as st_mode. */
    mode: number
    /** Modification time, ms since the epoch. */
    mtime: number
    /** For a symlink: where it points (as stored), else null. */
    symlinkTarget: string | null
    /** Owner and group names (or numeric ids as strings where the image has no name). */
    owner: string
    group: string
  }

  export type WatchEventType = 'create' | 'write' | 'remove' | 'rename' | 'chmod'

  export interface WatchEvent {
    type: WatchEventType
    /** Absolute path in the machine. */
    path: string
  }

  export interface Watcher {
    close(): Promise<void>
  }

  export interface ExposedPort {
    host: '127.0.0.1'
    /** The host port (ephemeral, on 127.0.0.1). */
    port: number
    /** `http://127.0.0.1:<port>` */
    url: string
    /** The port inside the machine. */
    machinePort: number
  }

  export interface MachineMetrics {
    cpuPercent: number
    memoryBytes: number
    /** null where no memory cap is enforced. */
    memoryLimitBytes: number | null
    pids: number
    /** Bytes the machine wrote to its writable root (its overlay), or null where not known. */
    diskBytes: number | null
  }

  /** One persistent box per call of `Sandbox.machine()`: processes, terminals, files, ports. */
  export class Machine {
    /** The box's name (kern's). */
    readonly name: string
    /** False once closed or its box died. */
    readonly alive: boolean
    /** The working directory in the machine (the session's boxWorkspace). */
    readonly workdir: string
    /** Runs to completion. A string runs through the image's `/bin/sh -c`; an array is an argv. */
    exec(command: string | string[], opts?: MachineExecOptions): Promise<ExecutionResult>
    /** Starts a process; resolves as soon as it runs. */
    spawn(command: string | string[], opts?: SpawnOptions): Promise<Process>
    /** Processes started through this API and still running. */
    processes(): Promise<ProcessInfo[]>
    /** A handle on a process started earlier; output from the attach on. Unknown pid: SandboxError. */
    attach(pid: number, opts?: AttachOptions): Promise<Process>
    readFile(path: string, opts?: { maxBytes?: number }): Promise<Buffer>
    /** Parents created. */
    writeFile(path: string, data: string | Buffer | Uint8Array, opts?: { mode?: number }): Promise<void>
    /** Entries below `path`, `depth` levels (default 1). */
    list(path: string, opts?: { depth?: number }): Promise<MachineEntry[]>
    /** The entry (a symlink itself, not followed). Missing: SandboxError with code ERR_NOT_FOUND. */
    stat(path: string): Promise<MachineEntry>
    /** Files, symlinks, and directory trees. Missing: SandboxError ERR_NOT_FOUND. */
    remove(path: string): Promise<void>
    rename(from: string, to: string): Promise<void>
    /** Creates a directory and its parents; resolves false when it already existed. */
    mkdir(path: string): Promise<boolean>
    /** Watches a directory. Missing path or a file: SandboxError. */
    watch(path: string, onEvent: (event: WatchEvent) => void, opts?: { recursive?: boolean }): Promise<Watcher>
    /** A host address (127.0.0.1 only) reaching `port` on the machine's loopback. Idempotent per port. */
    exposePort(port: number): Promise<ExposedPort>
    metrics(): Promise<MachineMetrics>
    /** A warm kernel running inside this machine (sees its processes, loopback and files). */
    kernel(opts?: Omit<KernelOptions, 'image'>): Promise<Kernel>
    /** Ends every process and the box; resolves once nothing of it is left. Idempotent. */
    close(): Promise<void>
    [Symbol.asyncDispose](): Promise<void>
  }

  interface Sandbox {
    machine(opts?: MachineOptions): Promise<Machine>
  }
}
