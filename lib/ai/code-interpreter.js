'use strict'
// codeInterpreterTool(kernelOrMachine, opts): an AI SDK tool (ai's `tool()` + `jsonSchema()`, no
// zod) that runs Python, JavaScript or TypeScript in a warm kernel. Its result is plain JSON (text,
// error, rich results with images as base64); toModelOutput turns it into what the model sees:
// one text part, then per chart its data as text and its image as an image part.

const { tool, jsonSchema } = require('ai')
const { invalid, checkCount, clipText } = require('../adapters.js')

const LANGUAGES = {
  python: 'python',
  javascript: 'javascript',
  js: 'javascript',
  typescript: 'typescript',
  ts: 'typescript',
}
/** Longest cell a model may send, characters. */
const MAX_CODE = 1024 * 1024
const DEFAULT_MAX_OUTPUT_BYTES = 32 * 1024
const DEFAULT_MAX_IMAGES = 8
/** An image larger than this (base64 characters) is left out of the model's input, with a note. */
const DEFAULT_MAX_IMAGE_BYTES = 4 * 1024 * 1024

const TEXT_FORMATS = [
  ['text/plain', 'text'],
  ['text/markdown', 'markdown'],
  ['text/html', 'html'],
  ['application/json', 'json'],
  ['text/latex', 'latex'],
  ['image/svg+xml', 'svg'],
]

function isKernel(x) {
  return x && typeof x.runCode === 'function' && typeof x.language === 'string' && typeof x.exec !== 'function'
}
function isMachine(x) {
  return x && typeof x.kernel === 'function' && typeof x.exec === 'function'
}

/** A Result as JSON: its text formats clipped, its images as base64, its chart as data. */
function resultJson(r, maxBytes) {
  const out = { isMainResult: Boolean(r.isMainResult) }
  const data = r.data || {}
  for (const [mime, key] of TEXT_FORMATS) {
    if (typeof data[mime] === 'string') out[key] = clipText(data[mime], maxBytes).text
  }
  if (typeof data['image/png'] === 'string') out.png = data['image/png']
  if (typeof data['image/jpeg'] === 'string') out.jpeg = data['image/jpeg']
  if (r.chart) out.chart = JSON.parse(JSON.stringify(r.chart))
  return out
}

function toolOutput(language, r, maxBytes) {
  const stdout = clipText(r.stdout, maxBytes)
  const stderr = clipText(r.stderr, maxBytes)
  return {
    language,
    exitCode: r.exitCode,
    stdout: stdout.text,
    stderr: stderr.text,
    truncated: Boolean(r.truncated || stdout.clipped || stderr.clipped),
    error: r.error
      ? { name: r.error.name, value: r.error.value, traceback: clipText(r.error.traceback || '', maxBytes).text }
      : null,
    fault: r.fault ? { type: r.fault.type, message: r.fault.message } : null,
    results: (r.results || []).map((x) => resultJson(x, maxBytes)),
  }
}

/** What the model sees of one run: a text summary, then each image (with its chart as text). */
function modelOutput(output, { maxImages, maxImageBytes }) {
  const text = []
  if (output.stdout) text.push(`stdout:\n${output.stdout}`)
  if (output.stderr) text.push(`stderr:\n${output.stderr}`)
  if (output.error) text.push(`error: ${output.error.name}: ${output.error.value}\n${output.error.traceback}`)
  if (output.fault) text.push(`sandbox fault (${output.fault.type}): ${output.fault.message}`)
  if (output.truncated) text.push('(output truncated)')
  const parts = []
  let images = 0
  for (const r of output.results) {
    const label = r.isMainResult ? 'result' : 'display'
    for (const key of ['text', 'markdown', 'json', 'latex']) {
      if (r[key] !== undefined && !(key === 'text' && (r.png || r.jpeg) && /^<Figure/.test(r.text))) {
        text.push(`${label} (${key}):\n${r[key]}`)
        break
      }
    }
    const image = r.png ? ['image/png', r.png] : r.jpeg ? ['image/jpeg', r.jpeg] : null
    if (!image) continue
    const chartText = r.chart ? `chart data (${r.chart.type}):\n${JSON.stringify(r.chart)}` : 'image:'
    if (images >= maxImages) {
      parts.push({ type: 'text', text: `${chartText}\n(image left out: more than ${maxImages} images)` })
    } else if (image[1].length > maxImageBytes) {
      parts.push({ type: 'text', text: `${chartText}\n(image left out: ${image[1].length} base64 bytes)` })
    } else {
      images++
      parts.push({ type: 'text', text: chartText })
      parts.push({ type: 'file', mediaType: image[0], data: { type: 'data', data: image[1] } })
    }
  }
  if (text.length === 0) text.push(output.exitCode === 0 ? '(no output)' : `exit code ${output.exitCode}`)
  return { type: 'content', value: [{ type: 'text', text: text.join('\n\n') }, ...parts] }
}

/**
 * @param kernelOrMachine a Kernel (runs its own language) or a Machine (a warm kernel per language,
 *   started inside it on first use and again if one dies)
 */
function codeInterpreterTool(kernelOrMachine, opts = {}) {
  if (!isKernel(kernelOrMachine) && !isMachine(kernelOrMachine)) {
    throw invalid('codeInterpreterTool needs a Kernel (sbx.kernel()) or a Machine (sbx.machine())')
  }
  if (typeof opts !== 'object' || opts === null) throw invalid('options must be an object')
  const maxOutputBytes = checkCount(opts.maxOutputBytes, 'maxOutputBytes', DEFAULT_MAX_OUTPUT_BYTES)
  const maxImages = checkCount(opts.maxImages, 'maxImages', DEFAULT_MAX_IMAGES, { min: 0 })
  const maxImageBytes = checkCount(opts.maxImageBytes, 'maxImageBytes', DEFAULT_MAX_IMAGE_BYTES)
  const timeoutS = opts.timeoutS === undefined ? undefined : checkCount(opts.timeoutS, 'timeoutS', undefined)
  const fixed = isKernel(kernelOrMachine) ? kernelOrMachine : null
  const languages = fixed ? [fixed.language] : (opts.languages ?? ['python', 'javascript', 'typescript'])
  for (const l of languages) if (!LANGUAGES[l]) throw invalid(`unknown language ${JSON.stringify(l)}`)
  const allowed = [...new Set(languages.map((l) => LANGUAGES[l]))]
  const kernels = new Map()

  async function kernelFor(language) {
    if (fixed) return fixed
    let k = kernels.get(language)
    if (k) {
      const live = await k.catch(() => null)
      if (live && live.alive) return live
    }
    k = kernelOrMachine.kernel({ language, ...(timeoutS !== undefined ? { timeoutS } : {}) })
    kernels.set(language, k)
    return k
  }

  const properties = {
    code: { type: 'string', description: 'The code to run. State (variables, imports) persists between calls.' },
  }
  if (allowed.length > 1) {
    properties.language = { type: 'string', enum: allowed, description: `Default ${allowed[0]}.` }
  }
  return tool({
    description:
      opts.description ??
      `Runs ${allowed.join(', ')} code in a warm, sandboxed interpreter and returns its output. ` +
        'The value of the last expression, display() calls and matplotlib figures come back as results; ' +
        'each chart is returned as an image together with its data.',
    inputSchema: jsonSchema({ type: 'object', properties, required: ['code'], additionalProperties: false }),
    async execute(input, { abortSignal } = {}) {
      if (!input || typeof input.code !== 'string') throw invalid('code must be a string')
      if (input.code.length > MAX_CODE) throw invalid(`code is longer than ${MAX_CODE} characters`)
      const language = input.language === undefined ? allowed[0] : LANGUAGES[input.language]
      if (!allowed.includes(language)) throw invalid(`language must be one of ${allowed.join(', ')}`)
      abortSignal?.throwIfAborted()
      const kernel = await kernelFor(language)
      const r = await kernel.runCode(input.code, {
        ...(abortSignal ? { signal: abortSignal } : {}),
        ...(timeoutS !== undefined ? { timeoutS } : {}),
      })
      return toolOutput(language, r, maxOutputBytes)
    },
    toModelOutput: ({ output }) => modelOutput(output, { maxImages, maxImageBytes }),
  })
}

module.exports = { codeInterpreterTool }
