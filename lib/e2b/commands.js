'use strict'
// sandbox.commands: E2B's commands on the sandbox's machine. Every command is a process of that
// one machine (so it shares /tmp, loopback and other processes with the rest of the sandbox), run
// as E2B runs it: `/bin/bash -l -c cmd` (`/bin/sh -c` in an image without bash), in the user's
// home, as the sandbox's user.

const path = require('node:path')
const { InvalidArgumentError, NotFoundError } = require('./errors.js')
const { CommandHandle, Relay, stdinWrite } = require('./handle.js')

/** E2B's default for a command's `timeoutMs`; 0 means none. */
const COMMAND_TIMEOUT_MS = 60_000
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
const USER_NAME = /^[a-z_][a-z0-9_-]{0,31}$/

function checkFunction(v, what) {
  if (v != null && typeof v !== 'function')
    throw new InvalidArgumentError(`${what} must be a function, got ${typeof v}`)
  return v ?? undefined
}

/** `timeoutMs` as the machine's `timeoutS` (undefined: none). */
function timeoutOf(opts, fallback = COMMAND_TIMEOUT_MS) {
  const ms = opts.timeoutMs ?? fallback
  if (typeof ms !== 'number' || !(ms >= 0)) {
    throw new InvalidArgumentError(`timeoutMs must be a number of milliseconds (0 for none), got ${String(ms)}`)
  }
  return { ms, timeoutS: ms > 0 && Number.isFinite(ms) ? ms / 1000 : undefined }
}

function checkPid(pid) {
  if (!Number.isSafeInteger(pid) || pid < 1)
    throw new InvalidArgumentError(`pid must be a positive integer, got ${String(pid)}`)
  return pid
}

function checkEnvs(envs) {
  if (envs == null) return {}
  if (typeof envs !== 'object' || Array.isArray(envs))
    throw new InvalidArgumentError('envs must be an object of strings')
  const out = {}
  for (const [k, v] of Object.entries(envs)) {
    if (!ENV_NAME.test(k)) throw new InvalidArgumentError(`env var name ${JSON.stringify(k)} is not a valid name`)
    const value = String(v)
    if (value.includes('\0')) throw new InvalidArgumentError(`env var ${k} must not contain a NUL byte`)
    out[k] = value
  }
  return out
}

/** How a process runs: its user (as the machine's option), home, working directory and extra
 * environment. `box.account(user)` says what the sandbox can do for that user. */
async function launchOptions(box, opts) {
  const user = opts.user ?? 'user'
  if (typeof user !== 'string' || !USER_NAME.test(user)) {
    throw new InvalidArgumentError(`user must be a user name such as 'user' or 'root', got ${JSON.stringify(user)}`)
  }
  const envs = checkEnvs(opts.envs)
  let cwd = opts.cwd
  if (cwd != null && (typeof cwd !== 'string' || cwd === '' || cwd.includes('\0'))) {
    throw new InvalidArgumentError(`cwd must be a non-empty path with no NUL byte, got ${JSON.stringify(cwd)}`)
  }
  const account = await box.account(user)
  cwd = path.posix.resolve(account.home, cwd ?? '.')
  return { cwd, env: { ...account.env, ...envs }, user: account.user, envs }
}

/** The processes of one sandbox, for commands and PTYs alike: what E2B lists of the ones this
 * sandbox started (`{ cmd, args, envs, cwd, pty, process }` by pid, until each exits), and the
 * machine's Process for any pid. */
/** How long kill() waits for a SIGKILLed process to be gone. */
const KILL_WAIT_MS = 5000

class ProcessTable {
  #box
  #started = new Map()

  constructor(box) {
    this.#box = box
  }

  remember(process, info) {
    this.#started.set(process.pid, { ...info, process })
    const forget = () => this.#started.delete(process.pid)
    process.wait().then(forget, forget)
  }

  async list() {
    const running = await this.#box.guard(() => this.#box.machine.processes())
    return running.map((p) => {
      const own = this.#started.get(p.pid)
      return {
        pid: p.pid,
        cmd: own ? own.cmd : p.command,
        args: own ? [...own.args] : [...p.args],
        envs: own ? { ...own.envs } : {},
        cwd: own ? own.cwd : p.cwd,
      }
    })
  }

  /** The machine's Process for `pid`: ours, else attached (with `callbacks`); null when the
   * machine knows no such process. */
  async get(pid, callbacks) {
    checkPid(pid)
    const own = this.#started.get(pid)
    if (own && !callbacks) return own.process
    try {
      return await this.#box.guard(() => this.#box.machine.attach(pid, callbacks ?? {}))
    } catch (e) {
      if (this.#box.killed()) throw e
      return null
    }
  }

  /** Like get(), a NotFoundError for a pid the machine does not know. */
  async known(pid) {
    const p = await this.get(pid)
    if (!p) throw new NotFoundError(`no running process with pid ${pid} in the sandbox`)
    return p
  }

  /** SIGKILL; false when there is no such process (or it already ended). Resolves once the
   * process is gone (as E2B's: a `kill -0 pid` after it fails), or after KILL_WAIT_MS for one the
   * kernel holds (uninterruptible sleep). */
  async kill(pid) {
    const p = await this.get(pid)
    if (!p) return false
    const killed = await this.#box.guard(() => p.kill('SIGKILL'))
    if (killed) {
      let timer
      const late = new Promise((resolve) => (timer = setTimeout(resolve, KILL_WAIT_MS)))
      await Promise.race([p.wait().catch(() => {}), late])
      clearTimeout(timer)
    }
    if (p !== this.#started.get(pid)?.process) p.detach()
    return killed
  }

  /** A CommandHandle on a running process: its output from now on. */
  async connect(pid, how) {
    checkPid(pid)
    const own = this.#started.get(pid)
    const pty = own
      ? own.pty
      : (await this.#box.guard(() => this.#box.machine.processes())).some((p) => p.pid === pid && p.pty)
    const relay = new Relay()
    const p = await this.get(pid, relay.callbacks(pty))
    if (!p) throw new NotFoundError(`no running process with pid ${pid} in the sandbox`)
    return new CommandHandle(p, relay, {
      ...how,
      pty,
      timeoutMs: 0,
      killed: this.#box.killed,
      keep: this.#box.maxOutputBytes,
    })
  }
}

class Commands {
  #box
  #table

  /** `box`: the sandbox's machine access (see lib/e2b/sandbox.js); `table`: its ProcessTable. */
  constructor(box, table) {
    this.#box = box
    this.#table = table
  }

  /** Runs `cmd` to completion (CommandResult; CommandExitError on a non-zero exit), or with
   * `background: true` resolves at once to its CommandHandle. */
  async run(cmd, opts = {}) {
    opts = opts ?? {}
    if (typeof cmd !== 'string' || cmd.includes('\0')) {
      throw new InvalidArgumentError('cmd must be a string with no NUL byte')
    }
    const handle = await this.#start(cmd, opts)
    return opts.background ? handle : await handle.wait()
  }

  async #start(cmd, opts) {
    const { ms, timeoutS } = timeoutOf(opts)
    const onStdout = checkFunction(opts.onStdout, 'onStdout')
    const onStderr = checkFunction(opts.onStderr, 'onStderr')
    const launch = await launchOptions(this.#box, opts)
    const argv = [...(await this.#box.shell()), cmd]
    const relay = new Relay()
    const process = await this.#box.guard(() =>
      this.#box.machine.spawn(argv, {
        cwd: launch.cwd,
        env: launch.env,
        user: launch.user,
        stdin: Boolean(opts.stdin),
        timeoutS,
        ...relay.callbacks(false),
      }),
    )
    this.#table.remember(process, { cmd: argv[0], args: argv.slice(1), envs: launch.envs, cwd: launch.cwd, pty: false })
    return new CommandHandle(process, relay, {
      onStdout,
      onStderr,
      timeoutMs: ms,
      killed: this.#box.killed,
      keep: this.#box.maxOutputBytes,
    })
  }

  /** Running commands and PTYs of this sandbox. */
  async list() {
    return this.#table.list()
  }

  /** SIGKILL; false when there is no such process (or it already ended). */
  async kill(pid) {
    return this.#table.kill(pid)
  }

  /** Writes to the stdin of a command started with `stdin: true`. */
  async sendStdin(pid, data) {
    const p = await this.#table.known(pid)
    await this.#box.guard(() => stdinWrite(p, data))
  }

  /** Closes the stdin of a command started with `stdin: true`: it reads EOF. */
  async closeStdin(pid) {
    const p = await this.#table.known(pid)
    await this.#box.guard(() => p.end())
  }

  /** A CommandHandle on a running command: its output from now on, `wait()` for its result. */
  async connect(pid, opts = {}) {
    opts = opts ?? {}
    const onStdout = checkFunction(opts.onStdout, 'onStdout')
    const onStderr = checkFunction(opts.onStderr, 'onStderr')
    return this.#table.connect(pid, { onStdout, onStderr })
  }
}

module.exports = { Commands, ProcessTable, launchOptions, timeoutOf, checkFunction }
