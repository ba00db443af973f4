'use strict'
// sandbox.pty: E2B's pseudo-terminals, each a login shell on a PTY of the sandbox's machine.

const { InvalidArgumentError } = require('./errors.js')
const { CommandHandle, Relay, stdinWrite } = require('./handle.js')
const { launchOptions, timeoutOf, checkFunction } = require('./commands.js')

/** The largest terminal side accepted (a PTY's size is 16 bits a side). */
const MAX_SIDE = 0xffff

function checkSize(size) {
  if (size == null || typeof size !== 'object') throw new InvalidArgumentError('size must be { cols, rows }')
  for (const k of ['cols', 'rows']) {
    const v = size[k]
    if (!Number.isInteger(v) || v < 1 || v > MAX_SIDE) {
      throw new InvalidArgumentError(`${k} must be an integer from 1 to ${MAX_SIDE}, got ${String(v)}`)
    }
  }
  return { cols: size.cols, rows: size.rows }
}

class Pty {
  #box
  #table

  constructor(box, table) {
    this.#box = box
    this.#table = table
  }

  /** Starts a login shell on a new PTY (`timeoutMs` 60 s by default, as E2B's; 0 for none).
   * Its output reaches `onData` as bytes. */
  async create(opts) {
    if (opts == null || typeof opts !== 'object')
      throw new InvalidArgumentError('pty.create needs { cols, rows, onData }')
    const size = checkSize(opts)
    const onPty = checkFunction(opts.onData, 'onData')
    const { ms, timeoutS } = timeoutOf(opts)
    const launch = await launchOptions(this.#box, opts)
    const shell = await this.#box.shell()
    const argv = shell[0] === '/bin/bash' ? ['/bin/bash', '-i', '-l'] : ['/bin/sh', '-i']
    const relay = new Relay()
    const process = await this.#box.guard(() =>
      this.#box.machine.spawn(argv, {
        cwd: launch.cwd,
        env: { TERM: 'xterm-256color', ...launch.env },
        user: launch.user,
        pty: size,
        timeoutS,
        ...relay.callbacks(true),
      }),
    )
    this.#table.remember(process, { cmd: argv[0], args: argv.slice(1), envs: launch.envs, cwd: launch.cwd, pty: true })
    return new CommandHandle(process, relay, { onPty, pty: true, timeoutMs: ms, killed: this.#box.killed })
  }

  /** A handle on a running PTY: its output from now on reaches `onData`. */
  async connect(pid, opts = {}) {
    const onPty = checkFunction(opts?.onData, 'onData')
    return this.#table.connect(pid, { onPty })
  }

  /** Types `data` into the PTY. */
  async sendInput(pid, data) {
    if (!(data instanceof Uint8Array)) throw new InvalidArgumentError('data must be a Uint8Array')
    const p = await this.#table.known(pid)
    await this.#box.guard(() => stdinWrite(p, data))
  }

  /** Resizes the PTY (its programs get SIGWINCH). */
  async resize(pid, size) {
    const s = checkSize(size)
    const p = await this.#table.known(pid)
    await this.#box.guard(() => p.resize(s))
  }

  /** SIGKILL; false when there is no such PTY. */
  async kill(pid) {
    return this.#table.kill(pid)
  }
}

module.exports = { Pty }
