'use strict'
// KernSandboxSession: OpenAI Agents' `SandboxSession` on a kern machine. The shell capability's
// exec_command/write_stdin run here (a command still running after yieldTimeMs leaves a session
// id to poll or type into), the filesystem capability's apply_patch goes through createEditor(),
// view_image through viewImage(). Paths are the manifest root's (default /workspace): relative
// ones resolve against it.

const posix = require('node:path').posix
const crypto = require('node:crypto')
const fsp = require('node:fs/promises')
const path = require('node:path')
const {
  DEFAULT_OUTPUT_BYTES,
  checkPath,
  checkCommand,
  checkCount,
  closeMachine,
  isMissing,
  shellQuote,
  statFollow,
} = require('../adapters.js')

/** KernSandboxSession on one copy of agents-core (its CommonJS or its ES build: each has its own
 * error classes and Manifest, and the runtime's instanceof checks need the app's copy).
 * Long only as the class it makes is: each method is short. */
function make({ core, sandbox, internal }) {
  const {
    Manifest,
    SandboxError: AgentsSandboxError,
    SandboxUnsupportedFeatureError,
    SandboxWorkspaceReadNotFoundError,
    SandboxPtySessionNotFoundError,
    SandboxArchiveError,
    SandboxApplyPatchFileNotFoundError,
    DEFAULT_SANDBOX_ARCHIVE_LIMITS,
    resolveSandboxArchiveLimits,
    recordExposedPortEndpoint,
    getRecordedExposedPortEndpoint,
    permissionsForSandboxEntry,
  } = sandbox
  const {
    formatExecResponse,
    truncateOutput,
    elapsedSeconds,
    imageOutputFromBytes,
    assertViewImageByteLength,
    MAX_VIEW_IMAGE_BYTES,
    toUint8Array,
  } = internal
  const { applyDiff } = core

  const DEFAULT_EXEC_YIELD_MS = 10_000
  const DEFAULT_STDIN_YIELD_MS = 250
  /** The longest a model may make one exec/write_stdin call wait, ms. */
  const MAX_YIELD_MS = 5 * 60_000
  const PTY_SIZE = { cols: 120, rows: 40 }

  const sleep = (ms) => new Promise((r) => setTimeout(r, ms).unref?.())

  /** Output of a process started by exec, kept until a call reads it; at most `cap` bytes wait,
   * later output is dropped (and said to be). */
  class PendingOutput {
    constructor(cap) {
      this.cap = cap
      this.all = []
      this.out = []
      this.err = []
      this.size = 0
      this.dropped = 0
    }
    push(kind, buf) {
      if (this.size + buf.length > this.cap) {
        this.dropped += buf.length
        return
      }
      this.size += buf.length
      this.all.push(buf)
      if (kind === 'out') this.out.push(buf)
      else this.err.push(buf)
    }
    take() {
      const text = (parts) => Buffer.concat(parts).toString('utf8')
      let output = text(this.all)
      if (this.dropped)
        output += `\n[${this.dropped} bytes of output dropped: more than ${this.cap} bytes waited unread]\n`
      const r = { output, stdout: text(this.out), stderr: text(this.err) }
      this.all = []
      this.out = []
      this.err = []
      this.size = 0
      this.dropped = 0
      return r
    }
  }

  function yieldMs(v, dflt) {
    if (v === undefined || v === null) return dflt
    return checkCount(Math.trunc(v), 'yieldTimeMs', dflt, { min: 0, max: MAX_YIELD_MS })
  }

  class KernSandboxSession {
    /**
     * @param {{ state: object, machine: object, sandbox?: object, maxOutputBytes?: number,
     *   archiveLimits?: object|null, defaultShell?: string, owned?: boolean }} args
     */
    constructor(args) {
      this.state = args.state
      this._machine = args.machine
      this._sandbox = args.sandbox ?? null
      this._owned = args.owned !== false
      this._maxOutputBytes = args.maxOutputBytes ?? DEFAULT_OUTPUT_BYTES
      this._archiveLimits = args.archiveLimits
      this._defaultShell = args.defaultShell ?? '/bin/sh'
      this._procs = new Map()
      this._nextId = 1
      this._closed = false
      this._preStopHooks = new Set()
    }

    /** The machine this session drives. */
    get machine() {
      return this._machine
    }

    get _root() {
      return this.state.manifest.root
    }

    _path(p) {
      return posix.resolve(this._root, checkPath(p))
    }

    _usable() {
      if (this._closed) throw new AgentsSandboxError('the kern sandbox session is closed', 'workspace_stop_error')
    }

    _env() {
      return this.state.environment ?? {}
    }

    _user(runAs) {
      if (runAs === undefined || runAs === null || runAs === '') return undefined
      if (typeof runAs !== 'string' || !/^[a-z_][a-z0-9_-]*\$?$|^\d+$/i.test(runAs)) {
        throw new SandboxUnsupportedFeatureError(`invalid runAs user ${JSON.stringify(runAs)}`, { runAs })
      }
      return runAs
    }

    // lifecycle ---------------------------------------------------------------------------------

    async start() {
      this._usable()
      await this._machine.mkdir(this._root)
      this.state.workspaceReady = true
    }

    async running() {
      return !this._closed && Boolean(this._machine.alive)
    }

    registerPreStopHook(hook) {
      this._preStopHooks.add(hook)
      return () => this._preStopHooks.delete(hook)
    }

    async runPreStopHooks() {
      const hooks = [...this._preStopHooks]
      this._preStopHooks.clear()
      for (const h of hooks) await h()
    }

    async preStop() {
      await this.runPreStopHooks()
    }

    /** Ends every command this session started; the machine keeps its files. */
    async stop() {
      for (const [id, p] of this._procs) {
        this._procs.delete(id)
        await p.proc.kill('SIGKILL').catch(() => {})
      }
    }

    async shutdown() {
      await this.close()
    }

    async delete() {
      await this.close()
    }

    /** Ends the machine (and the session that holds it, when this session opened it). Idempotent. */
    async close() {
      if (this._closed) return
      await this.runPreStopHooks().catch(() => {})
      await this.stop()
      this._closed = true
      this.state.workspaceReady = false
      if (this._owned) {
        await closeMachine(this._machine, this._sandbox)
      }
      this._onClose?.()
    }

    // commands ----------------------------------------------------------------------------------

    supportsPty() {
      return true
    }

    async exec(args) {
      this._usable()
      const start = Date.now()
      const cmd = checkCommand(args?.cmd)
      const shell = args.shell === undefined ? this._defaultShell : checkPath(args.shell, 'shell')
      const login = args.login ?? true
      const tty = Boolean(args.tty)
      const cwd = args.workdir === undefined ? this._root : this._path(args.workdir)
      const pending = new PendingOutput(this._maxOutputBytes)
      const proc = await this._machine.spawn([shell, login ? '-lc' : '-c', cmd], {
        cwd,
        env: this._env(),
        user: this._user(args.runAs),
        maxOutputBytes: this._maxOutputBytes,
        ...(tty
          ? { pty: PTY_SIZE, onData: (b) => pending.push('out', b) }
          : { onStdout: (b) => pending.push('out', b), onStderr: (b) => pending.push('err', b) }),
      })
      const entry = { proc, pending, tty, done: false, exitCode: null, result: null, handedOut: false }
      entry.exited = proc.wait().then(
        (r) => {
          entry.done = true
          entry.exitCode = r.exitCode
          entry.result = r
        },
        () => {
          entry.done = true
          entry.exitCode = null
        },
      )
      await Promise.race([entry.exited, sleep(yieldMs(args.yieldTimeMs, DEFAULT_EXEC_YIELD_MS))])
      return this._report(entry, start, args.maxOutputTokens)
    }

    _report(entry, start, maxOutputTokens, sessionId) {
      let taken = entry.pending.take()
      // Live callbacks are best-effort; a command that ended before any output was handed out
      // reports the machine's own capture when the callbacks delivered less of it.
      const r = entry.result
      if (r && !entry.handedOut && !r.truncated && !entry.tty) {
        const whole = Buffer.byteLength(r.stdout) + Buffer.byteLength(r.stderr)
        if (whole > Buffer.byteLength(taken.stdout) + Buffer.byteLength(taken.stderr)) {
          taken = { output: r.stdout + r.stderr, stdout: r.stdout, stderr: r.stderr }
        }
      }
      entry.handedOut = true
      const out = truncateOutput(taken.output, maxOutputTokens)
      const base = {
        output: out.text,
        stdout: taken.stdout,
        stderr: taken.stderr,
        wallTimeSeconds: elapsedSeconds(start),
        ...(out.originalTokenCount !== undefined ? { originalTokenCount: out.originalTokenCount } : {}),
      }
      if (entry.done) {
        if (sessionId !== undefined) this._procs.delete(sessionId)
        return { ...base, exitCode: entry.exitCode ?? 1 }
      }
      const id = sessionId ?? this._nextId++
      this._procs.set(id, entry)
      return { ...base, sessionId: id }
    }

    async execCommand(args) {
      return formatExecResponse(await this.exec(args))
    }

    async writeStdin(args) {
      this._usable()
      const start = Date.now()
      const id = args?.sessionId
      const entry = this._procs.get(id)
      if (!entry) throw new SandboxPtySessionNotFoundError(`no running exec session ${id}`, { sessionId: id })
      const chars = args.chars ?? ''
      if (typeof chars !== 'string') throw new SandboxUnsupportedFeatureError('chars must be a string', {})
      if (chars.length > 0) {
        if (!entry.tty) {
          throw new SandboxUnsupportedFeatureError(
            `exec session ${id} has no terminal: start the command with tty=true to type into it`,
            { sessionId: id },
          )
        }
        if (!entry.done) await entry.proc.write(chars).catch(() => {})
      }
      await Promise.race([entry.exited, sleep(yieldMs(args.yieldTimeMs, DEFAULT_STDIN_YIELD_MS))])
      return formatExecResponse(this._report(entry, start, args.maxOutputTokens, id))
    }

    // files -------------------------------------------------------------------------------------

    async readFile(args) {
      this._usable()
      const p = this._path(args?.path)
      const maxBytes = args.maxBytes === undefined ? undefined : checkCount(args.maxBytes, 'maxBytes', undefined)
      try {
        const buf = await this._machine.readFile(p, maxBytes === undefined ? {} : { maxBytes })
        return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength)
      } catch (e) {
        if (isMissing(e)) throw new SandboxWorkspaceReadNotFoundError(`file not found: ${p}`, { path: p })
        throw e
      }
    }

    async listDir(args) {
      this._usable()
      const p = this._path(args?.path)
      let entries
      try {
        entries = await this._machine.list(p, { depth: 1 })
      } catch (e) {
        if (isMissing(e)) throw new SandboxWorkspaceReadNotFoundError(`directory not found: ${p}`, { path: p })
        throw e
      }
      return entries.map((e) => ({
        name: e.name,
        path: e.path,
        type: e.type === 'file' || e.type === 'dir' ? e.type : 'other',
      }))
    }

    async pathExists(p) {
      this._usable()
      return (await statFollow(this._machine, this._path(p))) !== null
    }

    async directoryExists(p) {
      this._usable()
      const e = await statFollow(this._machine, this._path(p))
      return e !== null && e.type === 'dir'
    }

    async viewImage(args) {
      this._usable()
      const p = this._path(args?.path)
      const e = await statFollow(this._machine, p)
      if (e === null) throw new SandboxWorkspaceReadNotFoundError(`image not found: ${p}`, { path: p })
      if (e.type !== 'file') throw new SandboxWorkspaceReadNotFoundError(`${p} is not a file`, { path: p })
      assertViewImageByteLength(p, e.size)
      const bytes = await this.readFile({ path: p, maxBytes: MAX_VIEW_IMAGE_BYTES })
      return imageOutputFromBytes(p, bytes)
    }

    /** apply_patch on the machine's files: V4A diffs applied here, files read and written in the box. */
    createEditor(runAs) {
      this._user(runAs)
      const read = async (p) => {
        try {
          return (await this._machine.readFile(p)).toString('utf8')
        } catch (e) {
          if (isMissing(e)) throw new SandboxApplyPatchFileNotFoundError(`file not found: ${p}`, { path: p })
          throw e
        }
      }
      return {
        createFile: async (op) => {
          this._usable()
          const p = this._path(op.path)
          if ((await statFollow(this._machine, p)) !== null) {
            return { status: 'failed', output: `${op.path} already exists` }
          }
          await this._machine.writeFile(p, applyDiff('', op.diff, 'create'))
          return { status: 'completed', output: `Created ${op.path}` }
        },
        updateFile: async (op) => {
          this._usable()
          const p = this._path(op.path)
          const next = applyDiff(await read(p), op.diff ?? '')
          if (op.moveTo) {
            const to = this._path(op.moveTo)
            await this._machine.writeFile(to, next)
            if (to !== p) await this._machine.remove(p)
            return { status: 'completed', output: `Updated ${op.path}, moved to ${op.moveTo}` }
          }
          await this._machine.writeFile(p, next)
          return { status: 'completed', output: `Updated ${op.path}` }
        },
        deleteFile: async (op) => {
          this._usable()
          const p = this._path(op.path)
          const e = await statFollow(this._machine, p)
          if (e === null) throw new SandboxApplyPatchFileNotFoundError(`file not found: ${p}`, { path: p })
          if (e.type === 'dir') return { status: 'failed', output: `${op.path} is a directory` }
          await this._machine.remove(p)
          return { status: 'completed', output: `Deleted ${op.path}` }
        },
      }
    }

    // manifest ----------------------------------------------------------------------------------

    async materializeEntry(args) {
      this._usable()
      await this._materialize(this._path(args.path), args.entry, args.runAs)
    }

    async applyManifest(manifest, runAs) {
      this._usable()
      const m = manifest instanceof Manifest ? manifest : new Manifest(manifest)
      if (m.users.length || m.groups.length) {
        throw new SandboxUnsupportedFeatureError('kern machines do not create manifest users or groups', {})
      }
      await this._machine.mkdir(m.root)
      for (const [rel, entry] of Object.entries(m.validatedEntries())) {
        await this._materialize(posix.resolve(m.root, rel), entry, runAs)
      }
      this.state.environment = { ...this.state.environment, ...(await m.resolveEnvironment()) }
    }

    async _materialize(at, entry, runAs) {
      const mode = (e, dir) => {
        if (e.permissions === undefined) return undefined
        const m = permissionsForSandboxEntry(e.permissions).toMode() & 0o7777
        return dir ? m | 0o100 : m
      }
      switch (entry.type) {
        case 'file': {
          const data = typeof entry.content === 'string' ? Buffer.from(entry.content) : Buffer.from(entry.content)
          await this._machine.writeFile(at, data, mode(entry) === undefined ? {} : { mode: mode(entry) })
          return
        }
        case 'dir': {
          await this._machine.mkdir(at)
          for (const [name, child] of Object.entries(entry.children ?? {})) {
            await this._materialize(posix.join(at, name), child, runAs)
          }
          if (mode(entry, true) !== undefined) await this._chmod(at, mode(entry, true))
          return
        }
        case 'local_file': {
          // A host path the application (not the model) put in its manifest.
          await this._machine.writeFile(at, await fsp.readFile(entry.src))
          return
        }
        case 'local_dir': {
          await this._machine.mkdir(at)
          const walk = async (src, dst) => {
            for (const d of await fsp.readdir(src, { withFileTypes: true })) {
              const s = path.join(src, d.name)
              const t = posix.join(dst, d.name)
              if (d.isDirectory()) {
                await this._machine.mkdir(t)
                await walk(s, t)
              } else if (d.isFile()) {
                await this._machine.writeFile(t, await fsp.readFile(s), { mode: (await fsp.stat(s)).mode & 0o777 })
              }
            }
          }
          await walk(entry.src, at)
          return
        }
        case 'git_repo': {
          const host = entry.host ?? 'github.com'
          const url = `https://${host}/${entry.repo}.git`
          const tmp = `/tmp/.kern-git-${crypto.randomBytes(6).toString('hex')}`
          const ref = entry.ref ? `--branch ${shellQuote(entry.ref)} ` : ''
          const sub = entry.subpath ? posix.join(tmp, entry.subpath) : tmp
          const r = await this._machine.exec(
            `git clone --depth 1 ${ref}${shellQuote(url)} ${shellQuote(tmp)} && mkdir -p ${shellQuote(at)} && ` +
              `cp -a ${shellQuote(sub)}/. ${shellQuote(at)}/; s=$?; rm -rf ${shellQuote(tmp)}; exit $s`,
            { env: this._env() },
          )
          if (r.exitCode !== 0) {
            throw new AgentsSandboxError(`git clone of ${entry.repo} failed: ${r.stderr.trim()}`, 'git_clone_error', {
              repo: entry.repo,
            })
          }
          return
        }
        default:
          throw new SandboxUnsupportedFeatureError(`kern machines do not mount ${entry.type} entries`, {
            entryType: entry.type,
          })
      }
    }

    async _chmod(p, mode) {
      await this._machine.exec(['chmod', mode.toString(8), p])
    }

    // workspace archive -------------------------------------------------------------------------

    setArchiveLimits(limits) {
      this._archiveLimits = limits
    }

    _limits() {
      return resolveSandboxArchiveLimits(
        this._archiveLimits === undefined ? DEFAULT_SANDBOX_ARCHIVE_LIMITS : this._archiveLimits,
      )
    }

    /** The manifest root as a tar archive (ephemeral entries left out), made in the machine. */
    async persistWorkspace() {
      this._usable()
      const limits = this._limits()
      const tmp = `/tmp/.kern-ws-${crypto.randomBytes(6).toString('hex')}.tar`
      const excludes = [...this.state.manifest.ephemeralEntryPaths()].map((p) => `--exclude=${shellQuote(`./${p}`)}`)
      const r = await this._machine.exec(`tar -C ${shellQuote(this._root)} ${excludes.join(' ')} -cf ${tmp} .`, {
        env: this._env(),
      })
      try {
        if (r.exitCode !== 0) {
          throw new SandboxArchiveError(`could not archive the workspace: ${r.stderr.trim()}`, { root: this._root })
        }
        const buf = await this._machine.readFile(tmp, limits?.maxInputBytes ? { maxBytes: limits.maxInputBytes } : {})
        return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength)
      } finally {
        await this._machine.remove(tmp).catch(() => {})
      }
    }

    /** Unpacks a tar archive into the manifest root, within the archive limits: no member outside
     * the root, no links pointing out, at most maxMembers members and maxExtractedBytes bytes. */
    async hydrateWorkspace(data, options = {}) {
      this._usable()
      const limits =
        options.archiveLimits !== undefined ? resolveSandboxArchiveLimits(options.archiveLimits) : this._limits()
      const bytes = Buffer.from(await toUint8Array(data))
      if (limits?.maxInputBytes && bytes.length > limits.maxInputBytes) {
        throw new SandboxArchiveError(`archive is ${bytes.length} bytes, over ${limits.maxInputBytes}`, {})
      }
      const tmp = `/tmp/.kern-ws-${crypto.randomBytes(6).toString('hex')}.tar`
      await this._machine.writeFile(tmp, bytes)
      try {
        const listing = await this._machine.exec(['tar', '-tvf', tmp], { maxOutputBytes: 64 * 1024 * 1024 })
        if (listing.exitCode !== 0) throw new SandboxArchiveError(`not a tar archive: ${listing.stderr.trim()}`, {})
        const lines = listing.stdout.split('\n').filter(Boolean)
        if (limits?.maxMembers && lines.length > limits.maxMembers) {
          throw new SandboxArchiveError(`archive has ${lines.length} members, over ${limits.maxMembers}`, {})
        }
        let total = 0
        for (const line of lines) {
          const m = /^(\S)\S*\s+\S+\s+(\d+)\s+\S+\s+\S+\s+(.*)$/.exec(line)
          if (!m) throw new SandboxArchiveError(`unreadable archive member: ${line}`, {})
          total += Number(m[2])
          const [name, target] = m[3].split(/ -> | link to /)
          if (name.startsWith('/') || name.split('/').includes('..')) {
            throw new SandboxArchiveError(`archive member outside the workspace: ${name}`, {})
          }
          if ((m[1] === 'l' || m[1] === 'h') && target !== undefined) {
            const resolved = posix.normalize(posix.join(posix.dirname(name), target))
            if (target.startsWith('/') || resolved.startsWith('..')) {
              throw new SandboxArchiveError(`archive link points outside the workspace: ${name} -> ${target}`, {})
            }
          }
        }
        if (limits?.maxExtractedBytes && total > limits.maxExtractedBytes) {
          throw new SandboxArchiveError(`archive unpacks to ${total} bytes, over ${limits.maxExtractedBytes}`, {})
        }
        await this._machine.mkdir(this._root)
        const r = await this._machine.exec(['tar', '-C', this._root, '--no-same-owner', '-xf', tmp])
        if (r.exitCode !== 0) throw new SandboxArchiveError(`could not unpack the archive: ${r.stderr.trim()}`, {})
        this.state.workspaceReady = true
      } finally {
        await this._machine.remove(tmp).catch(() => {})
      }
    }

    // ports -------------------------------------------------------------------------------------

    async resolveExposedPort(port) {
      this._usable()
      const known = getRecordedExposedPortEndpoint(this.state, port)
      if (known) return known
      const e = await this._machine.exposePort(checkCount(port, 'port', undefined, { max: 65535 }))
      return recordExposedPortEndpoint(this.state, { host: e.host, port: e.port, tls: false, url: e.url }, port)
    }
  }

  return { KernSandboxSession }
}

module.exports = { make }
