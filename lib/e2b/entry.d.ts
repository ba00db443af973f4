// Types of kern-sandbox/e2b: E2B's code-interpreter API (`@e2b/code-interpreter`), running
// locally on kern. Hand-kept; __test__/types/e2b-drift.test.js holds it to the runtime.

/// <reference types="node" />

import type { SandboxOptions as KernSandboxOptions, ChartTypes, EgressEvent } from '../../index.js'

/** E2B's chart enums and shapes: `Result.chart` of a matplotlib figure. */
export { ChartType, ScaleType } from '../../index.js'
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
} from '../../index.js'

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
  /** A matplotlib figure read as data (E2B's chart shape); narrow it on `type`. As in E2B, the
   * chart of an axes without a title has `title: null` (E2B declares `string` and gives null), a
   * superchart's title is the suptitle ("" when none), and a pie wedge's `angle` is rounded as E2B
   * rounds it (324 for a 90 % wedge). */
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

/** E2B's `allowOut`/`denyOut`: a list of hosts (`*.example.com`), IPs and CIDRs (each optionally
 * `:port`), or a callback returning one; `allTraffic` is `'0.0.0.0/0'`. */
export type SandboxNetworkSelector =
  string[] | ((ctx: { allTraffic: string; rules: Map<string, SandboxNetworkRule[]> }) => string[])

/** A rule for requests to one host: its headers are set by the host's proxy (HTTPS is terminated
 * for that host); the values never enter the sandbox. A rule never grants access. */
export interface SandboxNetworkRule {
  transform?: { headers?: Record<string, string> }
}

/** E2B's network options (`SandboxNetworkOpts`), as the sandbox's egress policy (docs/network.md). */
export interface SandboxNetworkOpts {
  /** Only these; with `denyOut: [allTraffic]` or `allowInternetAccess: false`, these still (the
   * all-traffic deny gives way to them). Absent: every public address. */
  allowOut?: SandboxNetworkSelector
  /** Refused addresses and ranges; `'0.0.0.0/0'` (E2B's allTraffic) closes everything not in allowOut. */
  denyOut?: SandboxNetworkSelector
  /** Per host (exact, or a leading wildcard), ordered rules. */
  rules?: Record<string, SandboxNetworkRule[]> | Map<string, SandboxNetworkRule[]>
  /** kern-sandbox's addition for offline tests: names resolved to chosen addresses (a named
   * private address is allowed). */
  hosts?: Record<string, string>
  /** kern-sandbox's addition: CA certificates (PEM) the proxy trusts upstream. */
  upstreamCa?: string | string[]
  /** Not supported (an InvalidArgumentError): traffic leaves through the host. */
  egressProxy?: never
  /** Inbound options: kept and returned by getInfo(). */
  allowPublicTraffic?: boolean
  maskRequestHost?: string
  httpsPorts?: number[]
}

/** What `updateNetwork` takes: the whole policy, replaced (what it leaves out is cleared). */
export interface SandboxNetworkUpdate {
  allowOut?: SandboxNetworkSelector
  denyOut?: SandboxNetworkSelector
  rules?: Record<string, SandboxNetworkRule[]> | Map<string, SandboxNetworkRule[]>
  hosts?: Record<string, string>
  upstreamCa?: string | string[]
  /** `false`: nothing but what allowOut lists. */
  allowInternetAccess?: boolean
}

/** `getInfo().network`: E2B's `SandboxNetworkInfo`; each header's value is shown as `***`. */
export interface SandboxNetworkInfo {
  allowOut?: string[]
  denyOut?: string[]
  rules?: Record<string, SandboxNetworkRule[]>
  allowPublicTraffic?: boolean
  maskRequestHost?: string
  httpsPorts?: number[]
}

/** One request the egress proxy saw (kern-sandbox's `onRequest`): no header values. */
export type SandboxEgressEvent = EgressEvent

export interface SandboxOpts {
  /** Environment variables of every cell and command. */
  envs?: Record<string, string>
  /** The sandbox's lifetime: it is killed (or paused, see `lifecycle`) this long after creation
   * (or the last setTimeout; a paused sandbox's clock stands still).
   * Default 300000 (5 minutes). */
  timeoutMs?: number
  /** Kept, and returned by getInfo(). */
  metadata?: Record<string, string>
  /** Public addresses for cells and commands, through the host's egress proxy. Default true, as
   * E2B's; `false` leaves only what `network.allowOut` lists. */
  allowInternetAccess?: boolean
  /** The egress policy (E2B's shape); see SandboxNetworkOpts. */
  network?: SandboxNetworkOpts
  /** kern-sandbox's addition: called for every request the sandbox's proxy sees. */
  onRequest?: (event: SandboxEgressEvent) => void
  /** What the end of the lifetime does (`onTimeout: 'pause'` pauses instead of killing), and
   * whether a call on a paused sandbox resumes it (`autoResume`). */
  lifecycle?: SandboxLifecycle
  /** kern-sandbox's own Sandbox options, e.g. `{ memoryMb: 1024, cpus: 2 }`, except those the
   * options above set (image, env, network, boxWorkspace). */
  kern?: Omit<KernSandboxOptions, 'image' | 'env' | 'network' | 'boxWorkspace'>
  /** Accepted for E2B compatibility and ignored (nothing is remote). */
  apiKey?: string
  requestTimeoutMs?: number
  [option: string]: unknown
}

/** What `getInfo()` and `Sandbox.list()` give of a sandbox. */
export interface SandboxInfo {
  sandboxId: string
  /** The image the sandbox runs. */
  templateId: string
  /** The template name it was created with (`code-interpreter-v1` by default). */
  name?: string
  metadata: Record<string, string>
  startedAt: Date
  /** When its lifetime ends (see `setTimeout`). */
  endAt: Date
  /** `paused` between `pause()` (or a lifetime that ends with `onTimeout: 'pause'`) and `connect()`. */
  state: 'running' | 'paused'
  /** What happens at the end of the lifetime, and whether a call wakes a paused sandbox. */
  lifecycle?: SandboxInfoLifecycle
  cpuCount: number
  /** Its memory cap in MiB (the host's memory where none is set). */
  memoryMB: number
  /** `kern-sandbox <version>` (E2B gives its in-sandbox daemon's version). */
  envdVersion: string
  /** Whether public addresses are open. */
  allowInternetAccess?: boolean
  /** The egress policy in force (absent on a build without egress policies for machines). */
  network?: SandboxNetworkInfo
  sandboxDomain?: string
}

/** What happens when a sandbox's lifetime ends: `kill` (the default) or `pause`. The object form's
 * `keepMemory` is accepted; memory is always kept here (a pause freezes the processes). */
export type SandboxOnTimeout = 'pause' | 'kill' | { action: 'pause'; keepMemory?: boolean } | { action: 'kill' }

export interface SandboxLifecycle {
  onTimeout: SandboxOnTimeout
  /** With `onTimeout: 'pause'`: a call on the paused sandbox (a command, a file call, code)
   * resumes it first, instead of failing. Default false. */
  autoResume?: boolean
}

export interface SandboxInfoLifecycle {
  onTimeout: 'pause' | 'kill'
  autoResume: boolean
}

/** `pause()`'s options. `keepMemory: false` is taken and memory is kept anyway. */
export interface SandboxPauseOpts {
  keepMemory?: boolean
  [option: string]: unknown
}

/** `fork()`'s options. */
export interface SandboxForkOpts {
  /** How many sandboxes. Default 1; an integer of at least 1. */
  count?: number
  /** The forks' lifetime. Default: 5 minutes. */
  timeoutMs?: number
  [option: string]: unknown
}

/** A snapshot in the package's snapshot store (see kern-sandbox's `Machine.snapshot`). */
export interface SnapshotInfo {
  /** Pass it to `Sandbox.create(snapshotId)`. */
  snapshotId: string
  /** Its name, if it was given one. */
  names: string[]
}

export interface CreateSnapshotOpts {
  /** 1-64 characters, no `/`, no NUL; `Sandbox.create(name)` finds it too. */
  name?: string
  [option: string]: unknown
}

export interface SnapshotListOpts {
  /** Those made by this sandbox of this process. */
  sandboxId?: string
  /** Those with this name. */
  name?: string
  /** Page size. Default: all in one page. */
  limit?: number
  nextToken?: string
  [option: string]: unknown
}

/** `Sandbox.listSnapshots()`: the store's snapshots, oldest first, page by page. */
export interface SnapshotPaginator {
  readonly hasNext: boolean
  readonly nextToken: string | undefined
  nextItems(): Promise<SnapshotInfo[]>
}

/** `connect()`'s options (`apiKey` and the other connection options are accepted and ignored). */
export interface SandboxConnectOpts {
  /** The lifetime from now, if that is later than the sandbox's end. */
  timeoutMs?: number
  /** E2B's debug mode: no API; here a sandbox under that id is started when none has it. */
  debug?: boolean
  [option: string]: unknown
}

/** `getMetrics()`'s time range. */
export interface SandboxMetricsOpts {
  /** Default: the sandbox's start. */
  start?: Date
  /** Default: now. */
  end?: Date
  [option: string]: unknown
}

/** One sample of the sandbox's resource use (`getMetrics()`). */
export interface SandboxMetrics {
  timestamp: Date
  cpuUsedPct: number
  cpuCount: number
  /** Memory the machine uses, bytes. */
  memUsed: number
  /** Its memory cap (the host's memory where none is enforced), bytes. */
  memTotal: number
  /** Not measured here: 0. */
  memCache: number
  /** What the machine wrote to its disk (or the workspace's filesystem use), bytes. */
  diskUsed: number
  /** The size of the workspace's filesystem, bytes. */
  diskTotal: number
}

export interface SandboxListOpts {
  /** Sandboxes whose metadata has these entries, and in these states. */
  query?: { metadata?: Record<string, string>; state?: Array<'running' | 'paused'> }
  /** Page size. Default: all in one page. */
  limit?: number
  [option: string]: unknown
}

/** `Sandbox.list()`: the live sandboxes of this process, page by page. */
export interface SandboxPaginator {
  readonly hasNext: boolean
  readonly nextToken: string | undefined
  /** The next page; throws when there is none (check `hasNext`). */
  nextItems(): Promise<SandboxInfo[]>
}

/** The type of a filesystem entry. */
export declare enum FileType {
  FILE = 'file',
  DIR = 'dir',
  SYMLINK = 'symlink',
}

/** What `write` gives back. */
export interface WriteInfo {
  name: string
  type?: FileType | `${FileType}`
  /** Absolute path in the sandbox. */
  path: string
  /** The file's metadata: its `user.e2b.*` extended attributes. */
  metadata?: Record<string, string>
}

/** A file or directory in the sandbox. */
export interface EntryInfo extends WriteInfo {
  size: number
  /** Permission bits (e.g. 0o644). */
  mode: number
  /** e.g. `-rw-r--r--`, `drwxr-xr-x`, `lrwxrwxrwx`. */
  permissions: string
  owner: string
  group: string
  modifiedTime?: Date
  /** For a symlink, where it points (as stored). */
  symlinkTarget?: string
}

export interface WriteEntry {
  path: string
  data: string | ArrayBuffer | ArrayBufferView | Blob | ReadableStream
}

/** Options every file call takes. `user` and `requestTimeoutMs` are accepted and ignored: file
 * calls run as root, locally. */
export interface FilesystemRequestOpts {
  /** Who owns what a write or makeDir creates (default `user`, where the host maps a uid range
   * into the box; else everything is root's: see docs/e2b.md). */
  user?: string
  requestTimeoutMs?: number
  signal?: AbortSignal
}

export interface FilesystemWriteOpts extends FilesystemRequestOpts {
  /** Kept on the file as `user.e2b.<key>` extended attributes (keys lowercased; header tokens,
   * printable ASCII values); a write without it clears them. */
  metadata?: Record<string, string>
  gzip?: boolean
  useOctetStream?: boolean
}

export interface FilesystemReadOpts extends FilesystemRequestOpts {
  gzip?: boolean
  streamIdleTimeoutMs?: number
}

export interface FilesystemListOpts extends FilesystemRequestOpts {
  /** Levels below `path` to list, from 1 (the default). */
  depth?: number
}

/** What happened to an entry in a watched directory. */
export declare enum FilesystemEventType {
  CHMOD = 'chmod',
  CREATE = 'create',
  REMOVE = 'remove',
  RENAME = 'rename',
  WRITE = 'write',
}

export interface FilesystemEvent {
  /** The entry's path relative to the watched directory. */
  name: string
  type: FilesystemEventType | `${FilesystemEventType}`
  /** With `includeEntry`: the entry, when it still exists. */
  entry?: EntryInfo
}

export interface WatchOpts extends FilesystemRequestOpts {
  /** How long the watch lasts, ms; 0 for as long as the sandbox. @default 60_000 */
  timeoutMs?: number
  /** Called once when the watch ends: with no error after `stop()` or the sandbox's kill, with a
   * TimeoutError at `timeoutMs`. */
  onExit?: (err?: Error) => void | Promise<void>
  /** Subdirectories too. */
  recursive?: boolean
  /** Each event carries the entry's EntryInfo (when it still exists). */
  includeEntry?: boolean
  allowNetworkMounts?: boolean
}

export interface WatchHandle {
  /** Stops watching; `onExit` is called. */
  stop(): Promise<void>
}

/** sandbox.files: the machine's whole filesystem. Absolute paths anywhere in the sandbox, relative
 * ones from /home/user. */
export interface Filesystem {
  read(path: string, opts?: FilesystemReadOpts & { format?: 'text' }): Promise<string>
  read(path: string, opts: FilesystemReadOpts & { format: 'bytes' }): Promise<Uint8Array>
  read(path: string, opts: FilesystemReadOpts & { format: 'blob' }): Promise<Blob>
  read(path: string, opts: FilesystemReadOpts & { format: 'stream' }): Promise<ReadableStream<Uint8Array>>
  /** Writes a file, creating its parents. */
  write(
    path: string,
    data: string | ArrayBuffer | ArrayBufferView | Blob | ReadableStream,
    opts?: FilesystemWriteOpts,
  ): Promise<WriteInfo>
  write(files: WriteEntry[], opts?: FilesystemWriteOpts): Promise<WriteInfo[]>
  writeFiles(files: WriteEntry[], opts?: FilesystemWriteOpts): Promise<WriteInfo[]>
  /** Entries below `path`, `depth` levels down. `depth` below 1 rejects with InvalidArgumentError. */
  list(path: string, opts?: FilesystemListOpts): Promise<EntryInfo[]>
  exists(path: string, opts?: FilesystemRequestOpts): Promise<boolean>
  /** The entry (a symlink itself); FileNotFoundError when nothing is there. */
  getInfo(path: string, opts?: FilesystemRequestOpts): Promise<EntryInfo>
  /** A file, symlink or directory tree; a missing path is fine. */
  remove(path: string, opts?: FilesystemRequestOpts): Promise<void>
  /** Creates a directory and its parents; false when it already existed. */
  makeDir(path: string, opts?: FilesystemRequestOpts): Promise<boolean>
  rename(oldPath: string, newPath: string, opts?: FilesystemRequestOpts): Promise<EntryInfo>
  watchDir(
    path: string,
    onEvent: (event: FilesystemEvent) => void | Promise<void>,
    opts?: WatchOpts,
  ): Promise<WatchHandle>
}

export interface CommandResult {
  stdout: string
  stderr: string
  exitCode: number
  error?: string
}

export interface CommandRequestOpts {
  /** Accepted and ignored (calls are local). */
  requestTimeoutMs?: number
  signal?: AbortSignal
}

export interface CommandStartOpts extends CommandRequestOpts {
  /** Resolve at once to a CommandHandle. */
  background?: boolean
  /** Working directory; a relative one is from the user's home. @default the user's home */
  cwd?: string
  /** `user` (the default: uid 1000 where the image and host allow it, else root with HOME
   * /home/user) or `root` (home /root). */
  user?: string
  envs?: Record<string, string>
  onStdout?: (data: string) => void | Promise<void>
  onStderr?: (data: string) => void | Promise<void>
  /** Keep stdin open for `sendStdin`/`closeStdin`. @default false (stdin at EOF) */
  stdin?: boolean
  /** ms; 0 for none. Past it the command is killed and the call (or `wait()`) rejects with
   * TimeoutError. @default 60_000 */
  timeoutMs?: number
}

export interface CommandConnectOpts extends CommandRequestOpts {
  onStdout?: (data: string) => void | Promise<void>
  onStderr?: (data: string) => void | Promise<void>
  timeoutMs?: number
}

/** A running command or PTY of the sandbox. */
export interface ProcessInfo {
  pid: number
  tag?: string
  cmd: string
  args: string[]
  /** The envs it was started with (empty for processes this sandbox did not start). */
  envs: Record<string, string>
  cwd?: string
}

/** A running command (or PTY): its output so far, its end, stdin and kill. */
export interface CommandHandle {
  readonly pid: number
  /** undefined while it runs. */
  readonly exitCode: number | undefined
  readonly error: string | undefined
  /** What it printed so far; all of it once it ended. Empty for a PTY (its output goes to onData). */
  readonly stdout: string
  readonly stderr: string
  /** Its result once it exits; CommandExitError on a non-zero exit, TimeoutError past its timeoutMs. */
  wait(): Promise<CommandResult>
  /** Stops the callbacks; the command runs on (reach it again with `connect`). */
  disconnect(): Promise<void>
  /** SIGKILL; false when it had already ended. */
  kill(): Promise<boolean>
  sendStdin(data: string | Uint8Array, opts?: CommandRequestOpts): Promise<void>
  closeStdin(opts?: CommandRequestOpts): Promise<void>
}

/** sandbox.commands: processes of the sandbox's machine, run by `/bin/bash -l -c` (`/bin/sh -c`
 * in an image without bash). */
export interface Commands {
  run(cmd: string, opts?: CommandStartOpts & { background?: false }): Promise<CommandResult>
  run(cmd: string, opts: CommandStartOpts & { background: true }): Promise<CommandHandle>
  run(cmd: string, opts?: CommandStartOpts): Promise<CommandHandle | CommandResult>
  /** Running commands and PTYs. */
  list(opts?: CommandRequestOpts): Promise<ProcessInfo[]>
  /** SIGKILL; false for a pid that is gone. */
  kill(pid: number, opts?: CommandRequestOpts): Promise<boolean>
  sendStdin(pid: number, data: string | Uint8Array, opts?: CommandRequestOpts): Promise<void>
  closeStdin(pid: number, opts?: CommandRequestOpts): Promise<void>
  /** A handle on a running command: output from now on. NotFoundError for an unknown pid. */
  connect(pid: number, opts?: CommandConnectOpts): Promise<CommandHandle>
}

export interface PtyCreateOpts extends CommandRequestOpts {
  cols: number
  rows: number
  onData: (data: Uint8Array) => void | Promise<void>
  /** ms; 0 for none. @default 60_000 */
  timeoutMs?: number
  user?: string
  envs?: Record<string, string>
  cwd?: string
}

/** sandbox.pty: login shells on pseudo-terminals (TERM=xterm-256color). */
export interface Pty {
  create(opts: PtyCreateOpts): Promise<CommandHandle>
  connect(
    pid: number,
    opts?: { onData?: (data: Uint8Array) => void | Promise<void>; timeoutMs?: number } & CommandRequestOpts,
  ): Promise<CommandHandle>
  sendInput(pid: number, data: Uint8Array, opts?: CommandRequestOpts): Promise<void>
  resize(pid: number, size: { cols: number; rows: number }, opts?: CommandRequestOpts): Promise<void>
  /** SIGKILL; false for a pid that is gone. */
  kill(pid: number, opts?: CommandRequestOpts): Promise<boolean>
}

/** Options of every sandbox.git call: how its git commands run (as for `commands.run`). */
export interface GitRequestOpts extends CommandRequestOpts {
  envs?: Record<string, string>
  /** `user` (the default) or `root`: whose ~/.gitconfig and ~/.git-credentials are used. */
  user?: string
  /** Where a relative repository path starts. @default the user's home */
  cwd?: string
  /** ms per git command; 0 for none. @default 60_000 */
  timeoutMs?: number
}

export interface GitCloneOpts extends GitRequestOpts {
  /** Where to clone to. @default the directory git names after the URL */
  path?: string
  /** Check out this branch only (`--branch X --single-branch`). */
  branch?: string
  /** Shallow clone of this many commits. */
  depth?: number
  /** HTTP(S) username; with `password`, sent for this clone only (never on a command line). */
  username?: string
  password?: string
  /** Keep `username`/`password` for later fetches and pushes. Here they go to the clone's
   * `.git/credentials` (plain text, named by its local `credential.helper`), not, as in E2B, into
   * the remote URL. @default false */
  dangerouslyStoreCredentials?: boolean
}

export interface GitInitOpts extends GitRequestOpts {
  bare?: boolean
  /** Name of the first branch (`--initial-branch`). */
  initialBranch?: string
}

export interface GitRemoteAddOpts extends GitRequestOpts {
  /** Fetch the remote once added. */
  fetch?: boolean
  /** Give an existing remote of that name the new URL instead of failing. */
  overwrite?: boolean
}

export interface GitCommitOpts extends GitRequestOpts {
  /** Author (and committer) for this commit, over the configured `user.name`/`user.email`. */
  authorName?: string
  authorEmail?: string
  allowEmpty?: boolean
}

export interface GitAddOpts extends GitRequestOpts {
  /** Paths to stage. @default every change */
  files?: string[]
  /** With no `files`: `true` stages every change (`-A`), `false` the current directory's (`.`).
   * @default true */
  all?: boolean
}

export type GitResetMode = 'soft' | 'mixed' | 'hard' | 'merge' | 'keep'

export interface GitResetOpts extends GitRequestOpts {
  mode?: GitResetMode
  /** Commit, branch or ref to reset to. @default HEAD */
  target?: string
  paths?: string[]
}

export interface GitRestoreOpts extends GitRequestOpts {
  /** Paths to restore (`['.']` for all). */
  paths: string[]
  /** Restore the index (unstage). Alone, only the index. */
  staged?: boolean
  /** Restore the working tree. @default true unless only `staged` is given */
  worktree?: boolean
  /** Restore from this commit, branch or ref. */
  source?: string
}

export interface GitDeleteBranchOpts extends GitRequestOpts {
  /** `-D`: delete even if not merged. */
  force?: boolean
}

export interface GitPushOpts extends GitRequestOpts {
  remote?: string
  branch?: string
  /** With `remote`, track the pushed branch (`--set-upstream`). @default true */
  setUpstream?: boolean
  /** HTTP(S) credentials for this push only (never on a command line, never stored). */
  username?: string
  password?: string
}

export interface GitPullOpts extends GitRequestOpts {
  remote?: string
  branch?: string
  /** HTTP(S) credentials for this pull only (never on a command line, never stored). */
  username?: string
  password?: string
}

export type GitConfigScope = 'global' | 'local' | 'system'

export interface GitConfigOpts extends GitRequestOpts {
  /** @default 'global' (the user's ~/.gitconfig) */
  scope?: GitConfigScope
  /** The repository, for `scope: 'local'`. */
  path?: string
}

export interface GitDangerouslyAuthenticateOpts extends GitRequestOpts {
  username: string
  password: string
  /** @default 'github.com' */
  host?: string
  /** @default 'https' */
  protocol?: string
}

export type GitStatusLabel =
  'conflict' | 'renamed' | 'copied' | 'deleted' | 'added' | 'modified' | 'typechange' | 'untracked' | 'unknown'

/** One changed path of `status()`. */
export interface GitFileStatus {
  /** Path from the repository root (the new one for a rename). */
  name: string
  status: GitStatusLabel
  /** Porcelain X (index) and Y (working tree) letters. */
  indexStatus: string
  workingTreeStatus: string
  /** Whether the index holds a change of it. */
  staged: boolean
  renamedFrom?: string
}

export interface GitStatus {
  currentBranch?: string
  /** Such as `origin/main`. */
  upstream?: string
  ahead: number
  behind: number
  detached: boolean
  fileStatus: GitFileStatus[]
  isClean: boolean
  hasChanges: boolean
  hasStaged: boolean
  hasUntracked: boolean
  hasConflicts: boolean
  totalCount: number
  stagedCount: number
  /** Changed paths not staged, untracked ones included (as E2B counts). */
  unstagedCount: number
  untrackedCount: number
  conflictCount: number
}

export interface GitBranches {
  /** Local branches. */
  branches: string[]
  /** undefined on a detached HEAD. */
  currentBranch?: string
}

/** sandbox.git: git commands in the sandbox's machine, through `commands.run` (results are its
 * CommandResult; a failing git rejects with CommandExitError). A path is the repository's, relative
 * to `opts.cwd` or the user's home. Credentials never appear on a command line: see docs/e2b.md. */
export interface Git {
  /** GitAuthError when the remote wants credentials it did not get or refused them. */
  clone(url: string, opts?: GitCloneOpts): Promise<CommandResult>
  init(path: string, opts?: GitInitOpts): Promise<CommandResult>
  remoteAdd(path: string, name: string, url: string, opts?: GitRemoteAddOpts): Promise<CommandResult>
  /** undefined when the repository has no such remote. */
  remoteGet(path: string, name: string, opts?: GitRequestOpts): Promise<string | undefined>
  status(path: string, opts?: GitRequestOpts): Promise<GitStatus>
  branches(path: string, opts?: GitRequestOpts): Promise<GitBranches>
  /** Creates the branch at HEAD and checks it out. */
  createBranch(path: string, branch: string, opts?: GitRequestOpts): Promise<CommandResult>
  checkoutBranch(path: string, branch: string, opts?: GitRequestOpts): Promise<CommandResult>
  deleteBranch(path: string, branch: string, opts?: GitDeleteBranchOpts): Promise<CommandResult>
  add(path: string, opts?: GitAddOpts): Promise<CommandResult>
  commit(path: string, message: string, opts?: GitCommitOpts): Promise<CommandResult>
  reset(path: string, opts?: GitResetOpts): Promise<CommandResult>
  restore(path: string, opts: GitRestoreOpts): Promise<CommandResult>
  /** GitUpstreamError when the branch has no upstream and no remote is given; GitAuthError for
   * refused credentials. */
  push(path: string, opts?: GitPushOpts): Promise<CommandResult>
  /** GitUpstreamError when the branch has no upstream and neither remote nor branch is given. */
  pull(path: string, opts?: GitPullOpts): Promise<CommandResult>
  setConfig(key: string, value: string, opts?: GitConfigOpts): Promise<CommandResult>
  /** undefined when the key is not set in that scope. */
  getConfig(key: string, opts?: GitConfigOpts): Promise<string | undefined>
  /** Stores the credentials for `protocol://host` in the user's ~/.git-credentials (plain text)
   * and makes `store` the global credential helper, as E2B does. */
  dangerouslyAuthenticate(opts: GitDangerouslyAuthenticateOpts): Promise<CommandResult>
  /** Sets user.name and user.email (global scope by default). */
  configureUser(name: string, email: string, opts?: GitConfigOpts): Promise<CommandResult>
}

/** E2B's sandbox, local: one machine (a persistent kern box) whose processes, /tmp, loopback and
 * files its commands, PTYs, file calls and code contexts share; the workspace at /home/user. */
export class Sandbox {
  private constructor()
  readonly sandboxId: string
  /** `127.0.0.1`: hosts from `getHost()` are on this machine's loopback. */
  readonly sandboxDomain: string
  readonly metadata: Record<string, string>
  readonly files: Filesystem
  readonly commands: Commands
  readonly pty: Pty
  readonly git: Git
  static create(opts?: SandboxOpts): Promise<Sandbox>
  static create(template: string, opts?: SandboxOpts): Promise<Sandbox>
  /** The live sandbox of this process with that id; SandboxNotFoundError when there is none.
   * `timeoutMs` extends its lifetime (never shortens it); `debug: true` (E2B's debug mode) starts
   * a sandbox under that id when none has it. */
  static connect(sandboxId: string, opts?: SandboxConnectOpts): Promise<Sandbox>
  /** getInfo() of the live sandbox with that id. */
  static getInfo(sandboxId: string, opts?: Record<string, unknown>): Promise<SandboxInfo>
  /** getMetrics() of the live sandbox with that id. */
  static getMetrics(sandboxId: string, opts?: SandboxMetricsOpts): Promise<SandboxMetrics[]>
  /** setTimeout() of the live sandbox with that id. */
  static setTimeout(sandboxId: string, timeoutMs: number, opts?: Record<string, unknown>): Promise<void>
  /** Kills the live sandbox of this process with that id; false when there is none. */
  static kill(sandboxId: string, opts?: Record<string, unknown>): Promise<boolean>
  /** updateNetwork() of the live sandbox with that id. */
  static updateNetwork(sandboxId: string, network: SandboxNetworkUpdate, opts?: Record<string, unknown>): Promise<void>
  /** The live sandboxes of this process. */
  static list(opts?: SandboxListOpts): SandboxPaginator
  /** fork() of the live sandbox with that id (InvalidArgumentError for a bad `count` first). */
  static fork(sandboxId: string, opts?: SandboxForkOpts): Promise<Sandbox[]>
  /** pause() of the live sandbox with that id. */
  static pause(sandboxId: string, opts?: SandboxPauseOpts): Promise<boolean>
  static betaPause(sandboxId: string, opts?: SandboxPauseOpts): Promise<boolean>
  /** createSnapshot() of the live sandbox with that id. */
  static createSnapshot(sandboxId: string, opts?: CreateSnapshotOpts): Promise<SnapshotInfo>
  /** The snapshots in the store (`kern.snapshotDir`, else the default store). */
  static listSnapshots(opts?: SnapshotListOpts & { kern?: { snapshotDir?: string } }): SnapshotPaginator
  /** Removes a snapshot from the store; false when there is none. */
  static deleteSnapshot(snapshotId: string, opts?: Record<string, unknown>): Promise<boolean>
  /** `count` new sandboxes whose filesystem (the root and /home/user) starts as a copy of this
   * one's now, each its own copy; processes and memory are NOT copied (they start fresh). This
   * sandbox keeps running. A killed sandbox: SandboxNotFoundError. */
  fork(opts?: SandboxForkOpts): Promise<Sandbox[]>
  /** Freezes the sandbox (its processes keep their memory, use no CPU; ports answer nothing; the
   * lifetime stops counting) until `connect()`. Calls meanwhile fail with a SandboxError, unless
   * `lifecycle.autoResume`. False when it was paused already. */
  pause(opts?: SandboxPauseOpts): Promise<boolean>
  betaPause(opts?: SandboxPauseOpts): Promise<boolean>
  /** A persistent snapshot of the filesystem (no processes, no memory) that
   * `Sandbox.create(snapshotId)` starts sandboxes on. */
  createSnapshot(opts?: CreateSnapshotOpts): Promise<SnapshotInfo>
  /** The snapshots this sandbox made. */
  listSnapshots(opts?: Omit<SnapshotListOpts, 'sandboxId'>): SnapshotPaginator
  /** This sandbox, resumed if paused (its lifetime then starts again: `timeoutMs`, default 5
   * minutes); on a running one `timeoutMs` extends its lifetime, never shortens it. */
  connect(opts?: SandboxConnectOpts): Promise<this>
  runCode(code: string, opts?: RunCodeOpts): Promise<Execution>
  createCodeContext(opts?: CreateCodeContextOpts): Promise<Context>
  listCodeContexts(): Promise<Context[]>
  restartCodeContext(context: Context | string): Promise<void>
  removeCodeContext(context: Context | string): Promise<void>
  /** `127.0.0.1:<host port>` reaching `port` in the sandbox, over plain HTTP/TCP (E2B's hosts are
   * HTTPS): `http://${sbx.getHost(3000)}`. */
  getHost(port: number): string
  /** One sample of the machine's resource use. */
  /** A sample taken now joins those earlier calls took; those from `start` to `end` are given. */
  getMetrics(opts?: SandboxMetricsOpts): Promise<SandboxMetrics[]>
  setTimeout(timeoutMs: number, opts?: Record<string, unknown>): Promise<void>
  isRunning(opts?: Record<string, unknown>): Promise<boolean>
  getInfo(opts?: Record<string, unknown>): Promise<SandboxInfo>
  /** Replaces the egress policy of the running sandbox; nothing in it restarts. */
  updateNetwork(network: SandboxNetworkUpdate, opts?: Record<string, unknown>): Promise<void>
  /** Ends the sandbox (its machine, processes and kernels); true, or false when it had ended. */
  kill(opts?: Record<string, unknown>): Promise<boolean>
  [Symbol.asyncDispose](): Promise<void>
}

export class SandboxError extends Error {
  /** The core's error code (see kern-sandbox's SandboxErrorCode) when the error came from the
   * core: match on it, never on the message. */
  code?: string
}
/** A cell's, command's or watch's timeoutMs passed, or the sandbox was killed mid-request. */
export class TimeoutError extends SandboxError {}
export class InvalidArgumentError extends SandboxError {}
/** The machine's disk is full. */
export class NotEnoughSpaceError extends SandboxError {}
/** Something that does not exist: a context, a process; see its two subclasses. */
export class NotFoundError extends SandboxError {}
/** A file or directory that does not exist in the sandbox. */
export class FileNotFoundError extends NotFoundError {}
/** A sandbox id no live sandbox of this process has. */
export class SandboxNotFoundError extends NotFoundError {}
/** Credentials refused (not a SandboxError, as in E2B). */
export class AuthenticationError extends Error {}
/** A git remote wanted credentials it did not get, or refused them (clone, push, pull). */
export class GitAuthError extends AuthenticationError {}
/** A git push or pull had no upstream branch to go to and none was named. */
export class GitUpstreamError extends SandboxError {}
/** A command exited non-zero. */
export class CommandExitError extends SandboxError implements CommandResult {
  readonly stdout: string
  readonly stderr: string
  readonly exitCode: number
  readonly error?: string
}
