'use strict'
// createSandboxSession(machine, opts): the AI SDK 7 `Experimental_SandboxSession` on a Machine.
// Every member of ai's type, with the rules its doc comments give: reads resolve null for a
// missing file, listDirectory null for a missing directory and rejects for a file, deleteFile
// false for a missing file and rejects for a directory, writes create parents and reject on a
// directory, stat follows symlinks, relative paths (and workingDirectory) resolve against one
// base that never changes. `abortSignal` is honoured by every member: a command is killed, a
// stream is cancelled, a pending file call rejects with the signal's reason.

const {
  DEFAULT_OUTPUT_BYTES,
  DEFAULT_FILE_BYTES,
  invalid,
  coded,
  checkPath,
  checkCommand,
  checkEnv,
  checkCount,
  resolveIn,
  isMissing,
  abortable,
  statFollow,
} = require('../adapters.js')

const CHUNK = 64 * 1024

function checkMachine(machine) {
  if (!machine || typeof machine.exec !== 'function' || typeof machine.readFile !== 'function') {
    throw invalid('createSandboxSession needs a Machine (from `await sandbox.machine()`)')
  }
}

/** A ReadableStream over bytes already read, in CHUNK-sized pieces; cancel()/abort stop it. */
function bytesStream(buf, signal) {
  let offset = 0
  return new ReadableStream({
    type: 'bytes',
    pull(controller) {
      if (signal && signal.aborted) {
        controller.error(signal.reason)
        return
      }
      if (offset >= buf.length) {
        controller.close()
        return
      }
      const end = Math.min(offset + CHUNK, buf.length)
      controller.enqueue(new Uint8Array(buf.buffer.slice(buf.byteOffset + offset, buf.byteOffset + end)))
      offset = end
    },
  })
}

/** Reads a stream to one Buffer, refusing past `max` bytes, cancelling it on abort. */
async function collect(stream, max, signal) {
  if (!stream || typeof stream.getReader !== 'function') throw invalid('content must be a ReadableStream')
  const reader = stream.getReader()
  const onAbort = () => reader.cancel(signal.reason).catch(() => {})
  signal?.addEventListener('abort', onAbort, { once: true })
  try {
    const parts = []
    let size = 0
    for (;;) {
      signal?.throwIfAborted()
      const { done, value } = await reader.read()
      signal?.throwIfAborted()
      if (done) break
      const bytes =
        typeof value === 'string' ? Buffer.from(value) : Buffer.from(value.buffer, value.byteOffset, value.byteLength)
      size += bytes.length
      if (size > max) {
        await reader.cancel().catch(() => {})
        throw invalid(`content is larger than maxFileBytes (${max})`)
      }
      parts.push(Buffer.from(bytes))
    }
    return Buffer.concat(parts)
  } finally {
    signal?.removeEventListener('abort', onAbort)
    reader.releaseLock?.()
  }
}

function encodingOf(encoding) {
  if (encoding === undefined) return 'utf-8'
  if (typeof encoding !== 'string') throw invalid('encoding must be a string')
  return encoding
}

/** Text to bytes in `encoding`: UTF-8 and the encodings Node's Buffer writes. */
function encodeText(text, encoding) {
  if (typeof text !== 'string') throw invalid('content must be a string')
  const enc = encodingOf(encoding).toLowerCase()
  if (enc === 'utf-8' || enc === 'utf8') return Buffer.from(text, 'utf8')
  if (Buffer.isEncoding(enc)) return Buffer.from(text, enc)
  throw invalid(`unsupported encoding ${JSON.stringify(encoding)}`)
}

/** Bytes to text in any encoding the WHATWG TextDecoder knows (an unknown one rejects). */
function decodeText(bytes, encoding) {
  try {
    return new TextDecoder(encodingOf(encoding)).decode(bytes)
  } catch (e) {
    throw invalid(`unsupported encoding ${JSON.stringify(encoding)}: ${e.message}`)
  }
}

/** Lines startLine..endLine (1-based, inclusive; endLine past EOF reads to EOF), endings kept. */
function sliceLines(text, startLine, endLine) {
  const start = checkCount(startLine, 'startLine', 1)
  const end = checkCount(endLine, 'endLine', Infinity)
  if (start === 1 && end === Infinity) return text
  if (end < start) throw invalid(`endLine (${end}) is before startLine (${start})`)
  const lines = text.match(/[^\n]*\n|[^\n]+$/g) || []
  return lines.slice(start - 1, end === Infinity ? undefined : end).join('')
}

/** A ReadableStream fed by a process's output callback; at most `cap` bytes wait unread, past
 * that output is dropped (a consumer that never reads cannot grow host memory). */
function outputStream(cap) {
  let controller
  let closed = false
  const stream = new ReadableStream(
    {
      start(c) {
        controller = c
      },
      cancel() {
        closed = true
      },
    },
    { highWaterMark: cap, size: (chunk) => chunk.byteLength },
  )
  return {
    stream,
    push(buf) {
      if (closed) return
      // desiredSize is the room left under highWaterMark (cap): drop what would not fit.
      if (buf.length > (controller.desiredSize ?? 0)) return
      controller.enqueue(new Uint8Array(buf))
    },
    close() {
      if (closed) return
      closed = true
      controller.close()
    },
    error(e) {
      if (closed) return
      closed = true
      controller.error(e)
    },
  }
}

/** The session's fixed settings, checked once: its base directory, default env and caps. */
function sessionConfig(machine, opts) {
  if (typeof opts !== 'object' || opts === null) throw invalid('options must be an object')
  const base = opts.workingDirectory !== undefined ? resolveIn('/', opts.workingDirectory) : machine.workdir
  if (typeof base !== 'string' || !base.startsWith('/')) throw invalid('the machine has no working directory')
  const defaultEnv = checkEnv(opts.env) || {}
  const maxOutputBytes = checkCount(opts.maxOutputBytes, 'maxOutputBytes', DEFAULT_OUTPUT_BYTES)
  const maxFileBytes = checkCount(opts.maxFileBytes, 'maxFileBytes', DEFAULT_FILE_BYTES)
  const timeoutS = opts.timeoutS === undefined ? undefined : checkCount(opts.timeoutS, 'timeoutS', undefined)
  if (opts.description !== undefined && typeof opts.description !== 'string') {
    throw invalid('description must be a string')
  }
  return {
    base,
    maxOutputBytes,
    maxFileBytes,
    timeoutS,
    at: (p) => resolveIn(base, checkPath(p)),
    cwdOf: (wd) => (wd === undefined ? base : resolveIn(base, checkPath(wd, 'workingDirectory'))),
    envOf: (env) => ({ ...defaultEnv, ...checkEnv(env) }),
  }
}

/** The session's spawn(): a process on the machine whose output streams are capped and whose
 * abortSignal kills it. */
async function spawnProcess(machine, cfg, options) {
  if (!options || typeof options !== 'object') throw invalid('spawn needs { command }')
  const { maxOutputBytes, timeoutS } = cfg
  const command = checkCommand(options.command)
  const cwd = cfg.cwdOf(options.workingDirectory)
  const env = cfg.envOf(options.env)
  const signal = options.abortSignal
  signal?.throwIfAborted()
  const withStdin = options.stdin === true
  const out = outputStream(maxOutputBytes)
  const err = outputStream(maxOutputBytes)
  const proc = await machine.spawn(command, {
    cwd,
    env,
    stdin: withStdin,
    maxOutputBytes,
    onStdout: (b) => out.push(b),
    onStderr: (b) => err.push(b),
    ...(timeoutS !== undefined ? { timeoutS } : {}),
  })
  let aborted = false
  const onAbort = () => {
    aborted = true
    proc.kill('SIGKILL').catch(() => {})
  }
  if (signal) {
    if (signal.aborted) onAbort()
    else signal.addEventListener('abort', onAbort, { once: true })
  }
  const exited = proc.wait().then(
    (r) => {
      signal?.removeEventListener('abort', onAbort)
      out.close()
      err.close()
      return r
    },
    (e) => {
      signal?.removeEventListener('abort', onAbort)
      out.error(e)
      err.error(e)
      throw e
    },
  )
  exited.catch(() => {})
  const handle = {
    pid: proc.pid,
    stdout: out.stream,
    stderr: err.stream,
    async wait() {
      const r = await exited
      if (aborted) throw signal.reason
      return { exitCode: r.exitCode }
    },
    async kill() {
      if (proc.exitCode !== null) return
      await proc.kill('SIGKILL').catch((e) => {
        if (proc.exitCode === null) throw e
      })
    },
  }
  if (withStdin) handle.stdin = stdinStream(proc)
  return handle
}

/** A WritableStream onto a process's stdin. */
function stdinStream(proc) {
  return new WritableStream({
    write: (chunk) => {
      if (typeof chunk === 'string') return proc.write(chunk)
      if (!(chunk instanceof Uint8Array)) throw invalid('stdin takes Uint8Array chunks')
      return proc.write(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength))
    },
    close: () => proc.end(),
    abort: () => proc.end(),
  })
}

/** The session's members on file contents (read*, write*): paths resolve against the base,
 * contents are capped at maxFileBytes. */
function fileMembers(machine, cfg) {
  const { maxFileBytes, at } = cfg

  async function readBytes(path, signal) {
    const p = at(path)
    return abortable(signal, async () => {
      try {
        return await machine.readFile(p, { maxBytes: maxFileBytes })
      } catch (e) {
        if (isMissing(e)) return null
        throw e
      }
    })
  }

  async function writeBytes(path, bytes, signal) {
    const p = at(path)
    if (bytes.length > maxFileBytes) throw invalid(`content is larger than maxFileBytes (${maxFileBytes})`)
    await abortable(signal, async () => {
      const e = await statFollow(machine, p)
      if (e && e.type === 'dir') throw coded('ERR_IS_A_DIRECTORY', `${p}: is a directory`)
      await machine.writeFile(p, bytes)
    })
  }

  return {
    async readFile(options) {
      const buf = await readBytes(options?.path, options?.abortSignal)
      return buf === null ? null : bytesStream(buf, options.abortSignal)
    },

    async readBinaryFile(options) {
      const buf = await readBytes(options?.path, options?.abortSignal)
      return buf === null ? null : new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength)
    },

    async readTextFile(options) {
      const buf = await readBytes(options?.path, options?.abortSignal)
      if (buf === null) return null
      return sliceLines(decodeText(buf, options.encoding), options.startLine, options.endLine)
    },

    async writeFile(options) {
      const signal = options?.abortSignal
      signal?.throwIfAborted()
      at(options?.path)
      const bytes = await collect(options.content, maxFileBytes, signal)
      await writeBytes(options.path, bytes, signal)
    },

    async writeBinaryFile(options) {
      const c = options?.content
      if (!(c instanceof Uint8Array)) throw invalid('content must be a Uint8Array')
      await writeBytes(options.path, Buffer.from(c.buffer, c.byteOffset, c.byteLength), options.abortSignal)
    },

    async writeTextFile(options) {
      await writeBytes(options?.path, encodeText(options?.content, options?.encoding), options?.abortSignal)
    },
  }
}

/** The session's members on entries: stat, listDirectory, deleteFile. */
function entryMembers(machine, { at }) {
  return {
    async stat(options) {
      const p = at(options?.path)
      return abortable(options.abortSignal, async () => {
        const e = await statFollow(machine, p)
        if (e === null) return null
        return { type: e.type === 'dir' ? 'directory' : e.type === 'file' ? 'file' : 'other', size: e.size }
      })
    },

    async listDirectory(options) {
      const p = at(options?.path)
      return abortable(options.abortSignal, async () => {
        const e = await statFollow(machine, p)
        if (e === null) return null
        if (e.type !== 'dir') throw coded('ERR_NOT_A_DIRECTORY', `${p}: not a directory`)
        const entries = await machine.list(p, { depth: 1 })
        return entries.map((x) => ({
          name: x.name,
          type: x.type === 'dir' ? 'directory' : x.type === 'file' || x.type === 'symlink' ? x.type : 'other',
        }))
      })
    },

    async deleteFile(options) {
      const p = at(options?.path)
      return abortable(options.abortSignal, async () => {
        let e
        try {
          e = await machine.stat(p)
        } catch (err) {
          if (isMissing(err)) return false
          throw err
        }
        if (e.type === 'dir') throw coded('ERR_IS_A_DIRECTORY', `${p}: is a directory`)
        try {
          await machine.remove(p)
        } catch (err) {
          if (isMissing(err)) return false
          throw err
        }
        return true
      })
    },
  }
}

/**
 * @param {import('../../index').Machine} machine
 * @param {object} [opts]
 */
function createSandboxSession(machine, opts = {}) {
  checkMachine(machine)
  const cfg = sessionConfig(machine, opts)
  const { base, maxOutputBytes, timeoutS, cwdOf, envOf } = cfg
  const ports = new Map()

  async function spawn(options) {
    return spawnProcess(machine, cfg, options)
  }

  const session = {
    get description() {
      const lines = [
        `A Linux machine (kern box ${machine.name}): a Debian-like root filesystem you can write to, ` +
          `processes run as root; it is gone when the session ends.`,
        `Working directory: ${base}. Relative paths and relative working directories resolve against it; ` +
          '`cd` inside a command only affects that command.',
        'Commands run through /bin/sh -c.',
      ]
      for (const [machinePort, e] of ports) {
        lines.push(`Port ${machinePort} in the machine is reachable from the host at ${e.url}.`)
      }
      if (opts.description) lines.push(opts.description)
      return lines.join('\n')
    },

    ...fileMembers(machine, cfg),
    ...entryMembers(machine, cfg),

    spawn,

    async run(options) {
      if (!options || typeof options !== 'object') throw invalid('run needs { command }')
      const command = checkCommand(options.command)
      const signal = options.abortSignal
      signal?.throwIfAborted()
      const r = await machine.exec(command, {
        cwd: cwdOf(options.workingDirectory),
        env: envOf(options.env),
        signal,
        maxOutputBytes,
        ...(timeoutS !== undefined ? { timeoutS } : {}),
      })
      let stderr = r.stderr
      if (r.truncated) stderr += `\n[output truncated: each stream is capped at ${maxOutputBytes} bytes]\n`
      if (r.fault) stderr += `\n[${r.fault.type}: ${r.fault.message}]\n`
      return { exitCode: r.exitCode, stdout: r.stdout, stderr }
    },

    /** Not part of ai's interface: exposes a machine port on the host (127.0.0.1) and names it in
     * `description`, so the model learns where a server it starts can be reached. */
    async exposePort(port) {
      const e = await machine.exposePort(checkCount(port, 'port', undefined, { max: 65535 }))
      ports.set(e.machinePort, e)
      return e
    },

    /** The machine this session runs on. */
    get machine() {
      return machine
    },
  }
  return session
}

module.exports = { createSandboxSession, sliceLines }
