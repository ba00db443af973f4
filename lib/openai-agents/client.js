'use strict'
// KernSandboxClient: OpenAI Agents' `SandboxClient` for kern. Each created session is a kern
// Sandbox (the given options) with one machine, the manifest materialized in it. State serializes
// to JSON (the manifest, the environment without secrets, exposed ports, the Sandbox options);
// resume() gives back the live session of this process when it is still running, else a new
// machine with the same options and manifest (files of a persistent `workspace` carry over).

const crypto = require('node:crypto')
const { invalid, checkCount, openMachine, splitOptions } = require('../adapters.js')

/** Live sessions of this process by their state's sessionKey, for resume() and delete(). */
const live = new Map()

/** Sandbox options that can be written into serialized state: no callbacks (`onRequest`), no
 * `env` and no egress policy object (`network`: its rules hold header values, secrets that stay on
 * the host); a resumed session takes those from the client's own options. */
function serializableOptions(o) {
  const out = {}
  for (const [k, v] of Object.entries(o ?? {})) {
    if (typeof v === 'function' || v === undefined || k === 'env') continue
    if (k === 'network' && typeof v === 'object' && v !== null) continue
    out[k] = v
  }
  return JSON.parse(JSON.stringify(out))
}

/** KernSandboxClient on one copy of agents-core (see session.js).
 * Long only as the class it makes is: each method is short. */
function make({ sandbox, internal }, { KernSandboxSession }) {
  const { normalizeSandboxClientCreateArgs, SandboxUnsupportedFeatureError, SandboxConfigurationError } = sandbox
  const {
    serializeManifest,
    deserializeManifest,
    serializeRuntimeEnvironmentForPersistence,
    deserializePersistedEnvironmentForRuntime,
  } = internal
  class KernSandboxClient {
    /**
     * @param {object} [options] kern-sandbox Sandbox options, plus `machine` (Machine options),
     *   `maxOutputBytes` (output held per command), `defaultShell` (default /bin/sh), `exposedPorts`
     */
    constructor(options = {}) {
      const { machineOptions, sandboxOptions } = splitOptions(options)
      const { maxOutputBytes, defaultShell, exposedPorts, ...rest } = sandboxOptions
      this.backendId = 'kern'
      this._sandboxOptions = rest
      this._machineOptions = machineOptions
      this._maxOutputBytes = maxOutputBytes === undefined ? undefined : checkCount(maxOutputBytes, 'maxOutputBytes')
      this._defaultShell = defaultShell
      this._exposedPorts = (exposedPorts ?? []).map((p) => checkCount(p, 'exposedPorts[]', undefined, { max: 65535 }))
    }

    async create(args, manifestOptions) {
      const a = normalizeSandboxClientCreateArgs(args, manifestOptions)
      if (a.snapshot && a.snapshot.type !== 'noop') {
        throw new SandboxUnsupportedFeatureError('KernSandboxClient takes no snapshot spec: use persistWorkspace()', {
          snapshot: a.snapshot.type,
        })
      }
      const extra = a.options ?? {}
      if (typeof extra !== 'object') throw invalid('options must be an object')
      const sandboxOptions = { ...this._sandboxOptions, ...extra.sandbox }
      const machineOptions = { ...this._machineOptions, ...extra.machine }
      const state = {
        manifest: a.manifest,
        environment: await a.manifest.resolveEnvironment(),
        workspaceReady: false,
        sessionKey: crypto.randomUUID(),
        sandboxOptions: serializableOptions(sandboxOptions),
        machineOptions: serializableOptions(machineOptions),
      }
      return this._open(state, sandboxOptions, machineOptions, a.archiveLimits)
    }

    async _open(state, sandboxOptions, machineOptions, archiveLimits) {
      const { sbx, machine } = await openMachine(sandboxOptions, machineOptions)
      const session = new KernSandboxSession({
        state,
        machine,
        sandbox: sbx,
        maxOutputBytes: this._maxOutputBytes,
        defaultShell: this._defaultShell,
        archiveLimits,
      })
      try {
        await session.applyManifest(state.manifest)
        state.workspaceReady = true
        for (const p of this._exposedPorts) await session.resolveExposedPort(p)
      } catch (e) {
        await session.close()
        throw e
      }
      live.set(state.sessionKey, session)
      session._onClose = () => live.delete(state.sessionKey)
      return session
    }

    async resume(state, options = {}) {
      const key = state?.sessionKey
      const running = key && live.get(key)
      if (running && (await running.running())) return running
      const sandboxOptions = { ...this._sandboxOptions, ...state.sandboxOptions }
      const machineOptions = { ...this._machineOptions, ...state.machineOptions }
      const fresh = { ...state, exposedPorts: undefined, workspaceReady: false, sessionKey: key ?? crypto.randomUUID() }
      return this._open(fresh, sandboxOptions, machineOptions, options.archiveLimits)
    }

    async delete(state) {
      const s = state?.sessionKey && live.get(state.sessionKey)
      if (s) await s.close()
    }

    async serializeSessionState(state) {
      return {
        manifest: serializeManifest(state.manifest),
        environment: serializeRuntimeEnvironmentForPersistence(state.manifest, state.environment ?? {}),
        workspaceReady: Boolean(state.workspaceReady),
        exposedPorts: state.exposedPorts ?? null,
        sessionKey: state.sessionKey,
        sandboxOptions: state.sandboxOptions ?? {},
        machineOptions: state.machineOptions ?? {},
      }
    }

    async deserializeSessionState(record) {
      if (!record || typeof record !== 'object')
        throw new SandboxConfigurationError('kern session state must be an object')
      const manifest = deserializeManifest(record.manifest)
      const environment = deserializePersistedEnvironmentForRuntime(manifest, record.environment)
      if (typeof record.sessionKey !== 'string')
        throw new SandboxConfigurationError('kern session state has no sessionKey')
      return {
        manifest,
        environment,
        workspaceReady: Boolean(record.workspaceReady),
        exposedPorts: record.exposedPorts ?? undefined,
        sessionKey: record.sessionKey,
        sandboxOptions: record.sandboxOptions ?? {},
        machineOptions: record.machineOptions ?? {},
      }
    }

    /** A live session of this process can be kept across runs while its machine runs. */
    canPersistOwnedSessionState(state) {
      return Boolean(state?.sessionKey && live.has(state.sessionKey))
    }
  }

  return { KernSandboxClient }
}

module.exports = { make }
