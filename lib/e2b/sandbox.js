'use strict'
// Sandbox: E2B's sandbox (`e2b`'s core API and `@e2b/code-interpreter`'s code contexts) on one
// machine of this package: a persistent box whose processes, /tmp, loopback and files every
// command, PTY, file call and code context of the sandbox share. The workspace is bound at
// /home/user (E2B's user's home). The machine's traffic leaves through the host's egress proxy,
// under a policy made of E2B's `network` and `allowInternetAccess` (network.js).

const os = require('node:os')
const fs = require('node:fs')
const { randomBytes } = require('node:crypto')
const { Sandbox: CoreSandbox } = require('../sandbox.js')
const { Machine } = require('../machine.js')
const { DEFAULTS } = require('../options.js')
const { IPYTHON } = require('../kernel.js')
const { SandboxError, InvalidArgumentError, SandboxNotFoundError, killedError, toE2B } = require('./errors.js')
const { Contexts, HOME, KERNEL_BACKSTOP_S } = require('./contexts.js')
const { Filesystem } = require('./files.js')
const { Commands, ProcessTable } = require('./commands.js')
const { Pty } = require('./pty.js')
const { Git } = require('./git.js')
const { HostPorts } = require('./ports.js')
const { live, sandboxPages } = require('./live.js')
const { toPolicy, networkInfo } = require('./network.js')
const {
  lifecycleOf,
  checkPauseOpts,
  checkForkCount,
  snapshotOrigin,
  snapshotPages,
  storeOf,
  findSnapshot,
} = require('./lifecycle.js')
const snapshotStore = require('../snapshot-store.js')
const { version } = require('../../package.json')

/** E2B's default sandbox lifetime. */
const LIFETIME_MS = 300_000
/** The longest lifetime a Node timer holds (about 24.8 days). */
const MAX_LIFETIME_MS = 2 ** 31 - 1
/** How many getMetrics() samples a sandbox keeps (E2B keeps a series; one per call here). */
const MAX_SAMPLES = 1000
/** E2B's own template names: here they mean the default image. */
const E2B_TEMPLATES = new Set(['code-interpreter-v1', 'code-interpreter-beta', 'code-interpreter', 'base'])
/** This package's Sandbox options that the E2B options set, so `kern` may not. */
const OWNED = ['image', 'env', 'network', 'boxWorkspace']
/** Run once per machine, as root: whether the image has bash, and E2B's `user` (uid 1000, home
 * /home/user) added where the image has none and its /etc is writable; its uid. */
const SETUP =
  '[ -x /bin/bash ] && echo shell=bash; ' +
  'id -u user >/dev/null 2>&1 || { echo "user:x:1000:1000:user:/home/user:/bin/sh" >> /etc/passwd && ' +
  'echo "user:x:1000:" >> /etc/group; } 2>/dev/null; id -u user >/dev/null 2>&1 && echo user=yes uid=$(id -u user)'
/** The capabilities an E2B sandbox's box drops: all but what root needs to become E2B's `user`
 * (sudo, su) and to give it files (CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETUID, SETGID,
 * AUDIT_WRITE: Docker's defaults without the network and device ones). They only matter where the
 * host maps a uid range into the box; `kern: { capDrop }` replaces the list. */
const E2B_CAP_DROP = [
  'AUDIT_CONTROL',
  'AUDIT_READ',
  'BLOCK_SUSPEND',
  'BPF',
  'CHECKPOINT_RESTORE',
  'DAC_READ_SEARCH',
  'IPC_LOCK',
  'IPC_OWNER',
  'LEASE',
  'LINUX_IMMUTABLE',
  'MAC_ADMIN',
  'MAC_OVERRIDE',
  'MKNOD',
  'NET_ADMIN',
  'NET_BIND_SERVICE',
  'NET_BROADCAST',
  'NET_RAW',
  'PERFMON',
  'SETFCAP',
  'SETPCAP',
  'SYS_ADMIN',
  'SYS_BOOT',
  'SYS_CHROOT',
  'SYS_MODULE',
  'SYS_NICE',
  'SYS_PACCT',
  'SYS_PTRACE',
  'SYS_RAWIO',
  'SYS_RESOURCE',
  'SYS_TIME',
  'SYS_TTY_CONFIG',
  'SYSLOG',
  'WAKE_ALARM',
]

/** Whether the core gives machines an egress policy (`sbx.machine({ network })`,
 * `machine.updateNetwork`). Without it a sandbox's network is the session's `true` or `false`. */
const POLICIES = typeof Machine.prototype.updateNetwork === 'function'

function checkLifetime(ms, what) {
  if (typeof ms !== 'number' || !(ms > 0) || ms > MAX_LIFETIME_MS) {
    throw new InvalidArgumentError(
      `${what} must be a positive number of milliseconds, at most ${MAX_LIFETIME_MS}, got ${String(ms)}`,
    )
  }
  return ms
}

function stringRecord(v, what) {
  if (v == null) return {}
  if (typeof v !== 'object' || Array.isArray(v)) throw new InvalidArgumentError(`${what} must be an object of strings`)
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, String(x)]))
}

/** The core Sandbox options an E2B `create` amounts to. */
function coreOptions(template, opts) {
  const kern = opts.kern ?? {}
  if (typeof kern !== 'object' || Array.isArray(kern))
    throw new InvalidArgumentError('kern must be an object of kern-sandbox Sandbox options')
  for (const k of OWNED) {
    if (kern[k] !== undefined) {
      throw new InvalidArgumentError(
        `kern.${k} is set by the E2B options (template, envs, allowInternetAccess, /home/user): use those`,
      )
    }
  }
  const given = opts.allowInternetAccess
  if (given != null && typeof given !== 'boolean')
    throw new InvalidArgumentError('allowInternetAccess must be a boolean')
  if (!POLICIES && opts.network != null) {
    throw new SandboxError('network (an egress policy) needs a kern-sandbox build with egress policies for machines')
  }
  return {
    trackFiles: false, // E2B reports no per-call file changes; spare the bookkeeping
    capDrop: E2B_CAP_DROP,
    ...kern,
    image: template === undefined || E2B_TEMPLATES.has(template) ? DEFAULTS.image : template,
    // E2B's user has its home at /home/user: `~` and $HOME mean the workspace there too.
    env: { HOME, ...stringRecord(opts.envs, 'envs') },
    // With policies the session's own boxes stay offline: the machine gets the policy.
    network: POLICIES ? false : (given ?? false),
    boxWorkspace: HOME,
  }
}

/** Opens the session and its machine; closes what was opened when a step fails. */
/** The machine's network options: the policy and who hears of each request. */
function machineNetwork(opts) {
  if (opts.onRequest != null && typeof opts.onRequest !== 'function')
    throw new InvalidArgumentError('onRequest must be a function')
  if (!POLICIES) return { policy: null, options: {} }
  const policy = toPolicy(opts.network, opts.allowInternetAccess)
  return { policy, options: { network: policy, ...(opts.onRequest ? { onRequest: opts.onRequest } : {}) } }
}

async function openMachine(core, machineOptions) {
  let session
  try {
    session = new CoreSandbox(core)
    await session.open()
    if (typeof session.machine !== 'function') {
      throw new SandboxError(
        'this build of kern-sandbox has no machines (Sandbox.machine): kern-sandbox/e2b needs them',
      )
    }
    return { session, machine: await session.machine(machineOptions) }
  } catch (e) {
    await session?.close().catch(() => {})
    throw toE2B(e)
  }
}

class Sandbox {
  #session
  #machine
  #contexts
  #ports
  #killed = false
  /** What ends with the sandbox (its watches). */
  #onKill = new Set()
  #timer = null
  #endAt = 0
  #startedAt = new Date()
  /** The getMetrics() samples taken so far (the newest MAX_SAMPLES). */
  #samples = []
  /** The machine's probe (its shell, its user), run on the first command or PTY: create() and the
   * first cell do not wait for it. */
  #setup = null
  #template
  #core
  #box
  /** E2B's network options as last given (create or updateNetwork), and the policy they made. */
  #network
  /** What `lifecycle` asked for: `{ onTimeout: 'kill' | 'pause', autoResume }`. */
  #lifecycle
  #paused = false
  /** The session, shared with this sandbox's forks: closed by the last of them to be killed. */
  #shared

  /** Use `Sandbox.create()`. */
  constructor({ session, machine, shared }, { template, core, metadata, timeoutMs, network, lifecycle }) {
    this.#session = session
    this.#shared = shared ?? { refs: 0 }
    this.#shared.refs += 1
    this.#machine = machine
    this.#lifecycle = lifecycle
    this.#template = template
    this.#core = core
    this.#network = network
    this.sandboxId = `kern${randomBytes(10).toString('hex')}`
    /** Where `getHost()` hosts are: this machine's loopback. */
    this.sandboxDomain = '127.0.0.1'
    this.metadata = metadata
    this.#box = this.#makeBox()
    const host = this
    this.#contexts = new Contexts((language) => this.#startKernel(language), {
      get killed() {
        return host.#killed
      },
    })
    const table = new ProcessTable(this.#box)
    this.files = new Filesystem(this.#box)
    this.commands = new Commands(this.#box, table)
    this.pty = new Pty(this.#box, table)
    /** E2B's git module: git commands run through `commands`. */
    this.git = new Git(this.commands)
    this.#ports = new HostPorts(machine)
    this.#arm(timeoutMs)
    live.set(this.sandboxId, this)
  }

  /** What the files, commands and PTY modules reach the machine through. */
  #makeBox() {
    return {
      machine: this.#machine,
      killed: () => this.#killed,
      /** The session's cap on captured output, per stream: what a handle keeps while a command runs. */
      maxOutputBytes: this.#session.maxOutputBytes ?? undefined,
      guard: (start, classes) => this.#request(start, classes),
      shell: async () => (await this.#request(() => this.#probed())).shell,
      account: async (user) => this.#account(user),
      /** Whether processes really run as the user asked for (the box maps a uid range). */
      switchesUser: async () => (await this.#request(() => this.#probed())).user,
      /** Runs `fn` at kill(); returns what unregisters it. */
      onKill: (fn) => (this.#onKill.add(fn), () => this.#onKill.delete(fn)),
    }
  }

  /** Creates a sandbox: `create(template?, opts?)` or `create(opts?)`. Resolves once its machine
   * runs; the default Python context starts meanwhile. */
  static async create(template, opts) {
    if (template !== undefined && typeof template !== 'string') [template, opts] = [undefined, template]
    opts = opts ?? {}
    if (typeof opts !== 'object' || Array.isArray(opts)) throw new InvalidArgumentError('options must be an object')
    const timeoutMs = checkLifetime(opts.timeoutMs ?? LIFETIME_MS, 'timeoutMs')
    const lifecycle = lifecycleOf(opts.lifecycle)
    // A snapshot's id or name as the template: a sandbox on that snapshot, with its image.
    const snapshot =
      typeof template === 'string' && !E2B_TEMPLATES.has(template) ? findSnapshot(storeOf(opts.kern), template) : null
    const core = coreOptions(snapshot ? undefined : template, opts)
    if (snapshot) core.image = snapshot.image
    const metadata = stringRecord(opts.metadata, 'metadata') // checked before anything is opened
    const net = machineNetwork(opts)
    const opened = await openMachine(core, { ...net.options, ...(snapshot ? { from: snapshot.id } : {}) })
    const network = { given: opts.network, allowInternetAccess: opts.allowInternetAccess, policy: net.policy }
    const sbx = new Sandbox(opened, {
      template: template ?? 'code-interpreter-v1',
      core,
      metadata,
      timeoutMs,
      network,
      lifecycle,
    })
    sbx.#contexts.warm()
    return sbx
  }

  /** The live sandbox of this process with that id (E2B reconnects over the network; here a
   * sandbox lives in the process that created it). */
  static async connect(sandboxId, opts) {
    const s = live.get(sandboxId)
    if (!s && opts?.debug === true) return Sandbox.#debugSandbox(sandboxId, opts)
    if (!s) {
      throw new SandboxNotFoundError(
        `sandbox ${JSON.stringify(sandboxId)} not found (it was killed, timed out, or belongs to another process)`,
      )
    }
    return s.connect(opts)
  }

  /** E2B's debug mode talks to a local sandbox under the id given, asking no API: here a sandbox
   * of this process, started under that id when none has it. */
  static async #debugSandbox(sandboxId, opts) {
    if (typeof sandboxId !== 'string' || sandboxId === '')
      throw new InvalidArgumentError('sandboxId must be a non-empty string')
    const { debug: _debug, timeoutMs, ...rest } = opts
    const sbx = await Sandbox.create({ ...rest, ...(timeoutMs != null ? { timeoutMs } : {}) })
    live.delete(sbx.sandboxId)
    sbx.sandboxId = sandboxId
    live.set(sandboxId, sbx)
    return sbx
  }

  /** getInfo() of the live sandbox with that id. */
  static async getInfo(sandboxId) {
    return Sandbox.#found(sandboxId).getInfo()
  }

  /** getMetrics() of the live sandbox with that id. */
  static async getMetrics(sandboxId, opts) {
    return Sandbox.#found(sandboxId).getMetrics(opts)
  }

  /** setTimeout() of the live sandbox with that id. */
  static async setTimeout(sandboxId, timeoutMs) {
    await Sandbox.#found(sandboxId).setTimeout(timeoutMs)
  }

  /** Kills the live sandbox with that id; false when there is none. */
  static async kill(sandboxId) {
    const s = live.get(sandboxId)
    return s ? await s.kill() : false
  }

  /** updateNetwork() of the live sandbox with that id. */
  static async updateNetwork(sandboxId, network) {
    await Sandbox.#found(sandboxId).updateNetwork(network)
  }

  /** The running sandboxes of this process, as E2B's paginator. */
  static list(opts) {
    return sandboxPages(opts)
  }

  /** fork() of the live sandbox with that id. */
  static async fork(sandboxId, opts) {
    checkForkCount(opts)
    return Sandbox.#found(sandboxId).fork(opts)
  }

  /** `count` (default 1) new sandboxes whose filesystem (root and /home/user) starts as a copy of
   * this one's now, each with its own copy; processes and memory are not copied (they start
   * fresh), and this sandbox keeps running. Each lives `timeoutMs` (default E2B's 5 minutes). */
  async fork(opts) {
    const count = checkForkCount(opts)
    const timeoutMs = checkLifetime(opts?.timeoutMs ?? LIFETIME_MS, 'timeoutMs')
    this.#alive(SandboxNotFoundError)
    const machines = await this.#request(() => this.#machine.fork({ count }))
    return machines.map(
      (machine) =>
        new Sandbox(
          { session: this.#session, machine, shared: this.#shared },
          {
            template: this.#template,
            core: this.#core,
            metadata: { ...this.metadata },
            timeoutMs,
            network: this.#network,
            lifecycle: this.#lifecycle,
          },
        ),
    )
  }

  /** pause() of the live sandbox with that id. */
  static async pause(sandboxId, opts) {
    return Sandbox.#found(sandboxId).pause(opts)
  }

  static async betaPause(sandboxId, opts) {
    return Sandbox.#found(sandboxId).pause(opts)
  }

  /** Freezes the sandbox: its processes keep their memory and use no CPU, its ports answer
   * nothing, its lifetime stops counting; connect() resumes it as it was. Memory is always kept
   * here (`keepMemory: false` is taken, and keeps it too). Resolves false when it was paused. */
  async pause(opts) {
    checkPauseOpts(opts)
    this.#alive(SandboxNotFoundError)
    if (this.#paused) return false
    clearTimeout(this.#timer)
    this.#paused = true
    try {
      await this.#request(() => this.#machine.pause(), undefined, true)
    } catch (e) {
      this.#paused = false
      this.#arm(Math.max(1, this.#endAt - Date.now()))
      throw e
    }
    return true
  }

  async betaPause(opts) {
    return this.pause(opts)
  }

  /** createSnapshot() of the live sandbox with that id. */
  static async createSnapshot(sandboxId, opts) {
    return Sandbox.#found(sandboxId).createSnapshot(opts)
  }

  /** A persistent snapshot of the sandbox's filesystem (root and /home/user; no processes, no
   * memory) that `Sandbox.create(snapshotId)` starts new sandboxes on. The sandbox keeps running. */
  async createSnapshot(opts) {
    const name = opts?.name
    if (name != null && (typeof name !== 'string' || name === ''))
      throw new InvalidArgumentError('name must be a non-empty string')
    this.#alive(SandboxNotFoundError)
    const snap = await this.#request(() => this.#machine.snapshot(name != null ? { name } : {}))
    snapshotOrigin.set(snap.id, this.sandboxId)
    return { snapshotId: snap.id, names: snap.name ? [snap.name] : [] }
  }

  /** The snapshots in the store (this machine's), as E2B's paginator; `sandboxId` keeps those
   * made by that sandbox of this process, `name` those with that name. */
  static listSnapshots(opts) {
    return snapshotPages(storeOf(opts?.kern), opts)
  }

  listSnapshots(opts) {
    return snapshotPages(storeOf(this.#core), { ...opts, sandboxId: this.sandboxId })
  }

  /** Removes a snapshot; false when there is none. */
  static async deleteSnapshot(snapshotId, opts) {
    if (typeof snapshotId !== 'string' || snapshotId === '')
      throw new InvalidArgumentError('snapshotId must be a non-empty string')
    const removed = snapshotStore.remove(storeOf(opts?.kern), snapshotId)
    snapshotOrigin.delete(snapshotId)
    return removed
  }

  static #found(sandboxId) {
    const s = live.get(sandboxId)
    if (!s) throw new SandboxNotFoundError(`sandbox ${JSON.stringify(sandboxId)} not found`)
    return s
  }

  /** This sandbox (it is connected already). A `timeoutMs` extends its lifetime to at least that
   * from now, as E2B's connect does; it never shortens it. */
  async connect(opts) {
    this.#alive(SandboxNotFoundError)
    if (this.#paused) {
      // Resumed as it was; its lifetime starts again (E2B's default 5 minutes, or timeoutMs).
      const ms = checkLifetime(opts?.timeoutMs ?? LIFETIME_MS, 'timeoutMs')
      await this.#resume(ms)
      return this
    }
    if (opts?.timeoutMs != null) {
      const ms = checkLifetime(opts.timeoutMs, 'timeoutMs')
      if (Date.now() + ms > this.#endAt) this.#arm(ms)
    }
    return this
  }

  /** Runs `code` in a context (default: the default context of `language`, Python if absent). */
  async runCode(code, opts = {}) {
    opts = opts ?? {}
    if (typeof code !== 'string') throw new InvalidArgumentError('code must be a string')
    if (opts.context && opts.language) {
      throw new InvalidArgumentError('pass either context or language to runCode, not both')
    }
    for (const k of ['onStdout', 'onStderr', 'onResult', 'onError']) {
      if (opts[k] != null && typeof opts[k] !== 'function') throw new InvalidArgumentError(`${k} must be a function`)
    }
    for (const k of ['timeoutMs', 'requestTimeoutMs']) {
      if (opts[k] != null && (typeof opts[k] !== 'number' || !(opts[k] >= 0))) {
        throw new InvalidArgumentError(`${k} must be a number of milliseconds, 0 for none`)
      }
    }
    if (opts.envs != null && (typeof opts.envs !== 'object' || Array.isArray(opts.envs))) {
      throw new InvalidArgumentError('envs must be an object of strings')
    }
    this.#alive()
    const entry = this.#contexts.entry(opts.context, opts.language)
    return this.#contexts.run(entry, code, opts)
  }

  /** Creates a context: its own kernel, in `cwd` (default /home/user). */
  async createCodeContext(opts = {}) {
    this.#alive()
    return this.#contexts.create(opts ?? {})
  }

  /** Every context, the default Python and JavaScript ones included. */
  async listCodeContexts() {
    this.#alive()
    return this.#contexts.list()
  }

  /** Restarts a context's kernel: its state is gone, it keeps its id. */
  async restartCodeContext(context) {
    this.#alive()
    await this.#contexts.restart(context)
  }

  async removeCodeContext(context) {
    this.#alive()
    await this.#contexts.remove(context)
  }

  /** `127.0.0.1:<host port>`: where the host reaches `port` of the sandbox, over plain HTTP/TCP. */
  getHost(port) {
    this.#alive()
    return this.#ports.host(port)
  }

  /** The machine's resource use: a sample taken now joins the ones earlier calls took, and those
   * from `start` (default: the sandbox's start) to `end` (default: now) are given, oldest first. */
  async getMetrics(opts) {
    const start = metricsBound(opts?.start, 'start') ?? this.#startedAt.getTime()
    const end = metricsBound(opts?.end, 'end') ?? Infinity
    if (start > end) throw new InvalidArgumentError('start must not be after end')
    this.#samples.push(await this.#sample())
    if (this.#samples.length > MAX_SAMPLES) this.#samples.shift()
    return this.#samples
      .filter((m) => m.timestamp.getTime() >= start && m.timestamp.getTime() <= end)
      .map((m) => ({ ...m, timestamp: new Date(m.timestamp) }))
  }

  /** One sample of the machine's resource use now. */
  async #sample() {
    const m = await this.#request(() => this.#machine.metrics())
    const disk = diskOf(this.#session.workspacePath)
    return {
      timestamp: new Date(),
      cpuUsedPct: m.cpuPercent,
      cpuCount: this.#cpuCount(),
      memUsed: m.memoryBytes,
      memTotal: m.memoryLimitBytes ?? os.totalmem(),
      memCache: 0,
      diskUsed: m.diskBytes ?? disk.used,
      diskTotal: disk.total,
    }
  }

  /** Sets the sandbox's remaining lifetime, from now. */
  async setTimeout(timeoutMs) {
    this.#alive()
    this.#arm(checkLifetime(timeoutMs, 'timeoutMs'))
  }

  /** Replaces the sandbox's egress policy, as E2B's: the whole of it (what `network` leaves out is
   * cleared), `allowInternetAccess: false` closing everything `allowOut` does not list. Nothing in
   * the sandbox restarts; new connections and requests see it. */
  async updateNetwork(network) {
    this.#alive()
    if (!POLICIES) {
      throw new SandboxError('updateNetwork needs a kern-sandbox build with egress policies for machines')
    }
    if (network == null || typeof network !== 'object' || Array.isArray(network))
      throw new InvalidArgumentError('updateNetwork takes an object: { allowOut, denyOut, rules, allowInternetAccess }')
    const { allowInternetAccess, ...rest } = network
    const policy = toPolicy(rest, allowInternetAccess)
    await this.#request(() => this.#machine.updateNetwork(policy))
    this.#network = { given: rest, allowInternetAccess, policy }
  }

  async isRunning() {
    return !this.#killed && !this.#paused && this.#machine.alive
  }

  async getInfo() {
    this.#alive()
    return {
      sandboxId: this.sandboxId,
      templateId: this.#core.image,
      name: this.#template,
      metadata: { ...this.metadata },
      startedAt: this.#startedAt,
      endAt: new Date(this.#endAt),
      state: this.#paused ? 'paused' : 'running',
      lifecycle: { ...this.#lifecycle },
      cpuCount: this.#cpuCount(),
      memoryMB: this.#core.memoryMb ?? DEFAULTS.memoryMb ?? Math.floor(os.totalmem() / 2 ** 20),
      envdVersion: `kern-sandbox ${version}`,
      allowInternetAccess: this.#internet(),
      ...(this.#network.policy ? { network: networkInfo(this.#network.given, this.#network.policy) } : {}),
      sandboxDomain: this.sandboxDomain,
    }
  }

  /** Ends the sandbox: its processes, kernels and machine stop, requests in flight reject with
   * TimeoutError, the workspace is deleted (unless `kern.workspace` named one). Resolves true, or
   * false when it had ended already. */
  async kill() {
    if (this.#killed) return false
    this.#killed = true
    clearTimeout(this.#timer)
    live.delete(this.sandboxId)
    for (const fn of this.#onKill) fn()
    this.#onKill.clear()
    await this.#ports.close()
    await this.#machine.close().catch(() => {})
    // The session after the machine (it also stops kernels still starting), once no fork of this
    // sandbox (or the sandbox it was forked from) uses it.
    this.#shared.refs -= 1
    if (this.#shared.refs === 0) await this.#session.close()
    await this.#contexts.closeAll()
    return true
  }

  async [Symbol.asyncDispose]() {
    await this.kill()
  }

  /** Whether any public address is open: E2B's default is yes. */
  #internet() {
    const { policy, allowInternetAccess } = this.#network
    if (!policy) return this.#core.network
    if (allowInternetAccess != null) return allowInternetAccess
    return !(policy.denyOut ?? []).includes('0.0.0.0/0') && !policy.allowOut
  }

  #cpuCount() {
    return this.#core.cpus ?? DEFAULTS.cpus ?? os.availableParallelism()
  }

  #arm(ms) {
    clearTimeout(this.#timer)
    this.#endAt = Date.now() + ms
    const end = this.#lifecycle.onTimeout === 'pause' ? () => this.pause() : () => this.kill()
    this.#timer = setTimeout(() => end().catch(() => {}), ms)
    this.#timer.unref() // a lifetime never keeps Node alive; exit cleans the boxes up
  }

  #alive(Class = SandboxError) {
    if (this.#killed) throw new Class(`sandbox ${this.sandboxId} was killed or reached the end of its lifetime`)
  }

  async #resume(ms) {
    await this.#request(() => this.#machine.resume(), undefined, true)
    this.#paused = false
    this.#arm(ms)
  }

  /** One machine request: refused once killed; its errors as E2B's; cut short by kill(), E2B's
   * TimeoutError. */
  async #request(start, classes, waking = false) {
    this.#alive()
    if (this.#paused && !waking) {
      if (!this.#lifecycle.autoResume) {
        throw new SandboxError(`sandbox ${this.sandboxId} is paused: connect() resumes it`)
      }
      await this.#resume(LIFETIME_MS)
    }
    try {
      return await start()
    } catch (e) {
      throw this.#killed ? killedError(e) : toE2B(e, classes)
    }
  }

  #probed() {
    if (!this.#setup) {
      this.#setup = this.#probe()
      this.#setup.catch(() => (this.#setup = null)) // the next command tries again
    }
    return this.#setup
  }

  /** The image's shell, and whether commands run as E2B's `user`: the box must really switch to
   * its uid (the host maps a uid range into the box, and root keeps SETUID/SETGID) and the user
   * must own /home/user (given to it here when the workspace is the sandbox's own). Else they run
   * as root with the user's HOME. */
  async #probe() {
    const r = await this.#machine.exec(['/bin/sh', '-c', SETUP], { timeoutS: 30 })
    const shell = /shell=bash/.test(r.stdout) ? ['/bin/bash', '-l', '-c'] : ['/bin/sh', '-c']
    const uid = /user=yes uid=(\d+)/.exec(r.stdout)?.[1]
    if (uid === undefined || uid === '0') return { shell, user: false }
    const asUser = (cmd) =>
      this.#machine.exec(['/bin/sh', '-c', cmd], { user: 'user', env: { HOME }, timeoutS: 30 }).catch(() => null)
    // A box with one uid mapped stays root whatever it is asked: ask the process who it is.
    const who = await asUser('id -u')
    if (who?.stdout.trim() !== uid) return { shell, user: false }
    let home = await asUser(`test -w ${HOME}`)
    if (home?.exitCode !== 0 && this.#core.workspace === undefined) {
      await this.#machine.exec(['chown', '-R', 'user:', HOME], { timeoutS: 30 }).catch(() => null)
      home = await asUser(`test -w ${HOME}`)
    }
    return { shell, user: home?.exitCode === 0 }
  }

  /** How a process runs for E2B's `user` option: the machine's `user`, its home, its env. */
  async #account(user) {
    if (user === 'root') return { user: 'root', home: '/root', env: { HOME: '/root', USER: 'root', LOGNAME: 'root' } }
    if (user !== 'user') return { user, home: HOME, env: {} }
    const { user: asUser } = await this.#request(() => this.#probed())
    const env = { HOME, USER: 'user', LOGNAME: 'user' }
    return asUser ? { user: 'user', home: HOME, env } : { user: undefined, home: HOME, env }
  }

  /** A started kernel for a context language, inside the machine: Python (IPython-style cells)
   * for 'python' and 'bash', the package's JavaScript kernel for 'javascript' and 'typescript'. */
  async #startKernel(language) {
    this.#alive()
    // bash contexts run in the Python kernel (its shell escapes).
    const lang = language === 'bash' ? 'python' : language
    const python = lang === 'python'
    try {
      return await this.#machine.kernel({ language: lang, timeoutS: KERNEL_BACKSTOP_S, [IPYTHON]: python })
    } catch (e) {
      if (python || e.code !== 'ERR_NO_NODE') throw e
      throw new SandboxError(
        `${language} contexts run on node, and this sandbox's image (${this.#core.image}) has no node on PATH: ` +
          "use an image with both Python and Node, as E2B's code-interpreter template has",
        { cause: e, code: e.code },
      )
    }
  }
}

/** A getMetrics() `start`/`end`: a Date (or ms since the epoch) → ms, undefined when absent. */
function metricsBound(v, what) {
  if (v == null) return undefined
  const t = v instanceof Date ? v.getTime() : v
  if (typeof t !== 'number' || !Number.isFinite(t)) throw new InvalidArgumentError(`${what} must be a Date`)
  return t
}

/** The workspace's filesystem: its size and what is used of it. */
function diskOf(dir) {
  try {
    const s = fs.statfsSync(dir)
    return { total: s.blocks * s.bsize, used: (s.blocks - s.bfree) * s.bsize }
  } catch {
    return { total: 0, used: 0 }
  }
}

module.exports = { Sandbox }
