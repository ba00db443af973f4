'use strict'
// The MCP server: tools (run_code, write_file, read_file, list_files, reset) and workspace
// resources over an official-SDK McpServer. Code failures are tool results with isError; only
// protocol misuse becomes a JSON-RPC error (the SDK's part).

const { StringDecoder } = require('node:string_decoder')
const { McpServer } = require('@modelcontextprotocol/sdk/server/mcp.js')
const { z } = require('zod')
const { SandboxError, LANGUAGE_NAMES } = require('kern-sandbox')
const { version } = require('../package.json')
const { Interpreter } = require('./interpreter.js')
const { NoteLog } = require('./notes.js')
const { LIMITS, clip } = require('./bounds.js')
const { runCodeOutput, runCodeReply, errorReply, runCodeErrorReply } = require('./content.js')
const { classify, readCapped, listCapped, sizeText } = require('./files.js')
const { registerWorkspaceResources } = require('./resources.js')

/** The names run_code takes: the library's, aliases included. */
const LANGUAGES = [...LANGUAGE_NAMES]

function runCodeDescription(warm) {
  const memory = warm
    ? 'Python variables, imports and functions PERSIST between run_code calls (one warm interpreter; JavaScript/TypeScript too where a warm JS kernel is available); the reset tool starts it afresh.'
    : 'Each call is a fresh box: variables do not persist between calls, only workspace files do.'
  return (
    "Run code in a local, isolated kern sandbox on the user's machine and get back its stdout, stderr and rich results: " +
    'the value of a trailing expression, display() output, and matplotlib figures as images. ' +
    'Languages: python (default), bash, node/javascript, typescript. The network is off; a deadline applies (timeout_s). ' +
    `${memory} Files in the workspace (the current directory, /workspace) persist across calls.`
  )
}

/** Progress notifications with the cell's live output, when the client asked for progress. */
function liveOutput(extra, notes) {
  const token = extra._meta && extra._meta.progressToken
  if (token === undefined || token === null) return {}
  let progress = 0
  let sent = 0
  let stopped = false
  const send = (message) => {
    progress++
    extra
      .sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress, message } })
      .catch(() => {})
  }
  const emit = (prefix) => (text) => {
    if (stopped || text === '') return
    for (let i = 0; i < text.length && !stopped; i += LIMITS.liveChunkChars) {
      const part = text.slice(i, i + LIMITS.liveChunkChars)
      if (sent + part.length > LIMITS.liveChars) {
        stopped = true
        send('[live output clipped here: the reply carries the output]')
        return
      }
      sent += part.length
      send(prefix + part)
    }
  }
  const stream = (forward) => {
    const decoder = new StringDecoder('utf8')
    return (chunk) => forward(decoder.write(chunk))
  }
  return { onStdout: stream(emit('')), onStderr: stream(notes.liveFilter(emit('[stderr] '))) }
}

/** Hints for the model, by the SandboxError's code. */
const HINTS = {
  ERR_PATH_ESCAPES: ' Paths are relative to the workspace (/workspace in the box) and must stay inside it.',
  ERR_TOO_LARGE: ' Read a part of it with run_code instead (e.g. head, tail, or Python slicing).',
}

/** A SandboxError as the message the model sees, with a hint where one helps. */
function sandboxMessage(e, what) {
  const hint = (Object.hasOwn(HINTS, e.code) && HINTS[e.code]) || ''
  return `${what}: ${e.message}.${hint}`
}

/** Logs an unexpected failure on our stderr and gives the model only its kind. */
function internalError(e, log) {
  log(`kern-sandbox-mcp: internal error: ${e && e.stack ? e.stack : e}\n`)
  return `internal error in the server (${e && e.name ? e.name : 'Error'}); it was logged and the server keeps serving`
}

/** What the model is told when a tool call throws: a SandboxError's message with its hint, or
 * only the kind of an unexpected failure (logged). */
function failureMessage(e, what, log) {
  return e instanceof SandboxError ? sandboxMessage(e, what) : internalError(e, log)
}

/** A tool result of text items. */
function textReply(...texts) {
  return { content: texts.map((text) => ({ type: 'text', text })) }
}

/** A workspace tool's handler whose failures become error results saying `what` failed. */
function workspaceHandler(what, log, handler) {
  return async (args) => {
    try {
      return await handler(args)
    } catch (e) {
      return errorReply(failureMessage(e, what, log))
    }
  }
}

const INSTRUCTIONS =
  'A local code interpreter. Use run_code to compute, analyse data, plot (figures come back as images) and test code; ' +
  'write_file/read_file/list_files for the workspace files the code sees in its current directory. The network is off.'

/** Creates the server (not yet connected). `log` writes to the server's stderr. */
function createServer(config, { log = (t) => process.stderr.write(t) } = {}) {
  const notes = new NoteLog(log)
  const interpreter = new Interpreter(config)
  const server = new McpServer({ name: 'kern-sandbox-mcp', version }, { instructions: INSTRUCTIONS })
  const tools = { config, interpreter, notes, log }
  // Registration order is the order tools/list gives them in.
  registerRunCode(server, tools)
  registerWriteFile(server, tools)
  registerReadFile(server, tools)
  registerListFiles(server, tools)
  registerReset(server, tools)
  registerWorkspaceResources(server, interpreter)
  return { server, interpreter }
}

function registerRunCode(server, { config, interpreter, notes, log }) {
  server.registerTool(
    'run_code',
    {
      title: 'Run code in the sandbox',
      description: runCodeDescription(config.kernel),
      inputSchema: {
        code: z.string().max(2_000_000).describe('The code to run.'),
        language: z
          .enum(LANGUAGES)
          .optional()
          .describe('python (default), bash, javascript (or node), typescript; js, ts, python3 and sh are aliases'),
        timeout_s: z
          .number()
          .positive()
          .max(3600)
          .optional()
          .describe(`Deadline in seconds (default ${config.timeoutS}).`),
      },
      outputSchema: runCodeOutput,
      annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: false },
    },
    async ({ code, language = 'python', timeout_s: timeoutS = config.timeoutS }, extra) => {
      const shape = { language, warmKernel: config.kernel }
      try {
        const got = await interpreter.run(code, language, {
          timeoutS,
          signal: extra.signal,
          ...liveOutput(extra, notes),
        })
        got.result.stderr = notes.strip(got.result.stderr || '')
        return runCodeReply(got.result, { language, warmKernel: got.warmKernel, stateLost: got.stateLost })
      } catch (e) {
        if (extra.signal.aborted) return runCodeErrorReply('cancelled: the cell was interrupted', shape)
        return runCodeErrorReply(failureMessage(e, 'the code could not run', log), shape)
      }
    },
  )
}

function registerWriteFile(server, { interpreter, log }) {
  server.registerTool(
    'write_file',
    {
      title: 'Write a workspace file',
      description:
        'Write UTF-8 text to a file in the sandbox workspace (a relative path; directories are created). run_code sees it in its current directory.',
      inputSchema: {
        path: z.string().min(1).max(4096).describe('Workspace-relative path, e.g. data/input.csv'),
        content: z
          .string()
          .max(16 * 1024 * 1024)
          .describe('The text to write.'),
      },
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    workspaceHandler('write_file failed', log, async ({ path, content }) => {
      const sbx = await interpreter.session()
      await sbx.writeFile(path, content)
      return textReply(`wrote ${Buffer.byteLength(content)} bytes to ${clip(path, 300, 'path')}`)
    }),
  )
}

function registerReadFile(server, { interpreter, log }) {
  server.registerTool(
    'read_file',
    {
      title: 'Read a workspace file',
      description:
        `Read a file from the sandbox workspace (a relative path). Text comes back as text, images (PNG, JPEG, GIF, WebP) as images; ` +
        `other binary data is described, not dumped. Files over ${sizeText(LIMITS.readBytes)} are refused: read those in parts with run_code.`,
      inputSchema: { path: z.string().min(1).max(4096).describe('Workspace-relative path') },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    workspaceHandler('read_file failed', log, async ({ path }) => {
      const sbx = await interpreter.session()
      return fileReply(path, await readCapped(sbx, path))
    }),
  )
}

/** A file's bytes as read_file gives them: text clipped, an image as an image if it fits, other
 * binary data described. */
function fileReply(path, bytes) {
  const got = classify(bytes)
  const name = clip(path, 300, 'path')
  if (got.kind === 'text') {
    const text = clip(got.text, LIMITS.replyChars, 'file')
    if (text === got.text) return textReply(text)
    return textReply(text, '[read the rest in parts with run_code, e.g. sed -n or Python slicing]')
  }
  if (got.kind === 'image') {
    const b64 = bytes.toString('base64')
    if (b64.length <= LIMITS.imageB64) {
      return {
        content: [
          { type: 'image', data: b64, mimeType: got.mime },
          { type: 'text', text: `${name}: ${got.mime}, ${sizeText(bytes.length)}` },
        ],
      }
    }
    return textReply(
      `${name} is a ${got.mime} image of ${sizeText(bytes.length)}, too large to send: shrink it with run_code first`,
    )
  }
  return textReply(
    `${name} is ${got.what}, ${sizeText(bytes.length)}: not shown as text. Inspect or convert it with run_code.`,
  )
}

function registerListFiles(server, { interpreter, log }) {
  server.registerTool(
    'list_files',
    {
      title: 'List workspace files',
      description: `List the files in the sandbox workspace, or under a directory of it, with their sizes (at most ${LIMITS.listEntries}).`,
      inputSchema: {
        path: z.string().max(4096).optional().describe('Workspace-relative directory (default: the whole workspace)'),
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    workspaceHandler('list_files failed', log, async ({ path = '' }) => {
      const sbx = await interpreter.session()
      const { files, more } = await listCapped(sbx, path)
      const lines = files.map((f) => `${clip(f.path, 300, 'path')}  (${sizeText(f.size)})`)
      if (more) lines.push(`[${more} more files not listed]`)
      return textReply(lines.length ? lines.join('\n') : '(no files)')
    }),
  )
}

function registerReset(server, { interpreter, log }) {
  server.registerTool(
    'reset',
    {
      title: 'Restart the warm kernels',
      description:
        'Restart the warm interpreter(s): every variable, import and function from earlier run_code calls is gone. Workspace files stay.',
      inputSchema: {},
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    async () => {
      try {
        const ended = await interpreter.reset()
        return textReply(
          `reset: ${ended} warm kernel(s) ended; the next run_code starts fresh. Workspace files are kept.`,
        )
      } catch (e) {
        return errorReply(internalError(e, log))
      }
    },
  )
}

module.exports = { createServer, LANGUAGES }
