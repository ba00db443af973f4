'use strict'
// KernSandbox: Mastra's WorkspaceSandbox on a kern machine. It extends Mastra's MastraSandbox, so
// lifecycle (start/stop/destroy with status and race safety, lazy ensureRunning), the env overlay
// and executeCommand (spawn + wait through the process manager) are Mastra's own; this class
// supplies the machine: starting it, processes, files, ports.

const crypto = require('node:crypto')
const {
  checkPath,
  checkCount,
  openMachine,
  closeMachine,
  splitOptions,
  invalid,
  DEFAULT_FILE_BYTES,
} = require('../adapters.js')

/** KernSandbox on one copy of @mastra/core/workspace (see process.js).
 * Long only as the class it makes is: each method is short. */
function make({ MastraSandbox, validateSandboxFileMode, SandboxAbortError }, { KernProcessManager }) {
  class KernSandbox extends MastraSandbox {
    /**
     * @param {object} [options] kern-sandbox Sandbox options, plus `id`, `machine` (Machine options),
     *   Mastra's `env`, `workingDirectory`, `onStart`/`onStop`/`onDestroy`, and `instructions`
     */
    constructor(options = {}) {
      const { machineOptions, sandboxOptions } = splitOptions(options)
      const { id, env, workingDirectory, onStart, onStop, onDestroy, instructions, ...kernOptions } = sandboxOptions
      if (workingDirectory !== undefined) checkPath(workingDirectory, 'workingDirectory')
      if (workingDirectory !== undefined && !workingDirectory.startsWith('/')) {
        throw invalid('workingDirectory must be an absolute path in the machine')
      }
      super({
        name: 'KernSandbox',
        env,
        workingDirectory,
        onStart,
        onStop,
        onDestroy,
        processes: new KernProcessManager(),
      })
      this.id = id ?? `kern-${crypto.randomUUID()}`
      this.name = 'KernSandbox'
      this.provider = 'kern'
      this.status = 'pending'
      this._kernOptions = kernOptions
      this._machineOptions = machineOptions
      this._instructions = instructions
      this._session = null
      this._machine = null
      this._createdAt = new Date()
      this.networking = {
        /** The host URL of a machine port (127.0.0.1 only), or null while the sandbox is not running. */
        getPortUrl: async (port) => {
          checkCount(port, 'port', undefined, { max: 65535 })
          if (this.status !== 'running' || !this._machine) return null
          return (await this._machine.exposePort(port)).url
        },
      }
    }

    /** The running machine; throws before start(). */
    get machine() {
      if (!this._machine) throw invalid('the KernSandbox is not started')
      return this._machine
    }

    async start() {
      if (this._machine && this._machine.alive) return { outcome: 'connected' }
      const { sbx, machine } = await openMachine(this._kernOptions, this._machineOptions)
      this._session = sbx
      this._machine = machine
      if (this.workingDirectory === undefined) this.setWorkingDirectory(machine.workdir)
      else await machine.mkdir(this.workingDirectory)
      return { outcome: 'created' }
    }

    /** kern machines cannot pause: stop ends the machine (files of a persistent `workspace` stay);
     * the next start makes a new one. */
    async stop() {
      await this._end()
    }

    async destroy() {
      await this._end()
    }

    async _end() {
      const sbx = this._session
      const machine = this._machine
      this._session = null
      this._machine = null
      await closeMachine(machine, sbx)
    }

    async writeFiles(files, options = {}) {
      const signal = options.abortSignal
      if (signal?.aborted) throw new SandboxAbortError('writeFiles', signal.reason)
      if (!Array.isArray(files)) throw invalid('files must be an array')
      for (const f of files) {
        checkPath(f?.path)
        if (f.mode !== undefined) validateSandboxFileMode(f.mode)
        const size = typeof f.content === 'string' ? Buffer.byteLength(f.content) : f.content?.length
        if (!(size <= DEFAULT_FILE_BYTES))
          throw invalid(`${f.path}: content must be a string or Buffer of at most ${DEFAULT_FILE_BYTES} bytes`)
      }
      await this.ensureRunning()
      for (const f of files) {
        if (signal?.aborted) throw new SandboxAbortError('writeFiles', signal.reason)
        const at = f.path.startsWith('/') ? f.path : `${this.workingDirectory}/${f.path}`
        await this._machine.writeFile(at, f.content, f.mode === undefined ? {} : { mode: f.mode })
      }
    }

    getInstructions() {
      const wd = this.workingDirectory ?? '/workspace'
      const text =
        `Commands run in a local kern machine (Linux, a writable root filesystem, processes as root), ` +
        `through /bin/sh -c, in ${wd} unless a cwd is given. It has no network unless it was configured with one. ` +
        'A server started in it is reached from the host through the sandbox networking (getPortUrl).'
      return this._instructions ? `${text}\n${this._instructions}` : text
    }

    async getInfo() {
      const info = {
        id: this.id,
        name: this.name,
        provider: this.provider,
        status: this.status,
        createdAt: this._createdAt,
        metadata: { machine: this._machine?.name ?? null, workingDirectory: this.workingDirectory ?? null },
      }
      if (this._machine && this._machine.alive) {
        const m = await this._machine.metrics()
        info.resources = {
          cpuPercent: m.cpuPercent,
          memoryUsedMB: Math.round(m.memoryBytes / 2 ** 20),
          ...(m.memoryLimitBytes !== null ? { memoryMB: Math.round(m.memoryLimitBytes / 2 ** 20) } : {}),
          ...(m.diskBytes !== null ? { diskUsedMB: Math.round(m.diskBytes / 2 ** 20) } : {}),
        }
      }
      return info
    }
  }

  return { KernSandbox }
}

module.exports = { make }
