// Type definitions for kern-sandbox 0.2
// Run LLM/agent-generated code in a fast, local, daemonless kernel sandbox (kern), from Node.
//
// This file is the public contract and its reference documentation, kept by hand: the 0.1.1
// declarations unchanged, plus what 0.2 adds (per-call options, cancellation, hardening options,
// `oom`, explicit resource management) and 0.1.23's rich results and warm kernel (`Result`,
// `Kernel`, `Sandbox.kernel()`). The doc comments here are the API's one description (the README
// and docs/ are its guide); lib/*.js comments say how it is implemented. An option's `@default` is
// the native core's (src/options.rs); __test__/validation.test.js checks each against it and the
// README's table. __test__/types/drift.test.js fails when this file and the runtime exports disagree.
// Needs @types/node (Buffer, AbortSignal, Symbol.asyncDispose), as 0.1.1 did. Referenced explicitly:
// TypeScript 6 no longer loads installed @types packages unless tsconfig lists them, and without
// this line a project with @types/node installed would still fail on `Buffer`.

/// <reference types="node" />

/** What stopped the code at the SANDBOX level. Reported as data on a result, never thrown.
 * - `timeout`: the call exceeded `timeoutS`; the binding tore the box down.
 * - `escape_blocked`: a syscall was blocked by the seccomp filter (SIGSYS).
 * - `killed`: the box was SIGKILLed and kern cannot say it was its memory cap (the message says why).
 * - `oom`: the box was SIGKILLed while kern reported its memory cap as enforced: out of memory.
 * - `startup_failed`: kern could not start the box (bad image, pull error, `requireLimits` refusal, ...). */
export type SandboxFaultType = 'timeout' | 'escape_blocked' | 'killed' | 'oom' | 'startup_failed'

/** A sandbox event on a result: the type, and a human-readable message saying what happened. */
export interface SandboxFault {
  type: SandboxFaultType
  message: string
  /** On a `startup_failed` fault whose cause the host's facts name (the same facts `doctor()`
   * reads, read once per session after its first failed start): that cause. The message then
   * says the cause and its fix for this host, then kern's own text. Absent otherwise. */
  code?: SandboxFaultCode
}

/** Why a box could not start, where it can be named. Stable: branch on it, not on the message.
 * - `userns_disabled`: unprivileged user namespaces are off (`kernel.unprivileged_userns_clone`,
 *   `user.max_user_namespaces`).
 * - `userns_restricted`: AppArmor restricts them (`kernel.apparmor_restrict_unprivileged_userns`).
 * - `seccomp_blocked`: a seccomp filter on this process (a container engine's default profile)
 *   refuses kern's namespace and mount calls.
 * - `proc_masked`: `/proc` is masked (a container's default), so no fresh procfs can be mounted.
 * - `apparmor_blocked`: the AppArmor profile confining this process denies kern's mounts. */
export type SandboxFaultCode =
  'userns_disabled' | 'userns_restricted' | 'seccomp_blocked' | 'proc_masked' | 'apparmor_blocked'

/** A file in the workspace and how a step touched it. */
export interface FileInfo {
  /** workspace-relative path */
  path: string
  size: number
  change: 'created' | 'modified'
}

/** A rich, MIME-typed value a Python, JavaScript or TypeScript cell produced: its trailing
 * expression, each object passed to `display()`, or (Python) a matplotlib figure still open when
 * the cell ended. One value, several
 * forms: `data` maps a MIME type to its payload (text and JSON as strings, images base64). */
export class Result {
  /** MIME type -> payload: text/* and application/json as strings, image/png and image/jpeg base64. */
  data: Record<string, string>
  /** True only for the value of the cell's trailing expression (not display() or figures). */
  isMainResult: boolean
  /** The cell's number in its kernel (1, 2, 3, ...); null for a one-shot runCode. */
  executionCount: number | null
  /** text/plain (repr()) */
  readonly text?: string
  /** text/html */
  readonly html?: string
  /** text/markdown */
  readonly markdown?: string
  /** image/svg+xml */
  readonly svg?: string
  /** application/json, as JSON text */
  readonly json?: string
  /** text/latex */
  readonly latex?: string
  /** application/javascript */
  readonly javascript?: string
  /** image/png decoded to a Buffer, or null */
  readonly png: Buffer | null
  /** image/jpeg decoded to a Buffer, or null */
  readonly jpeg: Buffer | null
  /** A matplotlib figure read as data (E2B's chart shape): present on the Result of each figure
   * (the end-of-cell capture, `display(fig)`, a figure as the trailing expression), undefined on
   * other Results and when the figure could not be read. Holds no image: the PNG is `png`. */
  chart?: ChartTypes
  /** The MIME types this value was captured as. */
  formats(): string[]
  /** `{ data, isMainResult, executionCount }` (and `chart` when there is one), for logging and
   * JSON.stringify. */
  toJSON(): { data: Record<string, string>; isMainResult: boolean; executionCount: number | null; chart?: ChartTypes }
}

/** What a chart is (`Result.chart.type`). `unknown`: an axes that is none of the others (an
 * image, several kinds of artist mixed), still with its title. */
export enum ChartType {
  LINE = 'line',
  SCATTER = 'scatter',
  BAR = 'bar',
  PIE = 'pie',
  BOX_AND_WHISKER = 'box_and_whisker',
  SUPERCHART = 'superchart',
  UNKNOWN = 'unknown',
}

/** How an axis maps values to positions: matplotlib's scale, or `datetime`/`categorical` for a
 * linear axis of dates or of category names. */
export enum ScaleType {
  LINEAR = 'linear',
  DATETIME = 'datetime',
  CATEGORICAL = 'categorical',
  LOG = 'log',
  SYMLOG = 'symlog',
  LOGIT = 'logit',
  FUNCTION = 'function',
  FUNCTIONLOG = 'functionlog',
  ASINH = 'asinh',
}

/** What every chart has. `title`: the axes' (centred) title, null when it has none, as in E2B; a
 * superchart's is the figure's suptitle, "" when it has none. */
export interface Chart {
  type: ChartType
  title: string | null
  elements: unknown[]
}

/** A chart on x and y axes. A unit is a label's trailing parenthesis: "Time (s)" gives "s". */
export interface Chart2D extends Chart {
  x_label: string | null
  y_label: string | null
  x_unit: string | null
  y_unit: string | null
}

/** One line or scatter series. A value on a datetime axis is an ISO string, on a categorical one
 * the category's name. Non-finite points are left out; past 10,000 points the series is
 * down-sampled evenly and `truncated` is true. */
export interface PointData {
  label: string
  points: [number | string, number | string][]
  truncated?: true
}

/** Line and scatter charts: their series, and both axes' major ticks in view, tick labels (as
 * shown) and scale. */
export interface PointChart extends Chart2D {
  x_ticks: (number | string)[]
  x_tick_labels: string[]
  x_scale: ScaleType
  y_ticks: (number | string)[]
  y_tick_labels: string[]
  y_scale: ScaleType
  elements: PointData[]
}

export interface LineChart extends PointChart {
  type: ChartType.LINE
}

export interface ScatterChart extends PointChart {
  type: ChartType.SCATTER
}

/** One bar: `label` its category (tick label), `group` the label of its bar container (a series
 * of grouped or stacked bars; "Group <n>" when it has none). */
export interface BarData {
  label: string
  value: number
  group: string
}

/** Vertical or horizontal bars, grouped or stacked, and histograms. */
export interface BarChart extends Chart2D {
  type: ChartType.BAR
  elements: BarData[]
}

/** One wedge: its angle in degrees, rounded as E2B rounds it (to 8 - e significant digits, e its
 * decimal exponent: 324 for a 90 % wedge, not matplotlib's single-precision 323.99999), and its
 * radius. */
export interface PieData {
  label: string
  angle: number
  radius: number
}

export interface PieChart extends Chart {
  type: ChartType.PIE
  elements: PieData[]
}

/** One box: `min` and `max` are the whiskers' ends; `outliers` the points beyond them. */
export interface BoxAndWhiskerData {
  label: string
  min: number
  first_quartile: number
  median: number
  third_quartile: number
  max: number
  outliers: number[]
}

export interface BoxAndWhiskerChart extends Chart2D {
  type: ChartType.BOX_AND_WHISKER
  elements: BoxAndWhiskerData[]
}

/** A figure with several axes: the chart of each, in the figure's order. */
export interface SuperChart extends Chart {
  type: ChartType.SUPERCHART
  title: string
  elements: Exclude<ChartTypes, SuperChart>[]
}

/** An axes that is none of the kinds above; only its title is read. */
export interface UnknownChart extends Chart {
  type: ChartType.UNKNOWN
  elements: []
}

/** `Result.chart`: narrow it on `type`. */
export type ChartTypes = LineChart | ScatterChart | BarChart | PieChart | BoxAndWhiskerChart | SuperChart | UnknownChart

/** An uncaught exception of a Python, JavaScript or TypeScript cell (the shape E2B uses); a
 * JavaScript cell that does not parse gives its `SyntaxError` here too. stderr still shows the same
 * traceback. */
export interface ExecutionError {
  /** The exception's class name, e.g. "ValueError". */
  name: string
  /** str() of the exception. */
  value: string
  /** The formatted traceback or stack, from the user's code on (no frame of the runner). */
  traceback: string
}

/** The outcome of one runCode()/run(). `fault` is the source of truth for "did the sandbox act";
 * `exitCode`/`stdout` are what the user's code did. `success` requires both clean. */
export class ExecutionResult {
  stdout: string
  /** The workload's stderr. kern's own notes about the host (printed before the workload starts)
   * are not in it: each is reported once per process as a `KernWarning` process warning. */
  stderr: string
  exitCode: number
  durationMs: number
  /** null iff the sandbox did nothing: any non-zero exit is then the user's code, not a sandbox fault. */
  fault: SandboxFault | null
  /** Files created/modified in the workspace by this call (`[]` with `trackFiles: false`). */
  files: FileInfo[]
  /** stdout/stderr hit the capture cap and overflow was discarded. */
  truncated: boolean
  /** Rich values of Python, JavaScript and TypeScript code, in the order produced: display()
   * calls, the trailing expression, then (Python) open matplotlib figures. Always an array; `[]`
   * for bash and run(). */
  results: Result[]
  /** The uncaught exception of this call's Python, JavaScript or TypeScript code, or null. */
  error: ExecutionError | null
  /** A kernel cell's number (1, 2, 3, ...); absent on one-shot calls. */
  executionCount?: number
  /** True iff the code exited 0 AND no sandbox fault fired. */
  readonly success: boolean
}

/** A PROGRAMMER/config error, THROWN: bad argument, illegal mount, or `kern` not installed.
 * What the sandbox does to a workload (timeout, blocked syscall, kill) is never thrown: it is
 * `fault` on the result. */
export class SandboxError extends Error {
  /** Which error this is, stable across releases: match on it, never on the message (messages
   * may be reworded). `"ERR_SANDBOX"` unless one of the more precise codes applies. */
  code: SandboxErrorCode
}
/** The codes a SandboxError carries. More may be added in minor releases; treat an unknown one as
 * `"ERR_SANDBOX"`. */
export type SandboxErrorCode =
  /** Anything not told apart below: failed I/O, a failed setup, an internal error. */
  | 'ERR_SANDBOX'
  /** A host mount or the workspace was refused as unsafe (a MountRefused). */
  | 'ERR_MOUNT_REFUSED'
  /** A workspace path that does not exist. */
  | 'ERR_NOT_FOUND'
  /** A workspace path that leads outside the workspace. */
  | 'ERR_PATH_ESCAPES'
  /** A file or archive over the size limit the call was given (readFile's maxBytes, snapshot's,
   * restore's). */
  | 'ERR_TOO_LARGE'
  /** An option or argument the binding does not accept. */
  | 'ERR_INVALID_OPTION'
  /** A language name the call does not run. */
  | 'ERR_UNSUPPORTED_LANGUAGE'
  /** A JavaScript/TypeScript kernel in an image with no node on PATH. */
  | 'ERR_NO_NODE'
  /** No kern binary on PATH or at $KERN_BIN. */
  | 'ERR_NO_KERN'
  /** A call that needs an open sandbox before open(). */
  | 'ERR_NOT_OPEN'
  /** The sandbox was closed while the call ran. */
  | 'ERR_CLOSED'
  /** The kernel is closed or went away under the cell; start a new one. */
  | 'ERR_KERNEL_GONE'
  /** A machine path is not a directory where one is needed. */
  | 'ERR_NOT_A_DIRECTORY'
  /** A machine path is a directory where a file is needed. */
  | 'ERR_IS_A_DIRECTORY'
  /** Something is already at a machine path. */
  | 'ERR_EXISTS'
  /** The machine refused the access (file modes, its user). */
  | 'ERR_PERMISSION_DENIED'
  /** The machine's filesystem is full. */
  | 'ERR_NO_SPACE'
  /** No process of that pid was started through this machine. */
  | 'ERR_PROCESS_NOT_FOUND'
  /** The process has exited. */
  | 'ERR_PROCESS_EXITED'
  /** The process's stdin is closed, or was never open (`spawn` without `stdin: true`). */
  | 'ERR_STDIN_CLOSED'
  /** Nothing listens on that port in the machine. */
  | 'ERR_CONNECTION_REFUSED'
  /** The machine is closed, or its box died. */
  | 'ERR_MACHINE_GONE'
  /** A network (egress) policy entry is malformed; the message names the entry, never a header value. */
  | 'ERR_BAD_NETWORK_POLICY'
  /** `machine.updateNetwork()` on a machine opened with `network: false` or `true`: it has no egress
   * proxy to update (open it with a policy object, e.g. `{ denyOut: ['0.0.0.0/0'] }` for "off for now"). */
  | 'ERR_NETWORK_FIXED'
  /** A call on a paused machine (or on a kernel in one): `machine.resume()` it first. */
  | 'ERR_MACHINE_PAUSED'
  /** No machine snapshot has that id or name in the store (`sbx.machine({ from })`, `delete()`). */
  | 'ERR_SNAPSHOT_NOT_FOUND'
  | (string & {})
/** An egress policy: the object form of `network` (E2B's `SandboxNetworkOpts` shape, plus `hosts`
 * and `upstreamCa`). Checked once; a bad entry is `ERR_BAD_NETWORK_POLICY` naming it. Private,
 * loopback, link-local and metadata addresses are refused unless named here. See docs/network.md. */
export interface NetworkPolicy {
  /** What a box may reach: exact names (`api.example.com`), leading wildcards (`*.example.com`,
   * never the name itself), IP addresses and CIDRs, each optionally `:port` (`[v6]:port`).
   * Absent: every public address. */
  allowOut?: string[]
  /** IP addresses and CIDRs refused even when allowOut allows them (a deny wins); `0.0.0.0/0`
   * refuses everything allowOut does not name. */
  denyOut?: string[]
  /** Per host (name, `*.` wildcard, IP or CIDR): ordered rules whose `transform.headers` the proxy
   * sets on that host's HTTP and HTTPS requests (HTTPS is terminated for such hosts, with a
   * per-proxy CA the box trusts). Exact host beats the longest wildcard. Rules never grant access.
   * The values stay on the host: never in the box, an event, a log or an error message. */
  rules?: Record<string, Array<{ transform?: { headers?: Record<string, string> } }>>
  /** Names resolved to chosen addresses (offline tests); an address named here is allowed even if
   * private. */
  hosts?: Record<string, string>
  /** PEM CA certificates the proxy trusts upstream besides the host's system roots. */
  upstreamCa?: string | string[]
}

/** One request through an egress proxy, as `onRequest` hears it. No header values, ever. */
export interface EgressEvent {
  host: string
  port: number
  /** `CONNECT` for a tunnel; the request's method for plain HTTP and terminated HTTPS. */
  method: string
  /** The request target of a plain HTTP or terminated request; absent for a tunnel. */
  path?: string
  allowed: boolean
  /** `tunnelled`, `terminated`, `forwarded`, or why it was refused or failed. */
  reason: string
  /** Bytes relayed both ways; 0 for a refusal. */
  bytes: number
}

/** A requested host mount was refused as unsafe (sensitive source, or a relative/escaping path). */
export class MountRefused extends SandboxError {}

/** A mount's box target, or `[target, mode]` to choose read-only or read-write. */
export type MountSpec = string | [target: string, mode: 'ro' | 'rw']

/** A live-output callback: called with each chunk as it arrives. Best-effort, not lossless (a slow
 * callback drops chunks rather than stall the box); what it throws or rejects with is ignored. */
export type ChunkCallback = (chunk: Buffer) => void

export interface SandboxOptions {
  /** OCI image the box runs from.
   * @default "python:3.12-slim" */
  image?: string
  /** Shell command run ONCE at open() in a NETWORK-ENABLED setup box (e.g. "pip install pandas"). */
  setup?: string
  /** Host dir to persist as the workspace. Omit -> a temp dir, created on open() and deleted on close(). */
  workspace?: string
  /** RAM cap in MiB (kern --memory). null = uncapped.
   * @default 512 */
  memoryMb?: number | null
  /** CPU cap in cores (kern --cpus). null or absent (default) = uncapped. */
  cpus?: number | null
  /** Task/fork-bomb ceiling (kern --pids-limit). null = uncapped.
   * @default 256 */
  pids?: number | null
  /** MANDATORY per-call wall-clock limit in seconds. The binding owns this deadline. A call can
   * override it with its own `timeoutS`.
   * @default 30 */
  timeoutS?: number
  /** `false`: no network. `true` (RELAXES ISOLATION): the host network for every box, loopback
   * services and private ranges included. A {@link NetworkPolicy}: open() starts a host-side egress
   * proxy for the session, and every one-shot, ready and kernel box (and each machine, with a proxy
   * of its own) reaches the network only through it: allowed hosts only, header rules applied on the
   * host, so a secret in `rules` never enters a box. A malformed policy throws `SandboxError` code
   * `ERR_BAD_NETWORK_POLICY` (naming the entry) from the constructor. See docs/network.md.
   * @default false */
  network?: boolean | NetworkPolicy
  /** With a policy `network`: called with every request through the session's proxy (and its
   * machines' unless they pass their own), for audit logs, once the proxy is done with it: it
   * may come after the request's client has its answer. Never holds a header value; what it
   * throws or rejects with is ignored; it never keeps Node alive. */
  onRequest?: ((event: EgressEvent) => void) | null
  /**
   * Restrict runCode/run to a DOMAIN ALLOWLIST instead of all-or-nothing, e.g. ["pkgs.example.org",
   * "files.example.net"]. The box runs in an isolated network namespace and reaches the internet
   * only through kern's filtering proxy, which permits just these domains. Mutually exclusive with
   * network:true and with a policy `network` (use its `allowOut`: ERR_INVALID_OPTION); the setup
   * box keeps full network to install deps, the allowlist governs the run phase.
   */
  egressAllow?: string[]
  /** Extra host->box binds: { hostSrc: boxTarget } or { src: [target, "ro"] }. Sensitive sources refused. */
  mounts?: Record<string, MountSpec>
  /**
   * kern resource profiles to attach, e.g. ["vcpu:heavy", "vgpio:leds", "vdisk:scratch"]. Each names a
   * [[vcpu]]/[[vgpio]]/[[vdisk]] block in your ~/.config/kern/kern.toml: a CPU+memory slice, a specific
   * GPIO/I2C/SPI device set (the only way to grant the box hardware), or a size-capped scratch disk.
   * Tokens are strictly validated (prefix + alphanumeric name) so an entry can never smuggle a flag.
   */
  profiles?: string[]
  /** Extra environment variables for the workload (passed via a private 0600 file, not argv). */
  env?: Record<string, string>
  /** Cap on captured stdout/stderr EACH, in bytes (64 MiB by default).
   * @default 67108864 */
  maxOutputBytes?: number
  /** true hard-enforces caps via a systemd scope (~6 ms start); false = best-effort (~3 ms).
   * @default true */
  enforceLimits?: boolean
  /** Mount setup= deps read-only for runCode (blocks cross-run dependency poisoning).
   * @default false */
  depsReadonly?: boolean
  /** Called with each stdout Buffer chunk as it arrives (live streaming), for every call of the
   * session unless the call passes its own. The full capped output is still captured in the
   * result, so you can stream AND read result.stdout. */
  onStdout?: ChunkCallback | null
  /** Called with each stderr Buffer chunk as it arrives. */
  onStderr?: ChunkCallback | null
  /** Report the files each call created/modified in `result.files`; false skips the tracking (an
   * inotify-kept index of the workspace) and `files` is then `[]`.
   * @default true */
  trackFiles?: boolean
  /** Linux capabilities the box drops (kern --cap-drop, one per entry): names of capabilities(7),
   * with or without `CAP_`, in any case, or "ALL". `[]` opts out and keeps kern's own default set;
   * an unknown name is a SandboxError.
   * @default ["ALL"] */
  capDrop?: string[]
  /** kern's hardened profile for code you do not trust (kern --security-profile). The only
   * profile is "untrusted". null or absent (default): kern's normal posture. */
  securityProfile?: 'untrusted' | null
  /** Fail closed: kern refuses to start a box whose memory/pids/cpu caps it cannot enforce
   * (kern --require-limits). The result is then a `startup_failed` fault saying so.
   * @default false */
  requireLimits?: boolean
  /** A pre-loaded AppArmor profile to confine the box with (kern --apparmor), e.g. "kern-box"; kern
   * fails the box closed if the host has not loaded it. null or absent (default): none. */
  apparmor?: string | null
  /** Where the workspace is bound in every box, which is also the box's working directory and the
   * base of `.deps` on `PYTHONPATH`: an absolute path of plain names, not `/`, `/proc`, `/sys` or
   * `/dev`.
   * @default "/workspace" */
  boxWorkspace?: string
  /** Boxes this session keeps started ahead of its calls, so that a runCode/run finds one up
   * instead of paying a box start (see docs/prewarm.md). Each ready box is used once, by one call,
   * and behaves as a fresh one; it waits with the language the session ran last (a Python box has
   * the interpreter and the cell runner loaded). Costs host memory and CPU for boxes that may go
   * unused; ready boxes idle for 60 s are stopped, close() stops them all and none outlives
   * Node. A whole number 0-16; 0 (the default) starts no box ahead, exactly as kern-sandbox 0.1.1
   * did. `KERN_SANDBOX_PREWARM` replaces the default. The one-shot top-level runCode() keeps none.
   * @default 0 */
  prewarm?: number
  /** The host directory machine snapshots are kept in (an absolute path; created 0700). Default
   * `$KERN_SANDBOX_SNAPSHOT_DIR`, else `$XDG_DATA_HOME/kern-sandbox/snapshots`, else
   * `~/.local/share/kern-sandbox/snapshots`. See docs/machines.md. */
  snapshotDir?: string
  /** Cap on the bytes every snapshot in the store holds together: a snapshot that would pass it is
   * refused (`ERR_TOO_LARGE`) and nothing of it is kept.
   * @default 21474836480 (20 GiB) */
  snapshotMaxBytes?: number
}

/** The language runCode() runs `code` as. Match the image to it (python -> a python image, ...).
 * "node", "javascript"/"js" and "typescript"/"ts" run as one JavaScript cell (types stripped on
 * the host) and hand back `results` and `error` as a kernel cell does. "python3" is an alias of
 * "python", "sh" of "bash". Names are case-sensitive. */
export type Language = 'python' | 'python3' | 'bash' | 'sh' | 'node' | 'javascript' | 'js' | 'typescript' | 'ts'

/** The language of a warm kernel. "js" and "node" are aliases of "javascript", "ts" of
 * "typescript", "python3" of "python". */
export type KernelLanguage = 'python' | 'python3' | 'javascript' | 'js' | 'node' | 'typescript' | 'ts'

/** Every language name runCode() accepts (canonical names first, then aliases). */
export const LANGUAGE_NAMES: readonly Language[]

/** A language as resolveLanguage() gives it. */
export interface LanguageInfo {
  /** The canonical name. */
  readonly name: 'python' | 'bash' | 'javascript' | 'typescript'
  /** The name the native core runs it as ("typescript" runs as "javascript"). */
  readonly native: 'python' | 'bash' | 'javascript'
  /** Whether kernel() runs it (bash is one-shot only). */
  readonly kernel: boolean
  /** Whether its cells are TypeScript, stripped of types on the host. */
  readonly typescript: boolean
}

/** The language a name (or alias) names, as every entry point resolves it; an unknown name throws
 * a SandboxError with code "ERR_UNSUPPORTED_LANGUAGE". `kernel`: only languages a kernel runs. */
export function resolveLanguage(name: unknown, opts?: { kernel?: boolean }): LanguageInfo

/** Options for one run()/runCode() call. Each overrides the session's value for that call only.
 * (The name is the later upstream SDK's, so code typed against it keeps compiling.) */
export interface PerCallOptions {
  /** Deadline for this call, in seconds. Default: the session's `timeoutS`. */
  timeoutS?: number
  /** Live stdout for this call; `null` turns the session's `onStdout` off for it. */
  onStdout?: ChunkCallback | null
  /** Live stderr for this call; `null` turns the session's `onStderr` off for it. */
  onStderr?: ChunkCallback | null
  /** Cancels the call. Already aborted: rejects at once, no box started. Aborted while running: the
   * box is torn down as on a timeout (nothing left running), then the call rejects with
   * `signal.reason` (an `AbortError` DOMException by default), as `fetch` does. */
  signal?: AbortSignal
}

/** Called with each rich result as it is produced (Python and JavaScript/TypeScript). */
export type ResultCallback = (result: Result) => void

/** Options for runCode(): a call's options plus the language. */
export interface RunCodeOptions extends PerCallOptions {
  /** The language `code` is in.
   * @default "python" */
  language?: Language
  /** Called once per rich result, in order, before runCode resolves. */
  onResult?: ResultCallback | null
}

/** Options for Sandbox.kernel(). */
export interface KernelOptions {
  /** The kernel's language. A JavaScript or TypeScript kernel runs the image's own `node` (18 or
   * later); an image without one rejects kernel() with a SandboxError.
   * @default "python" */
  language?: KernelLanguage
  /** The image for this kernel only (validated like the session's `image`); it shares the
   * session's workspace, caps, network, env and mounts. Default: the session's image. */
  image?: string
  /** Default deadline for each cell, in seconds. Default: the session's `timeoutS`. */
  timeoutS?: number
}

/** Options for one kernel cell. */
export interface CellOptions {
  /** Deadline for this cell; past it the kernel is torn down (fault `timeout`). */
  timeoutS?: number
  /** Live stdout of this cell, while it runs. Default: the session's `onStdout`; `null` turns it off. */
  onStdout?: ChunkCallback | null
  /** Live stderr of this cell, while it runs. Default: the session's `onStderr`; `null` turns it off. */
  onStderr?: ChunkCallback | null
  /** Called with each rich result as the cell produces it. */
  onResult?: ResultCallback | null
  /** Interrupts the cell (Python: KeyboardInterrupt is raised in it; JavaScript: a synchronous
   * loop is stopped, a pending await abandoned) and the call rejects with `signal.reason`. A cell that stops within about 2 s leaves the kernel serving with its state
   * (`kernel.alive` stays true); one that ignores the interrupt gets the kernel torn down. */
  signal?: AbortSignal
}

/** Options for readFile(). */
export interface ReadFileOptions {
  /** Refuse (throw SandboxError) a file larger than this many bytes, without reading it: guards host
   * memory against a file the box made huge. A refusal, never a partial read. 4 GiB by default (the
   * most one Buffer holds).
   * @default 4294967296 */
  maxBytes?: number
}

/** Options for snapshot(). */
export interface SnapshotOptions {
  /** Ceiling on the total size of the files archived, in bytes (4 GiB by default): a sparse file
   * the box planted makes the snapshot fail fast instead of blocking Node while it archives zeros.
   * @default 4294967296 */
  maxBytes?: number
}

/** Options for restore(). */
export interface RestoreOptions {
  /** Refuse a checkpoint whose extracted contents exceed this many bytes (guards against a
   * decompression bomb; 4 GiB by default).
   * @default 4294967296 */
  maxBytes?: number
}

/** Options for snapshotAsync(). */
export interface SnapshotAsyncOptions extends SnapshotOptions {
  /** Aborts the snapshot: the promise rejects with `signal.reason` (an `AbortError` DOMException by
   * default) and no archive, partial or whole, is left at `dest`. */
  signal?: AbortSignal
}

/** Options for restoreAsync(). */
export interface RestoreAsyncOptions extends RestoreOptions {
  /** Aborts the restore: the promise rejects with `signal.reason`; members already extracted stay,
   * as they do when restore() refuses a later member. */
  signal?: AbortSignal
}

/** A configured kernel sandbox. FILE state persists across runCode/run in a workspace on disk; each
 * call runs in a FRESH ephemeral box. Safe by default; every relaxing option says so.
 *
 * Closes itself at the end of an `await using` block (TypeScript 5.2+, Node with
 * `Symbol.asyncDispose`): `await using sbx = await new Sandbox(opts).open()`. */
export class Sandbox {
  constructor(opts?: SandboxOptions)
  /** The host path of the open workspace: null before open(). */
  readonly workspacePath: string | null
  /** How many boxes started ahead (`prewarm`) are ready for a call right now. */
  readonly readyBoxes: number
  /** Create/validate the workspace and run `setup`. Call before runCode/run/writeFile. */
  open(): Promise<this>
  /** Stop calls still running and delete the workspace iff we created it. Idempotent. */
  close(): Promise<void>
  /** Run a snippet on the workspace in a fresh, network-off box. File state persists; memory does not. */
  runCode(code: string, opts?: RunCodeOptions): Promise<ExecutionResult>
  /** Run an argv ARRAY (never a shell string) in a fresh box. */
  run(command: string[], opts?: PerCallOptions): Promise<ExecutionResult>
  /** Write data to a workspace-relative path (host-direct, O_NOFOLLOW on the final component). */
  writeFile(path: string, data: Buffer | string): Promise<void>
  /** Read a workspace-relative path (host-direct, O_NOFOLLOW). */
  readFile(path: string, opts?: ReadFileOptions): Promise<Buffer>
  /** Write a gzip tar of the whole workspace to `dest`, a portable filesystem checkpoint (NOT memory).
   * Refuses (SandboxError) once the files total more than `maxBytes` (default 4 GiB). */
  snapshot(dest: string, opts?: SnapshotOptions): void
  /** Extract a snapshot (from snapshot()) into the workspace, safely (rejects symlink/.. /absolute members). */
  restore(src: string, opts?: RestoreOptions): void
  /** snapshot() without blocking the event loop: the same archive, limits and refusals, written
   * on worker threads. Rejects (SandboxError) where snapshot() throws; `signal` or close() stops it. */
  snapshotAsync(dest: string, opts?: SnapshotAsyncOptions): Promise<void>
  /** restore() without blocking the event loop: the same checks and refusals, on worker threads.
   * Rejects (SandboxError) where restore() throws; `signal` or close() stops it. */
  restoreAsync(src: string, opts?: RestoreAsyncOptions): Promise<void>
  /** List regular files under the workspace (excludes .deps). */
  listFiles(subdir?: string): Promise<FileInfo[]>
  /** Start a warm interpreter (Python by default, or node for JavaScript/TypeScript) in one
   * long-lived box on this workspace, with the session's network, caps, env and mounts. Resolves
   * once it is ready. Cells share memory and cost well
   * under a millisecond, but are NOT isolated from each other; a fresh kernel is clean. */
  kernel(opts?: KernelOptions): Promise<Kernel>
  /** Start a machine: one persistent box on this workspace and the session's options (image,
   * caps, env, mounts, network, capabilities, security profile), with processes, terminals,
   * files, file watch and ports. Resolves once it is up. */
  machine(opts?: MachineOptions): Promise<Machine>
  /** The machine snapshots in the store (`snapshotDir`), oldest first: every session's, this
   * one's or not. Needs no open(). */
  snapshots(): Promise<MachineSnapshot[]>
  /** Same as close(): what `await using` calls at the end of its block. */
  [Symbol.asyncDispose](): Promise<void>
}

/** A warm, resident interpreter in one long-lived box (see `Sandbox.kernel`). In-memory
 * state persists across cells (in JavaScript, top-level declarations are globals a later cell may
 * declare again); cells run one after another in call order. A cell's timeout, an
 * output past `maxOutputBytes`, the box's death, or an interrupt the cell ignores tears the kernel
 * down; later cells then reject with SandboxError. `sandbox.close()` closes its kernels. */
export class Kernel {
  /** False once the kernel was closed or torn down. */
  readonly alive: boolean
  /** The kernel's language, its aliases resolved. */
  readonly language: 'python' | 'javascript' | 'typescript'
  /** Run a cell; its trailing expression (awaited, in JavaScript), display() calls and open
   * matplotlib figures become `results`. An uncaught error gives exitCode 1 and a traceback;
   * `sys.exit(n)` / `process.exit(n)` gives exit code n; either way the kernel keeps serving. */
  runCode(code: string, opts?: CellOptions): Promise<ExecutionResult>
  /** Tear the box down; a running cell rejects. Resolves once the box is gone. Idempotent. */
  close(): Promise<void>
  /** Same as close(). */
  [Symbol.asyncDispose](): Promise<void>
}

export interface MachineOptions {
  /** The machine's own image (checked like the session's). Default: the session's `image`. */
  image?: string
  /** Ports to expose at start (each as by `exposePort`). */
  ports?: number[]
  /** Deadline for the machine to start, seconds. Default: the session's `timeoutS`. */
  timeoutS?: number
  /** The machine's network, as the session's option: `false` none, `true` the host's (RELAXES
   * ISOLATION), a {@link NetworkPolicy} a proxy of the machine's own. Default: the session's; a
   * session policy gives the machine its own proxy with a copy, so `updateNetwork` on it changes
   * no other box. Closed with the machine. */
  network?: boolean | NetworkPolicy
  /** Hears the machine's egress proxy. Default: the session's `onRequest`. */
  onRequest?: ((event: EgressEvent) => void) | null
  /** Seconds the machine lives from its start; past it, `onTimeout` happens. The clock stops
   * while the machine is paused; `machine.setTimeout()` moves it. Default: no lifetime (it lives
   * until closed). */
  lifetimeS?: number
  /** What the end of `lifetimeS` does: `'close'` the machine, or `'pause'` it (resume() then
   * re-arms the whole lifetime). @default 'close' */
  onTimeout?: 'close' | 'pause'
  /** Start on a snapshot (a {@link MachineSnapshot}, or its id or name; a name means the newest
   * of that name): the machine runs the snapshot's image with its root changes and a copy of its
   * workspace of its own (removed on close). Missing: `ERR_SNAPSHOT_NOT_FOUND`. Not with `image`. */
  from?: MachineSnapshot | string
}

/** A machine's filesystem kept on the host (see `Machine.snapshot`, docs/machines.md): the changes
 * of its root filesystem against its image (new, changed and removed files, directories and
 * symlinks with their modes and owners) and a copy of its workspace. It does NOT hold running
 * processes, memory, open ports or anything under other mounts (`/proc`, `/dev`, `/tmp` where it
 * is a tmpfs, the session's `mounts`). It outlives the session until deleted. */
export interface MachineSnapshot {
  readonly id: string
  readonly name: string | null
  /** The image the machine ran: a machine from the snapshot runs it too. */
  readonly image: string
  readonly createdAt: Date
  /** Bytes it holds in the store (changed files, their list, the workspace copy). */
  readonly sizeBytes: number
  /** Removes it from the store. Already gone: `ERR_SNAPSHOT_NOT_FOUND`. */
  delete(): Promise<void>
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
  /** Closes its stdin (a PTY: sends EOF, ^D). Resolves also when the process has already exited
   * or its stdin was already closed: its input is over either way. */
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
  /** Its extended attributes in the `user.` namespace (full names), `{}` for none. */
  xattrs: Record<string, string>
}

export interface MachineWriteFileOptions {
  /** Permission bits (also applied to an existing file). */
  mode?: number
  /** A user of the box (name or uid) that owns the file and the parents this call creates (an
   * existing file keeps its owner). Needs that uid mapped into the box. */
  owner?: string
  /** Extended attributes to set, each named in the `user.` namespace. */
  xattrs?: Record<string, string>
  /** Extended attributes whose names start with this (a `user.` prefix) are removed first. */
  clearXattrs?: string
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

/** One persistent box per call of `Sandbox.machine()`: processes, terminals, files, ports. Its
 * PID 1 is kern-sandbox's agent, which runs every operation inside the box (paths are the
 * machine's, resolved in its own namespace). Its root is writable (an overlay of the image, gone
 * with the machine); the workspace is bound at `workdir`. `sandbox.close()` closes it; it never
 * outlives Node. See docs/machines.md. */
export class Machine {
  /** The box's name (kern's). */
  readonly name: string
  /** False once closed or its box died. */
  readonly alive: boolean
  /** The working directory in the machine (the session's boxWorkspace). */
  readonly workdir: string
  /** The machine's network: `false`, `true`, or its current policy (as given). */
  readonly network: boolean | NetworkPolicy
  /** Replaces a live machine's policy: new connections, and new requests on kept-alive or
   * terminated ones, see it; nothing in the box restarts (an open tunnel carries on). Rejects with
   * `ERR_BAD_NETWORK_POLICY` (nothing changes) for a bad policy, `ERR_NETWORK_FIXED` for a machine
   * opened with `network: false` or `true` (open it with a policy object, e.g.
   * `{ denyOut: ['0.0.0.0/0'] }` for "off for now"). */
  updateNetwork(policy: NetworkPolicy): Promise<void>
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
  writeFile(path: string, data: string | Buffer | Uint8Array, opts?: MachineWriteFileOptions): Promise<void>
  /** Entries below `path`, `depth` levels (default 1). */
  list(path: string, opts?: { depth?: number }): Promise<MachineEntry[]>
  /** The entry (a symlink itself, not followed). Missing: SandboxError with code ERR_NOT_FOUND. */
  stat(path: string): Promise<MachineEntry>
  /** Files, symlinks, and directory trees. Missing: SandboxError ERR_NOT_FOUND. */
  remove(path: string): Promise<void>
  rename(from: string, to: string): Promise<void>
  /** Creates a directory and its parents; resolves false when it already existed. `owner` (a user
   * name or uid of the box) owns the directories this call creates. */
  mkdir(path: string, opts?: { owner?: string }): Promise<boolean>
  /** Watches a directory. Missing path or a file: SandboxError. */
  watch(path: string, onEvent: (event: WatchEvent) => void, opts?: { recursive?: boolean }): Promise<Watcher>
  /** A host address (127.0.0.1 only) reaching `port` on the machine's loopback. Idempotent per port. */
  exposePort(port: number): Promise<ExposedPort>
  metrics(): Promise<MachineMetrics>
  /** A warm kernel running inside this machine (sees its processes, loopback and files). */
  kernel(opts?: Omit<KernelOptions, 'image'>): Promise<Kernel>
  /** Freezes every process of the machine, its agent included: no CPU, memory kept, exposed
   * ports answer nothing (a connection waits), the lifetime clock stops. Meanwhile every other
   * call that reaches the machine (exec, spawn, process writes and signals, files, watch,
   * exposePort, metrics, kernel() and a kernel's runCode, updateNetwork) rejects with
   * `ERR_MACHINE_PAUSED`; `processes()`, `attach()`, a process's `wait()` and `close()` work
   * (close thaws, then closes); `snapshot()` and `fork()` thaw it for the copy and pause it again.
   * A process deadline that passes while paused applies on resume. Idempotent. */
  pause(): Promise<void>
  /** Thaws the machine exactly as it was: the same processes and pids, the same memory.
   * Idempotent. */
  resume(): Promise<void>
  /** True between pause() (or a lifetime's `onTimeout: 'pause'`) and resume(). */
  readonly paused: boolean
  /** Sets the machine's remaining lifetime to `seconds` from now (E2B's `setTimeout`); on a
   * paused machine, from its resume. Gives a machine without a lifetime one (ending by
   * `onTimeout`). A bad value: `ERR_INVALID_OPTION`; a closed machine: `ERR_MACHINE_GONE`. */
  setTimeout(seconds: number): Promise<void>
  /** When the lifetime ends; null without a lifetime, or while paused (the clock stops). */
  readonly endsAt: Date | null
  /** Records the machine's filesystem (its root's changes against the image, and a copy of its
   * workspace) in the host's snapshot store; the machine runs on. NOT its processes or memory.
   * `name`: 1-64 characters, no `/` or NUL (`ERR_INVALID_OPTION`). Closed machine:
   * `ERR_MACHINE_GONE`. Past `snapshotMaxBytes`: `ERR_TOO_LARGE`, nothing kept. */
  snapshot(opts?: { name?: string }): Promise<MachineSnapshot>
  /** `count` (default 1, a whole number 1-64) new machines of this session whose root and
   * workspace start as copies of this one's now, each with a workspace of its own; processes start
   * fresh; the session's network; this machine runs on. A failure closes those already made.
   * Bad count: `ERR_INVALID_OPTION`; closed machine: `ERR_MACHINE_GONE`. */
  fork(opts?: { count?: number }): Promise<Machine[]>
  /** Ends every process and the box; resolves once nothing of it is left. Idempotent. */
  close(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
}

/** Open a Sandbox, run `fn(sandbox)`, and close it even if `fn` throws. The session helper. */
export function withSandbox<T>(fn: (sandbox: Sandbox) => Promise<T>): Promise<T>
export function withSandbox<T>(opts: SandboxOptions, fn: (sandbox: Sandbox) => Promise<T>): Promise<T>

/** One-shot: run `code` in a throwaway session (workspace created and deleted). `signal` cancels
 * it; `onResult` sees each rich result. */
export function runCode(
  code: string,
  opts?: SandboxOptions & { language?: Language; signal?: AbortSignal; onResult?: ResultCallback | null },
): Promise<ExecutionResult>

/** This package's version, e.g. "0.2.0". */
export const version: string

/** What a doctor check looked at (stable ids; a report lists each at most once, in this order).
 * - `kern`: the kern binary (`$KERN_BIN`, else `kern` on `PATH`) and its version.
 * - `kern-doctor`: kern's own `kern doctor` verdict, and its failures no other check covers.
 * - `images`: the default image (or `opts.image`) in kern's cache.
 * - `agent`: the machine agent binary `sbx.machine()` needs.
 * - `userns`: unprivileged user namespaces (from kern's doctor when it has them, else the sysctls).
 * - `seccomp`: the seccomp filter on this process (`/proc/self/status`).
 * - `proc`: masks over `/proc` (mounts under it in `/proc/self/mountinfo`).
 * - `apparmor`: the AppArmor profile confining this process.
 * - `cgroup`: cgroup v2 with memory, pids and cpu delegated (else caps are not enforced).
 * - `scratch`: kern's scratch directory not on overlayfs.
 * - `runtime-dir`: `$XDG_RUNTIME_DIR`, when set, usable.
 * - `bubblewrap`: `bwrap`, which only the project's test stand-in uses (never worse than warn).
 * - `box`: one real box running `true` end to end.
 * `kern-doctor`, `images`, `userns`, `seccomp`, `proc`, `apparmor`, `cgroup`, `scratch` and
 * `runtime-dir` are left out when no kern was found. */
export type DoctorCheckId =
  | 'kern'
  | 'kern-doctor'
  | 'images'
  | 'agent'
  | 'userns'
  | 'seccomp'
  | 'proc'
  | 'apparmor'
  | 'cgroup'
  | 'scratch'
  | 'runtime-dir'
  | 'bubblewrap'
  | 'box'

/** One finding of `doctor()`. */
export interface DoctorCheck {
  id: DoctorCheckId
  /** `ok`; `warn`: boxes run, with a limit (caps not enforced, an image to pull, no machine
   * agent, ...); `fail`: this stops boxes. */
  status: 'ok' | 'warn' | 'fail'
  /** One line: what was found. */
  why: string
  /** One line: what to change on this host or container (a sysctl, a `docker run`/`podman run`
   * flag, a pod's securityContext field); absent when nothing needs to. */
  fix?: string
}

/** `doctor()`'s report, also what `npx kern-sandbox doctor --json` prints. Stable JSON: fields
 * are only ever added. */
export interface DoctorReport {
  /** True only when a box ran (the `box` check is ok); `kern-sandbox doctor` exits 0 only then. */
  ok: boolean
  /** Where this process runs, as far as the fixes differ. */
  environment: 'host' | 'docker' | 'podman' | 'kubernetes' | 'container'
  /** Wall time of the whole check. */
  durationMs: number
  checks: DoctorCheck[]
}

/** Will boxes run here, and what to change if not: finds kern and its version, the default image,
 * the machine agent; reads user namespaces, the process's seccomp filter, `/proc` masks, cgroup v2
 * delegation, kern's scratch dir and `XDG_RUNTIME_DIR`; uses kern's own `kern doctor` for what it
 * checks; then runs one real box (`true` in `image`) with no box started ahead. Nothing is cached
 * between calls. Never rejects for a finding; throws a TypeError for a bad option. */
export function doctor(opts?: {
  /** The image of the end-to-end box and of the `images` check. @default "python:3.12-slim" */
  image?: string
  /** The end-to-end box's deadline, in seconds. @default 15 */
  timeoutS?: number
}): Promise<DoctorReport>
