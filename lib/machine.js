'use strict'
// Machine and Process: one persistent box per Sandbox#machine() call (see src/machine/). Their API
// is documented in index.d.ts; the comments here say how it is done. Options are checked by the
// native side (src/machine/options.rs), but for what only JS can check, in lib/options.js.

const fs = require('node:fs')
const path = require('node:path')
const { SandboxError, coded, callNative } = require('./errors.js')
const {
  optionsBag,
  checkCallback,
  checkSignal,
  bytesOf,
  viewBytes,
  checkPath,
  show,
  isPolicy,
} = require('./options.js')
const { chunkSink, eventSink, cancellable } = require('./calls.js')
const { finishResult, deliver } = require('./results.js')
const { Kernel, kernelLanguage } = require('./kernel.js')

/** An option only this package's own entries pass (kern-sandbox/e2b): IPython-style cells. */
const IPYTHON = Symbol.for('kern-sandbox.ipython')

const AGENT = 'kern-sandbox-agent'

/** Where the in-box agent binary is: $KERN_SANDBOX_AGENT, beside the package (a checkout's build),
 * or in the platform package that also holds the .node file. */
function agentPath() {
  const candidates = []
  if (process.env.KERN_SANDBOX_AGENT) candidates.push(path.resolve(process.env.KERN_SANDBOX_AGENT))
  candidates.push(path.join(__dirname, '..', AGENT))
  for (const libc of ['gnu', 'musl']) {
    try {
      const pkg = require.resolve(`kern-sandbox-linux-${process.arch}-${libc}/package.json`)
      candidates.push(path.join(path.dirname(pkg), AGENT))
    } catch {
      // not installed: the next candidate
    }
  }
  const found = candidates.find((p) => fs.existsSync(p))
  if (!found) {
    throw new SandboxError(
      `machines need the ${AGENT} binary and none was found (looked at ${candidates.join(', ')}); ` +
        'in a checkout, `npm run build` builds it',
    )
  }
  return found
}

/** A command as an argv: a string runs through the image's /bin/sh. */
function argvOf(command) {
  if (typeof command === 'string') {
    if (command === '') throw coded('ERR_INVALID_OPTION', 'the command is an empty string')
    return ['/bin/sh', '-c', command]
  }
  if (!Array.isArray(command) || command.length === 0) {
    throw coded('ERR_INVALID_OPTION', `a command is a string or a non-empty argv array, got ${show(command)}`)
  }
  for (let i = 0; i < command.length; i++) {
    if (typeof command[i] !== 'string') {
      throw coded('ERR_INVALID_OPTION', `argv[${i}] must be a string, got ${show(command[i])}`)
    }
  }
  return command
}

/** What exec and spawn share, for the native side to check (cwd's type aside: a TypeError). */
function processOptions(opts) {
  if (opts.cwd != null) checkPath('cwd', opts.cwd)
  const { cwd, env, pty, timeoutS, maxOutputBytes, user } = opts
  return { cwd: cwd ?? undefined, env, pty, timeoutS, maxOutputBytes, user }
}

function callbacks(opts, names) {
  for (const n of names) checkCallback(n, opts[n])
  return names.map((n) => chunkSink(opts[n]))
}

class Process {
  #native
  #sub
  #waiting = null
  #fields

  constructor(native, pid, sub, fields) {
    this.#native = native
    this.#sub = sub
    this.#fields = fields
    Object.defineProperty(this, 'pid', { value: pid, enumerable: true })
  }

  get exitCode() {
    try {
      return this.#native.exitCode(this.pid)
    } catch {
      return null
    }
  }

  async write(data) {
    await callNative(() => this.#native.write(this.pid, bytesOf(data)))
  }

  async end() {
    await callNative(() => this.#native.closeStdin(this.pid))
  }

  async kill(signal) {
    return await callNative(() => this.#native.kill(this.pid, signal))
  }

  async resize(size) {
    await callNative(() => this.#native.resize(this.pid, size))
  }

  wait() {
    this.#waiting ??= callNative(() => this.#native.wait(this.pid)).then((r) => finishResult(r))
    return this.#waiting
  }

  detach() {
    if (this.#sub !== null) this.#native.detach(this.pid, this.#sub)
    this.#sub = null
  }

  toJSON() {
    return { pid: this.pid, exitCode: this.exitCode, ...this.#fields }
  }
}

class Machine {
  #native
  #sandbox
  #cancel
  #closed = false
  #network
  #removeSnapshot

  constructor(native, sandbox, cancel, network, removeSnapshot) {
    this.#native = native
    this.#sandbox = sandbox
    this.#cancel = cancel
    this.#network = network
    this.#removeSnapshot = removeSnapshot
  }

  /** The machine's network as given: `false`, `true` or its current policy. */
  get network() {
    return this.#network
  }

  async updateNetwork(policy) {
    if (!isPolicy(policy)) {
      throw coded('ERR_BAD_NETWORK_POLICY', `network: expected a network policy object, got ${show(policy)}`)
    }
    callNative(() => this.#native.updateNetwork(policy))
    this.#network = policy
  }

  get name() {
    return this.#native.name
  }

  get alive() {
    return !this.#closed && this.#native.alive
  }

  get workdir() {
    return this.#native.workdir
  }

  async exec(command, opts = {}) {
    opts = optionsBag('exec', opts)
    const argv = argvOf(command)
    const native = { ...processOptions(opts), stdin: viewBytes(opts.stdin) }
    const signal = checkSignal(opts.signal)
    const [out, err] = callbacks(opts, ['onStdout', 'onStderr'])
    const r = await cancellable(signal, this.#cancel, (callId) =>
      this.#native.exec(argv, { ...native, callId }, out, err),
    )
    return finishResult(r)
  }

  async spawn(command, opts = {}) {
    opts = optionsBag('spawn', opts)
    const argv = argvOf(command)
    const native = { ...processOptions(opts), stdin: opts.stdin }
    const signal = checkSignal(opts.signal)
    if (signal && signal.aborted) throw signal.reason
    const [out, err, data] = callbacks(opts, ['onStdout', 'onStderr', 'onData'])
    const { pid, sub } = await callNative(() => this.#native.spawn(argv, native, out, err, data))
    const p = new Process(this.#native, pid, sub, { command: argv[0], args: argv.slice(1), pty: opts.pty != null })
    if (signal) signal.addEventListener('abort', () => p.kill().catch(() => {}), { once: true })
    return p
  }

  async processes() {
    return this.#native.processes().map((p) => ({
      pid: p.pid,
      command: p.argv[0],
      args: p.argv.slice(1),
      cwd: p.cwd,
      pty: p.pty,
    }))
  }

  async attach(pid, opts = {}) {
    opts = optionsBag('attach', opts)
    if (!Number.isInteger(pid) || pid <= 0) throw coded('ERR_INVALID_OPTION', `pid must be a positive integer`)
    const [out, err, data] = callbacks(opts, ['onStdout', 'onStderr', 'onData'])
    const sub = callNative(() => this.#native.attach(pid, out, err, data))
    const info = this.#native.processes().find((p) => p.pid === pid)
    const fields = info ? { command: info.argv[0], args: info.argv.slice(1), pty: info.pty } : {}
    return new Process(this.#native, pid, sub, fields)
  }

  async readFile(p, opts = {}) {
    checkPath('path', p)
    const maxBytes = optionsBag('readFile', opts).maxBytes
    return await callNative(() => this.#native.readFile(p, maxBytes))
  }

  async writeFile(p, data, opts = {}) {
    checkPath('path', p)
    const { mode, owner, xattrs, clearXattrs } = optionsBag('writeFile', opts)
    checkOwner(owner)
    if (xattrs != null && (typeof xattrs !== 'object' || Array.isArray(xattrs) || !isStringRecord(xattrs))) {
      throw new TypeError(`xattrs must be an object of strings, got ${show(xattrs)}`)
    }
    if (clearXattrs != null && typeof clearXattrs !== 'string') {
      throw new TypeError(`clearXattrs must be a string, got ${show(clearXattrs)}`)
    }
    await callNative(() =>
      this.#native.writeFile(p, bytesOf(data), mode, {
        owner: owner ?? undefined,
        xattrs: xattrs ?? undefined,
        clearXattrs: clearXattrs ?? undefined,
      }),
    )
  }

  async list(p, opts = {}) {
    checkPath('path', p)
    const depth = optionsBag('list', opts).depth
    return JSON.parse(await callNative(() => this.#native.list(p, depth))).map(entry)
  }

  async stat(p) {
    checkPath('path', p)
    return entry(JSON.parse(await callNative(() => this.#native.stat(p))))
  }

  async remove(p) {
    checkPath('path', p)
    await callNative(() => this.#native.remove(p))
  }

  async rename(from, to) {
    checkPath('from', from)
    checkPath('to', to)
    await callNative(() => this.#native.rename(from, to))
  }

  async mkdir(p, opts = {}) {
    checkPath('path', p)
    const { owner } = optionsBag('mkdir', opts)
    checkOwner(owner)
    return await callNative(() => this.#native.mkdir(p, owner ?? null))
  }

  async watch(p, onEvent, opts = {}) {
    checkPath('path', p)
    if (typeof onEvent !== 'function') throw new TypeError('onEvent must be a function')
    const recursive = !!optionsBag('watch', opts).recursive
    let open = true
    const forward = (text) => {
      if (open) deliver(onEvent, JSON.parse(text))
    }
    const id = await callNative(() => this.#native.watch(p, recursive, forward))
    const native = this.#native
    return {
      async close() {
        if (!open) return
        open = false
        await callNative(() => native.unwatch(id)).catch((e) => {
          if (e.code !== 'ERR_MACHINE_GONE') throw e
        })
      },
    }
  }

  async exposePort(port) {
    const host = await callNative(() => this.#native.exposePort(port))
    return { host: '127.0.0.1', port: host, url: `http://127.0.0.1:${host}`, machinePort: port }
  }

  async metrics() {
    const m = JSON.parse(await callNative(() => this.#native.metrics()))
    return {
      cpuPercent: m.cpuPercent,
      memoryBytes: m.memoryBytes,
      memoryLimitBytes: m.memoryLimitBytes ?? null,
      pids: m.pids,
      diskBytes: m.diskBytes ?? null,
    }
  }

  // The driver runs as a process of the machine; the Kernel class serves it as any other.
  async kernel(opts = {}) {
    opts = optionsBag('kernel', opts)
    if (opts.image != null) {
      throw coded(
        'ERR_INVALID_OPTION',
        "a machine's kernel runs in the machine's own image; image is not an option here",
      )
    }
    const language = kernelLanguage(opts.language ?? 'python')
    const ipython = opts[IPYTHON] === true
    const native = await callNative(() => this.#native.kernel(opts.timeoutS, language.native, ipython))
    return new Kernel(native, this.#sandbox, this.#cancel, language)
  }

  // Pause and lifetime: src/machine/freeze.rs and lifetime.rs.
  async pause() {
    await callNative(() => this.#native.pause())
  }

  async resume() {
    await callNative(() => this.#native.resume())
  }

  get paused() {
    return this.#native.paused
  }

  async setTimeout(seconds) {
    callNative(() => this.#native.setTimeout(seconds))
  }

  get endsAt() {
    const ms = this.#native.endsAt
    return ms == null ? null : new Date(ms)
  }

  async snapshot(opts = {}) {
    const { name } = optionsBag('snapshot', opts)
    const info = await callNative(() => this.#native.snapshot(agentPath(), name ?? undefined))
    return new MachineSnapshot(info, this.#removeSnapshot)
  }

  async fork(opts = {}) {
    const { count } = optionsBag('fork', opts)
    const natives = await callNative(() => this.#native.fork(agentPath(), count ?? undefined))
    // A policy of this machine's own goes to each fork (a proxy of its own, with a copy of it).
    const network = this.#network !== null && typeof this.#network === 'object' ? this.#network : this.#sandbox.network
    return natives.map((n) => new Machine(n, this.#sandbox, this.#cancel, network, this.#removeSnapshot))
  }

  async close() {
    this.#closed = true
    await this.#native.close()
  }

  async [Symbol.asyncDispose]() {
    await this.close()
  }
}

/** A machine snapshot in the store (see index.d.ts): its fields, and delete(). */
class MachineSnapshot {
  #remove

  /** `remove(id)` deletes it from the store (the native session's deleteSnapshot). */
  constructor(info, remove) {
    this.#remove = remove
    this.id = info.id
    this.name = info.name ?? null
    this.image = info.image
    this.createdAt = new Date(info.createdAt)
    this.sizeBytes = info.sizeBytes
  }

  async delete() {
    await this.#remove(this.id)
  }

  toJSON() {
    const { id, name, image, createdAt, sizeBytes } = this
    return { id, name, image, createdAt, sizeBytes }
  }
}

/** `from` as the native side takes it: a snapshot's id or name. */
function snapshotKey(from) {
  if (from instanceof MachineSnapshot) return from.id
  if (typeof from === 'object' && from !== null && typeof from.id === 'string') return from.id
  return from
}

/** An agent entry in the shape index.d.ts gives MachineEntry. */
function entry(e) {
  return {
    name: e.name,
    path: e.path,
    type: e.type,
    size: e.size,
    mode: e.mode,
    mtime: e.mtime,
    symlinkTarget: e.symlinkTarget ?? null,
    owner: e.owner,
    group: e.group,
    xattrs: e.xattrs ?? {},
  }
}

/** writeFile's and mkdir's `owner`: a user name or uid of the box, as a string. */
function checkOwner(owner) {
  if (owner != null && (typeof owner !== 'string' || owner === '' || owner.includes('\0'))) {
    throw new TypeError(`owner must be a user name or uid (a non-empty string), got ${show(owner)}`)
  }
}

function isStringRecord(o) {
  return Object.values(o).every((v) => typeof v === 'string')
}

/** Sandbox#machine(): the native side checks the options, starts the box and exposes the ports
 * asked for. */
async function openMachine(sandbox, nativeSandbox, opts) {
  const { image, ports, timeoutS, network, onRequest, lifetimeS, onTimeout, from } = optionsBag('machine', opts)
  checkCallback('onRequest', onRequest)
  const agent = agentPath()
  // Without its own, the native side gives it the session's onRequest.
  const events = eventSink(onRequest)
  const native = await callNative(() =>
    nativeSandbox.machine(
      agent,
      { image, ports, timeoutS, network, lifetimeS, onTimeout, from: snapshotKey(from) },
      events,
    ),
  )
  const removeSnapshot = (id) => callNative(() => nativeSandbox.deleteSnapshot(id))
  return new Machine(native, sandbox, (id) => nativeSandbox.cancel(id), network ?? sandbox.network, removeSnapshot)
}

module.exports = { Machine, MachineSnapshot, Process, openMachine, agentPath }
