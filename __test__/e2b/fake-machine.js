'use strict'
// kern-sandbox/e2b's copy of the adapters' fake machine (../adapters/fake-machine.js), with a
// workdir below a top-level dir (/home/user). A stand-in for `Machine` (the contract of issue 25)
// until machines land. It is NOT a sandbox: commands run on the host under bubblewrap with the
// host's root read-only, the session's workspace bound at /workspace and a private /tmp, on the
// host's network (so an exposed port is the same port on 127.0.0.1). File calls map machine paths
// the same way: /workspace and /tmp to their host dirs, anything else read-only from the host root.
// Kernels are the session's own warm kernels (their box sees the same workspace).
//
// Only the harness (harness.js) installs it, as `Sandbox.prototype.machine`, when the test asks
// for the fake; the same test bodies run on the real machine when it exists.

const fs = require('node:fs')
const fsp = require('node:fs/promises')
const os = require('node:os')
const path = require('node:path')
const cp = require('node:child_process')
const { SandboxError } = require('../..')

const IMAGE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'

function sbxError(code, message) {
  const e = new SandboxError(message)
  e.code = code
  return e
}

function fsError(e, p) {
  const map = {
    ENOENT: 'ERR_NOT_FOUND',
    ENOTDIR: 'ERR_NOT_A_DIRECTORY',
    EISDIR: 'ERR_IS_A_DIRECTORY',
    EEXIST: 'ERR_EXISTS',
  }
  return sbxError(
    map[e.code] || 'ERR_SANDBOX',
    `${p}: ${e.code === 'ENOENT' ? 'no such file or directory' : e.message}`,
  )
}

function checkPath(p) {
  if (typeof p !== 'string' || p === '' || p.includes('\0')) {
    throw sbxError('ERR_INVALID_ARGUMENT', `invalid path ${JSON.stringify(p)}`)
  }
}

class FakeResult {
  constructor(fields) {
    Object.assign(this, fields)
  }
  get success() {
    return this.exitCode === 0 && this.fault === null
  }
}

class Capture {
  constructor(max) {
    this.max = max
    this.chunks = []
    this.size = 0
    this.truncated = false
  }
  push(b) {
    const room = this.max - this.size
    if (room <= 0) {
      if (b.length) this.truncated = true
      return
    }
    const part = b.length > room ? b.subarray(0, room) : b
    if (part.length < b.length) this.truncated = true
    this.chunks.push(part)
    this.size += part.length
  }
  text() {
    return Buffer.concat(this.chunks).toString('utf8')
  }
}

class FakeProcess {
  constructor(machine, child, info, opts) {
    this._machine = machine
    this._child = child
    this.pid = child.pid
    this.exitCode = null
    this._info = info
    this._listeners = new Set()
    this._stdinOpen = Boolean(opts.stdinOpen)
    this._out = new Capture(opts.maxOutputBytes)
    this._err = new Capture(opts.maxOutputBytes)
    this._fault = null
    this._started = Date.now()
    const handle = { onStdout: opts.onStdout, onStderr: opts.onStderr, onData: opts.onData }
    this._listeners.add(handle)
    this._own = handle
    child.stdout.on('data', (b) => {
      this._out.push(b)
      for (const l of this._listeners) {
        l.onStdout?.(b)
        l.onData?.(b)
      }
    })
    child.stderr.on('data', (b) => {
      ;(info.pty ? this._out : this._err).push(b)
      for (const l of this._listeners) {
        ;(info.pty ? l.onStdout : l.onStderr)?.(b)
        l.onData?.(b)
      }
    })
    child.stdin.on('error', () => {})
    this._done = new Promise((resolve) => {
      child.on('close', (code, signal) => {
        this.exitCode = code ?? 128 + (os.constants.signals[signal] || 9)
        clearTimeout(this._timer)
        machine._procs.delete(this.pid)
        resolve(
          new FakeResult({
            stdout: this._out.text(),
            stderr: this._err.text(),
            exitCode: this.exitCode,
            durationMs: Date.now() - this._started,
            fault: this._fault,
            files: [],
            truncated: this._out.truncated || this._err.truncated,
            results: [],
            error: null,
          }),
        )
      })
    })
    if (opts.timeoutS) {
      this._timer = setTimeout(() => {
        this._fault = { type: 'timeout', message: `timed out after ${opts.timeoutS}s` }
        this._signal('SIGKILL')
      }, opts.timeoutS * 1000)
    }
  }
  _signal(sig) {
    try {
      process.kill(-this._child.pid, sig)
      return true
    } catch {
      return false
    }
  }
  async write(data) {
    if (this.exitCode !== null) throw sbxError('ERR_PROCESS_EXITED', `process ${this.pid} has exited`)
    if (!this._stdinOpen) throw sbxError('ERR_STDIN_CLOSED', `stdin of process ${this.pid} is closed`)
    await new Promise((resolve, reject) => this._child.stdin.write(data, (e) => (e ? reject(e) : resolve())))
  }
  async end() {
    if (!this._stdinOpen) return
    this._stdinOpen = false
    if (this._info.pty) this._child.stdin.write('\x04')
    this._child.stdin.end()
  }
  async kill(signal = 'SIGKILL') {
    if (this.exitCode !== null) return false
    return this._signal(signal)
  }
  async resize(size) {
    if (!this._info.pty) throw sbxError('ERR_INVALID_ARGUMENT', 'not a PTY process')
    if (!(size.cols > 0 && size.rows > 0)) throw sbxError('ERR_INVALID_ARGUMENT', 'bad size')
  }
  wait() {
    return this._done
  }
  detach() {
    this._listeners.delete(this._own)
  }
}

class FakeMachine {
  constructor(sbx) {
    this._sbx = sbx
    this.name = `fake-${process.pid}-${Math.random().toString(16).slice(2, 8)}`
    // The session's own options are public properties of a Sandbox.
    this.workdir = sbx.boxWorkspace || '/workspace'
    this._sessionEnv = sbx.env || {}
    this._timeoutS = sbx.timeoutS || 30
    this._maxOutputBytes = sbx.maxOutputBytes || 10 * 1024 * 1024
    this._ws = sbx.workspacePath
    this._tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kst-fake-machine-'))
    this._procs = new Map()
    this._ports = new Map()
    this._kernels = []
    this.alive = true
  }

  _check() {
    if (!this.alive) throw sbxError('ERR_MACHINE_GONE', 'the machine was closed')
  }

  /** A machine path's host path. */
  _host(p) {
    checkPath(p)
    const abs = path.posix.resolve(this.workdir, p)
    for (const [at, host] of [
      [this.workdir, this._ws],
      ['/tmp', this._tmp],
    ]) {
      if (abs === at) return host
      if (abs.startsWith(at + '/')) return path.join(host, abs.slice(at.length + 1))
    }
    return abs
  }

  _writable(p) {
    const abs = path.posix.resolve(this.workdir, p)
    const ok = [this.workdir, '/tmp'].some((at) => abs === at || abs.startsWith(at + '/'))
    if (!ok) throw sbxError('ERR_SANDBOX', `${abs}: read-only file system (fake machine)`)
  }

  _argv(command, cwd, pty) {
    const inner = typeof command === 'string' ? ['/bin/sh', '-c', command] : command
    const run = pty
      ? ['script', '-qfec', inner.map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' '), '/dev/null']
      : inner
    // A tmpfs root with the host's top-level dirs bound read-only, so /workspace can be made.
    const root = []
    for (const n of fs.readdirSync('/')) {
      const at = `/${n}`
      // The top-level dir holding the workdir (/home for /home/user) stays the tmpfs's, so bwrap
      // can make the workdir's mount point in it.
      if (['proc', 'dev', 'tmp', 'sys', 'run'].includes(n) || at === this.workdir || this.workdir.startsWith(`${at}/`))
        continue
      const st = fs.lstatSync(at)
      if (st.isSymbolicLink()) root.push('--symlink', fs.readlinkSync(at), at)
      else if (st.isDirectory()) root.push('--ro-bind', at, at)
    }
    return [
      'bwrap',
      '--tmpfs',
      '/',
      ...root,
      '--bind',
      this._ws,
      this.workdir,
      '--bind',
      this._tmp,
      '/tmp',
      '--dev',
      '/dev',
      '--proc',
      '/proc',
      '--chdir',
      cwd,
      '--die-with-parent',
      '--',
      ...run,
    ]
  }

  _start(command, opts, extra) {
    this._check()
    if (typeof command === 'string' ? command === '' : !Array.isArray(command) || command.length === 0) {
      throw sbxError('ERR_INVALID_ARGUMENT', 'empty command')
    }
    const cwd = path.posix.resolve(this.workdir, opts.cwd ?? '.')
    const hostCwd = this._host(cwd)
    if (!fs.existsSync(hostCwd)) throw sbxError('ERR_NOT_FOUND', `${cwd}: no such directory`)
    const env = {
      PATH: IMAGE_PATH,
      LANG: 'C.UTF-8',
      HOME: '/root',
      // Marks every process of this machine, so close() can end the ones a command left behind.
      KERN_FAKE_MACHINE: this.name,
      ...(extra.pty ? { TERM: 'xterm-256color' } : {}),
      ...this._sessionEnv,
      ...opts.env,
    }
    const argv = this._argv(command, cwd, extra.pty)
    const child = cp.spawn(argv[0], argv.slice(1), { env, detached: true, stdio: 'pipe' })
    const info = {
      pid: child.pid,
      command: typeof command === 'string' ? '/bin/sh' : command[0],
      args: typeof command === 'string' ? ['-c', command] : command.slice(1),
      cwd,
      pty: Boolean(extra.pty),
    }
    const proc = new FakeProcess(this, child, info, {
      stdinOpen: extra.stdinOpen,
      maxOutputBytes: opts.maxOutputBytes ?? this._maxOutputBytes,
      timeoutS: opts.timeoutS,
      onStdout: opts.onStdout,
      onStderr: opts.onStderr,
      onData: opts.onData,
    })
    this._procs.set(child.pid, proc)
    if (opts.signal) {
      const abort = () => proc.kill('SIGKILL')
      if (opts.signal.aborted) abort()
      else {
        opts.signal.addEventListener('abort', abort, { once: true })
        proc.wait().then(() => opts.signal.removeEventListener('abort', abort))
      }
    }
    return proc
  }

  async exec(command, opts = {}) {
    opts.signal?.throwIfAborted()
    const proc = this._start(command, { timeoutS: this._timeoutS, ...opts }, { stdinOpen: true })
    const started = new Promise((resolve, reject) => {
      proc._child.once('spawn', resolve)
      proc._child.once('error', reject)
    })
    await started
    if (opts.stdin !== undefined) await proc.write(opts.stdin).catch(() => {})
    await proc.end()
    const r = await proc.wait()
    if (opts.signal?.aborted) throw opts.signal.reason
    return r
  }

  async spawn(command, opts = {}) {
    opts.signal?.throwIfAborted()
    const pty = opts.pty
    if (pty && !(pty.cols > 0 && pty.rows > 0)) throw sbxError('ERR_INVALID_ARGUMENT', 'bad pty size')
    const proc = this._start(command, opts, { stdinOpen: Boolean(opts.stdin || pty), pty })
    await new Promise((resolve, reject) => {
      proc._child.once('spawn', resolve)
      proc._child.once('error', reject)
    })
    if (!opts.stdin && !pty) proc._child.stdin.end()
    return proc
  }

  async processes() {
    this._check()
    return [...this._procs.values()].filter((p) => p.exitCode === null).map((p) => ({ ...p._info }))
  }

  async attach(pid, opts = {}) {
    this._check()
    const proc = this._procs.get(pid)
    if (!proc) throw sbxError('ERR_PROCESS_NOT_FOUND', `no process ${pid}`)
    const handle = Object.create(proc)
    const l = { onStdout: opts.onStdout, onStderr: opts.onStderr, onData: opts.onData }
    proc._listeners.add(l)
    handle.detach = () => proc._listeners.delete(l)
    return handle
  }

  async readFile(p, opts = {}) {
    this._check()
    const host = this._host(p)
    try {
      const st = await fsp.stat(host)
      if (st.isDirectory()) throw sbxError('ERR_IS_A_DIRECTORY', `${p}: is a directory`)
      if (opts.maxBytes !== undefined && st.size > opts.maxBytes) {
        throw sbxError('ERR_SANDBOX', `${p}: ${st.size} bytes is over maxBytes ${opts.maxBytes}`)
      }
      return await fsp.readFile(host)
    } catch (e) {
      throw e instanceof SandboxError ? e : fsError(e, p)
    }
  }

  async writeFile(p, data, opts = {}) {
    this._check()
    this._writable(p)
    const host = this._host(p)
    try {
      const st = await fsp.stat(host).catch(() => null)
      if (st && st.isDirectory()) throw sbxError('ERR_IS_A_DIRECTORY', `${p}: is a directory`)
      await fsp.mkdir(path.dirname(host), { recursive: true })
      await fsp.writeFile(host, data)
      if (opts.mode !== undefined) await fsp.chmod(host, opts.mode)
    } catch (e) {
      throw e instanceof SandboxError ? e : fsError(e, p)
    }
  }

  async _entry(abs, host) {
    const st = await fsp.lstat(host)
    const type = st.isFile() ? 'file' : st.isDirectory() ? 'dir' : st.isSymbolicLink() ? 'symlink' : 'other'
    return {
      name: path.posix.basename(abs) || '/',
      path: abs,
      type,
      size: st.size,
      mode: st.mode,
      mtime: st.mtimeMs,
      symlinkTarget: type === 'symlink' ? await fsp.readlink(host) : null,
      owner: st.uid === 0 ? 'root' : String(st.uid),
      group: st.gid === 0 ? 'root' : String(st.gid),
    }
  }

  async list(p, opts = {}) {
    this._check()
    const depth = opts.depth ?? 1
    const abs = path.posix.resolve(this.workdir, p)
    const out = []
    const walk = async (dirAbs, level) => {
      let names
      try {
        names = await fsp.readdir(this._host(dirAbs))
      } catch (e) {
        throw fsError(e, dirAbs)
      }
      for (const n of names.sort()) {
        const childAbs = path.posix.join(dirAbs, n)
        const e = await this._entry(childAbs, this._host(childAbs))
        out.push(e)
        if (e.type === 'dir' && level < depth) await walk(childAbs, level + 1)
      }
    }
    await walk(abs, 1)
    return out
  }

  async stat(p) {
    this._check()
    const abs = path.posix.resolve(this.workdir, p)
    try {
      return await this._entry(abs, this._host(abs))
    } catch (e) {
      throw fsError(e, abs)
    }
  }

  async remove(p) {
    this._check()
    this._writable(p)
    const host = this._host(p)
    try {
      await fsp.lstat(host)
      await fsp.rm(host, { recursive: true, force: true })
    } catch (e) {
      throw fsError(e, p)
    }
  }

  async rename(from, to) {
    this._check()
    this._writable(from)
    this._writable(to)
    try {
      await fsp.rename(this._host(from), this._host(to))
    } catch (e) {
      throw fsError(e, from)
    }
  }

  async mkdir(p) {
    this._check()
    this._writable(p)
    const host = this._host(p)
    const st = await fsp.stat(host).catch(() => null)
    if (st) {
      if (!st.isDirectory()) throw sbxError('ERR_NOT_A_DIRECTORY', `${p}: not a directory`)
      return false
    }
    try {
      await fsp.mkdir(host, { recursive: true })
    } catch (e) {
      throw fsError(e, p)
    }
    return true
  }

  async watch(p, onEvent, opts = {}) {
    this._check()
    const abs = path.posix.resolve(this.workdir, p)
    const host = this._host(abs)
    const st = await fsp.stat(host).catch((e) => {
      throw fsError(e, abs)
    })
    if (!st.isDirectory()) throw sbxError('ERR_NOT_A_DIRECTORY', `${abs}: not a directory`)
    const w = fs.watch(host, { recursive: Boolean(opts.recursive) }, (kind, name) => {
      if (name) onEvent({ type: kind === 'rename' ? 'create' : 'write', path: path.posix.join(abs, name) })
    })
    return { close: async () => w.close() }
  }

  async exposePort(port) {
    this._check()
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      throw sbxError('ERR_INVALID_ARGUMENT', `invalid port ${port}`)
    }
    // The fake shares the host's network: the machine's port is the host's.
    const e = { host: '127.0.0.1', port, url: `http://127.0.0.1:${port}`, machinePort: port }
    this._ports.set(port, e)
    return e
  }

  async metrics() {
    this._check()
    return { cpuPercent: 0, memoryBytes: 0, memoryLimitBytes: null, pids: this._procs.size, diskBytes: null }
  }

  async kernel(opts = {}) {
    this._check()
    const k = await this._sbx.kernel(opts)
    this._kernels.push(k)
    return k
  }

  /** Processes a command started and left running (a real machine ends them with its box). */
  _killLeftovers() {
    const mark = Buffer.from(`KERN_FAKE_MACHINE=${this.name}\0`)
    for (const pid of fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
      try {
        if (fs.readFileSync(`/proc/${pid}/environ`).includes(mark)) process.kill(Number(pid), 'SIGKILL')
      } catch {
        /* gone, or not ours */
      }
    }
  }

  async close() {
    if (!this.alive) return
    this.alive = false
    for (const p of this._procs.values()) await p.kill('SIGKILL')
    await Promise.all([...this._procs.values()].map((p) => p.wait()))
    for (const k of this._kernels) await k.close()
    this._killLeftovers()
    fs.rmSync(this._tmp, { recursive: true, force: true })
  }

  [Symbol.asyncDispose]() {
    return this.close()
  }
}

/** `sbx.machine()` of the fake: a FakeMachine on the session's workspace. */
async function fakeMachine(sbx, opts = {}) {
  const m = new FakeMachine(sbx)
  for (const port of opts.ports ?? []) await m.exposePort(port)
  const closeSbx = sbx.close.bind(sbx)
  // sbx.close() closes its machines, as the contract says.
  sbx.close = async () => {
    await m.close()
    return closeSbx()
  }
  return m
}

module.exports = { fakeMachine, FakeMachine }
