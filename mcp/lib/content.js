'use strict'
// An ExecutionResult as an MCP tool result: text blocks for the streams and text-shaped results,
// image blocks for figures, a status line a model can act on, and structuredContent for clients
// that read it. Everything bounded (bounds.js).

const { z } = require('zod')
const { LIMITS, clip, clipMiddle, TextBudget } = require('./bounds.js')

/** The shape of run_code's structuredContent (its outputSchema). */
const runCodeOutput = {
  exitCode: z.number().describe('exit status of the code (130: interrupted, 137: killed)'),
  success: z.boolean().describe('exit 0 and no sandbox fault'),
  fault: z
    .object({ type: z.string(), message: z.string() })
    .nullable()
    .describe('what the sandbox did to the run (timeout, oom, killed, escape_blocked, startup_failed), or null'),
  error: z.object({ name: z.string(), value: z.string() }).nullable().describe('the uncaught exception, or null'),
  files: z
    .array(z.object({ path: z.string(), size: z.number(), change: z.string() }))
    .describe('workspace files this call created or modified'),
  results: z
    .array(z.object({ mimeTypes: z.array(z.string()), main: z.boolean() }))
    .describe('rich results in order, each with the MIME types it came in'),
  language: z.string(),
  warmKernel: z.boolean().describe('ran in the warm kernel, whose variables persist between calls'),
  stateLost: z.boolean().describe('the warm kernel was replaced before or by this call: earlier variables are gone'),
  clipped: z.boolean().describe('part of the output was left out of this reply'),
  durationMs: z.number(),
}

/** Text MIME types shown when a result has no useful text/plain, most compact first. */
const TEXT_KINDS = [
  'text/markdown',
  'application/json',
  'text/html',
  'text/latex',
  'image/svg+xml',
  'application/javascript',
]
const IMAGE_KINDS = ['image/png', 'image/jpeg']
/** A repr() that says nothing, e.g. "<IPython.core.display.HTML object>". */
const EMPTY_REPR = /^<[\w.]+ object( at 0x[0-9a-f]+)?>$/

/** Builds one reply, keeping its text and image budgets. */
class Reply {
  content = []
  budget = new TextBudget()
  imageLeft = LIMITS.replyImageB64
  imagesOmitted = 0

  text(text) {
    const t = this.budget.take(text)
    if (t) this.content.push({ type: 'text', text: t })
  }

  image(b64, mimeType) {
    const fits =
      b64.length <= LIMITS.imageB64 &&
      b64.length <= this.imageLeft &&
      this.content.filter((c) => c.type === 'image').length < LIMITS.replyImages
    if (!fits) {
      this.imagesOmitted++
      return
    }
    this.imageLeft -= b64.length
    this.content.push({ type: 'image', data: b64, mimeType })
  }
}

function addResult(reply, result) {
  const data = result.data || {}
  const image = IMAGE_KINDS.find((m) => typeof data[m] === 'string' && data[m])
  if (image) reply.image(data[image], image)
  const plain = data['text/plain']
  const usefulPlain = typeof plain === 'string' && plain !== '' && !EMPTY_REPR.test(plain.trim())
  const label = result.isMainResult && result.executionCount != null ? `Out[${result.executionCount}]` : 'Out'
  if (usefulPlain && !image) reply.text(`${label}: ${clip(plain, LIMITS.richChars, 'result')}`)
  const rich = TEXT_KINDS.find((m) => typeof data[m] === 'string' && data[m])
  const richWanted = rich && (!usefulPlain || rich === 'text/markdown' || rich === 'application/json')
  if (richWanted && !(image && rich === 'image/svg+xml'))
    reply.text(`[${rich}]\n${clip(data[rich], LIMITS.richChars, 'result')}`)
  // E2B-shaped chart data, where the library provides it.
  if (result.chart != null && typeof result.chart === 'object') {
    let json
    try {
      json = JSON.stringify(result.chart)
    } catch {
      json = null
    }
    if (json) reply.text(`[chart data]\n${clip(json, LIMITS.richChars, 'chart data')}`)
  }
}

/** The status line: exit, fault, and what was left out. Never clipped. */
function statusLines(r, reply, stateLost) {
  const lines = []
  if (r.fault) {
    const kind = r.fault.type === 'timeout' ? 'timed out' : `sandbox fault: ${r.fault.type}`
    lines.push(`[${kind}: ${clip(r.fault.message || '', 500, 'message')}]`)
  } else {
    lines.push(`[exit ${r.exitCode}]`)
  }
  if (r.fault && r.fault.type === 'startup_failed')
    lines.push("[the box did not start: check the server's image and knobs]")
  if (stateLost) lines.push(`[${stateLost}]`)
  if (r.error && !r.fault) lines.push(`[${clip(`${r.error.name}: ${r.error.value}`, 500, 'error')}]`)
  if (reply.imagesOmitted) lines.push(`[${reply.imagesOmitted} image(s) left out: image budget of this reply]`)
  if (reply.budget.clipped) lines.push('[reply clipped: text budget of this reply]')
  if (r.truncated) lines.push('[the box printed past its capture cap: the rest of its output was discarded]')
  return lines.join('\n')
}

/** `r` (an ExecutionResult, kern's notes already stripped from its stderr) as a CallToolResult. */
function runCodeReply(r, { language, warmKernel, stateLost = null }) {
  const reply = new Reply()
  const stdout = r.stdout || ''
  const stderr = r.stderr || ''
  let clipped = false
  if (stdout !== '') {
    const s = clipMiddle(stdout, LIMITS.streamChars, 'stdout')
    clipped ||= s !== stdout
    reply.text(s)
  }
  if (stderr.trim() !== '') {
    const s = clipMiddle(stderr, LIMITS.streamChars, 'stderr')
    clipped ||= s !== stderr
    reply.text(`[stderr]\n${s}`)
  }
  for (const result of r.results || []) {
    if (reply.budget.clipped && reply.imageLeft <= 0) break
    addResult(reply, result)
  }
  if (reply.content.length === 0) reply.content.push({ type: 'text', text: '(no output)' })
  reply.content.push({ type: 'text', text: statusLines(r, reply, stateLost) })
  return {
    content: reply.content,
    isError: !r.success,
    structuredContent: {
      exitCode: r.exitCode,
      success: r.success,
      fault: r.fault ? { type: r.fault.type, message: clip(r.fault.message || '', 500, 'message') } : null,
      error: r.error ? { name: clip(r.error.name, 200, 'name'), value: clip(r.error.value, 500, 'value') } : null,
      files: (r.files || [])
        .slice(0, 100)
        .map((f) => ({ path: clip(f.path, 300, 'path'), size: f.size, change: f.change })),
      results: (r.results || [])
        .slice(0, 100)
        .map((x) => ({ mimeTypes: Object.keys(x.data || {}).slice(0, 20), main: !!x.isMainResult })),
      language,
      warmKernel,
      stateLost: !!stateLost,
      clipped: clipped || reply.budget.clipped || reply.imagesOmitted > 0 || !!r.truncated,
      durationMs: r.durationMs ?? 0,
    },
  }
}

/** A tool failure the model should see and can act on (bad path, missing file, ...). */
function errorReply(message) {
  return { content: [{ type: 'text', text: clip(message, 2_000, 'message') }], isError: true }
}

/** A run_code failure before any code ran, in run_code's structured shape. */
function runCodeErrorReply(message, { language, warmKernel }) {
  return {
    ...errorReply(message),
    structuredContent: {
      exitCode: -1,
      success: false,
      fault: null,
      error: null,
      files: [],
      results: [],
      language,
      warmKernel,
      stateLost: false,
      clipped: false,
      durationMs: 0,
    },
  }
}

module.exports = { runCodeOutput, runCodeReply, errorReply, runCodeErrorReply }
