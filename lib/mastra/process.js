'use strict'
// The process manager of KernSandbox: Mastra's SandboxProcessManager/ProcessHandle over machine
// processes. Mastra's base classes keep the output (bounded by maxRetainedBytes), merge the
// sandbox's env overlay, start the sandbox lazily and kill on abort; this adds the machine.

const { StringDecoder } = require('node:string_decoder')
const posix = require('node:path').posix
const { checkCommand, checkEnv, checkPath } = require('../adapters.js')

/** The classes on one copy of @mastra/core/workspace (its CommonJS or its ES build: each has its
 * own base classes, and Mastra's instanceof checks need ours to extend the copy the app uses).
 * Long only as the class it makes is: each method is short. */
function make({ SandboxProcessManager, ProcessHandle }) {
  class KernProcessHandle extends ProcessHandle {
    constructor(proc, options, started, wiring) {
      super(options)
      this._wiring = wiring
      this.pid = String(proc.pid)
      this.exitCode = undefined
      this._proc = proc
      this._stdinOpen = options.stdinMode !== 'ignore'
      let timedOut = false
      const timer =
        options.timeout > 0
          ? setTimeout(() => {
              timedOut = true
              proc.kill('SIGKILL').catch(() => {})
            }, options.timeout)
          : undefined
      this._done = proc.wait().then(
        (r) => {
          clearTimeout(timer)
          this._flush()
          const killed = r.exitCode > 128 || r.fault !== null
          if (timedOut) {
            this.emitStderr(`\nProcess timed out after ${options.timeout}ms`)
            this.exitCode = 124
          } else {
            this.exitCode = r.exitCode
          }
          // Live callbacks are best-effort: with all output retained (executeCommand), the machine's
          // own capture is the complete one whenever the callbacks delivered less.
          const whole = this._wiring.unbounded && !r.truncated
          const stdout = whole && Buffer.byteLength(r.stdout) > this._wiring.bytes.out ? r.stdout : this.stdout
          const stderr = whole && Buffer.byteLength(r.stderr) > this._wiring.bytes.err ? r.stderr : this.stderr
          return {
            success: this.exitCode === 0,
            exitCode: this.exitCode,
            stdout,
            stderr,
            executionTimeMs: Date.now() - started,
            timedOut,
            killed: timedOut || killed,
            stdoutTruncated: this.stdoutTruncated,
            stderrTruncated: this.stderrTruncated,
            stdoutDroppedBytes: this.stdoutDroppedBytes,
            stderrDroppedBytes: this.stderrDroppedBytes,
          }
        },
        (e) => {
          clearTimeout(timer)
          this._flush()
          this.emitStderr(e.message)
          this.exitCode = 1
          return {
            success: false,
            exitCode: 1,
            stdout: this.stdout,
            stderr: this.stderr,
            executionTimeMs: Date.now() - started,
          }
        },
      )
    }

    /** Wires a machine process's output into the handle (UTF-8 decoded across chunk boundaries). */
    static callbacks(unbounded) {
      const out = new StringDecoder('utf8')
      const err = new StringDecoder('utf8')
      const bytes = { out: 0, err: 0 }
      let handle = null
      const early = []
      const deliver = (kind, text) => {
        if (!text) return
        if (!handle) early.push([kind, text])
        else if (kind === 'out') handle.emitStdout(text)
        else handle.emitStderr(text)
      }
      return {
        unbounded,
        bytes,
        onStdout: (b) => {
          bytes.out += b.length
          deliver('out', out.write(b))
        },
        onStderr: (b) => {
          bytes.err += b.length
          deliver('err', err.write(b))
        },
        bind(h) {
          handle = h
          h._flush = () => {
            deliver('out', out.end())
            deliver('err', err.end())
          }
          for (const [kind, text] of early.splice(0)) deliver(kind, text)
        },
      }
    }

    async wait() {
      return this._done
    }

    async kill() {
      if (this.exitCode !== undefined) return false
      const killed = await this._proc.kill('SIGKILL')
      return killed
    }

    async sendStdin(data) {
      if (this.exitCode !== undefined)
        throw new Error(`Process ${this.pid} has already exited with code ${this.exitCode}`)
      if (!this._stdinOpen) throw new Error(`Process ${this.pid} does not have stdin available`)
      await this._proc.write(data)
    }

    async closeStdin() {
      if (this.exitCode !== undefined)
        throw new Error(`Process ${this.pid} has already exited with code ${this.exitCode}`)
      if (!this._stdinOpen) throw new Error(`Process ${this.pid} does not have stdin available`)
      this._stdinOpen = false
      await this._proc.end()
    }
  }

  class KernProcessManager extends SandboxProcessManager {
    async spawn(command, options = {}) {
      checkCommand(command)
      const sandbox = this.sandbox
      const base = sandbox.workingDirectory ?? sandbox.machine.workdir
      const cwd = options.cwd === undefined ? base : posix.resolve(base, checkPath(options.cwd, 'cwd'))
      const unbounded = options.maxRetainedBytes === Infinity
      const wiring = KernProcessHandle.callbacks(unbounded)
      const started = Date.now()
      const proc = await sandbox.machine.spawn(command, {
        cwd,
        env: checkEnv({ ...this.env, ...options.env }),
        stdin: options.stdinMode !== 'ignore',
        // The handle keeps its own copy (maxRetainedBytes, newest output kept); the machine's capture
        // is needed only when everything is retained, as the complete fallback.
        ...(unbounded ? {} : { maxOutputBytes: 1 }),
        onStdout: wiring.onStdout,
        onStderr: wiring.onStderr,
      })
      const handle = new KernProcessHandle(proc, options, started, wiring)
      wiring.bind(handle)
      this._tracked.set(handle.pid, handle)
      return handle
    }

    async list() {
      return [...this._tracked.values()].map((h) => ({
        pid: h.pid,
        command: h.command,
        running: h.exitCode === undefined,
        ...(h.exitCode !== undefined ? { exitCode: h.exitCode } : {}),
      }))
    }
  }

  return { KernProcessManager, KernProcessHandle }
}

module.exports = { make }
