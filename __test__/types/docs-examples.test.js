'use strict'
// Every ```js and ```ts block of README.md and docs/*.md must type-check against the package's own
// declarations (index.d.ts, lib/e2b/entry.d.ts), as a user who pastes it would see it: so an
// example cannot drift from the API it shows. Blocks are collected from the Markdown on every run
// (nothing to keep in step by hand) and compiled in memory with the TypeScript compiler API under the
// node16 options of tsconfig.json plus checkJs, so `require("kern-sandbox")` in a JS block is typed
// too. Blocks are only compiled, never run: the suites that run code cover what they do.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const ts = require('typescript')

const repo = path.resolve(__dirname, '..', '..')
// The framework guides are left out: their blocks are fragments of a framework's agent loop (its
// `model`, its `tool()`), and the complete programs they come from are examples/*.js, which the
// adapters' tests run and type-check against the frameworks' own declarations.
const FRAMEWORK_GUIDES = new Set(['ai-sdk.md', 'openai-agents.md', 'mastra.md', 'langchain.md'])
const DOCS = [
  'README.md',
  ...fs
    .readdirSync(path.join(repo, 'docs'))
    .filter((f) => !FRAMEWORK_GUIDES.has(f))
    .map((f) => path.join('docs', f)),
].filter((f) => f.endsWith('.md'))

// Names the examples use without defining them, the way prose around them introduces them: `kern`
// is the package, `sbx` an open Sandbox, `m` a machine, `code` and `csvBytes` the caller's. A
// block that defines one of them shadows it.
const GLOBALS = `
declare const kern: typeof import('kern-sandbox')
declare const sbx: import('kern-sandbox').Sandbox
declare const m: import('kern-sandbox').Machine
declare const fs: typeof import('node:fs')
declare const code: string
declare const csvBytes: Buffer
`

/** The ```js / ```ts blocks of one Markdown file, with the line each one's code starts on. */
function blocksOf(file) {
  const lines = fs.readFileSync(path.join(repo, file), 'utf8').split('\n')
  const blocks = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(js|ts)\s*$/.exec(lines[i])
    if (!open) continue
    const start = i + 1
    let end = start
    while (end < lines.length && !/^```\s*$/.test(lines[end])) end++
    blocks.push({ file, lang: open[1], line: start + 1, code: lines.slice(start, end) })
    i = end
  }
  return blocks
}

/** A block as a source file: its code in an async function (top-level `await` is how examples are
 * written), import lines of a TS block hoisted above it. Returns the text and how many lines come
 * before the block's first line. */
function wrap(block) {
  const imports = block.lang === 'ts' ? block.code.filter((l) => /^import\s/.test(l)) : []
  const body = block.code.filter((l) => !imports.includes(l))
  const head = [...imports, 'void (async () => {']
  return { text: [...head, ...body, '})()', 'export {}', ''].join('\n'), offset: head.length }
}

function compilerOptions() {
  const configPath = path.join(__dirname, 'tsconfig.json')
  const config = ts.readConfigFile(configPath, ts.sys.readFile)
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, __dirname)
  // Errors inside dependencies' own declarations are theirs, not the examples'.
  return { ...parsed.options, allowJs: true, checkJs: true, noEmit: true, skipLibCheck: true }
}

const blocks = DOCS.flatMap(blocksOf)

test('README.md and docs/*.md have code blocks to check', () => {
  assert.ok(
    blocks.some((b) => b.file === 'README.md'),
    'no ```js block found in README.md',
  )
  assert.ok(
    blocks.some((b) => b.file.startsWith('docs')),
    'no ```js block found in docs/',
  )
})

test('every ```js and ```ts block of README.md and docs/*.md type-checks', () => {
  const virtual = new Map()
  const origin = new Map()
  const globalsPath = path.join(__dirname, 'doc-blocks', 'globals.d.ts')
  virtual.set(globalsPath, GLOBALS)
  for (const b of blocks) {
    const name = `${b.file.replace(/[/.]/g, '_')}_${b.line}.${b.lang}`
    const file = path.join(__dirname, 'doc-blocks', name)
    const { text, offset } = wrap(b)
    virtual.set(file, text)
    origin.set(file, { block: b, offset })
  }
  const options = compilerOptions()
  const host = ts.createCompilerHost(options)
  const { getSourceFile, fileExists, readFile } = host
  host.fileExists = (f) => virtual.has(path.resolve(f)) || fileExists.call(host, f)
  host.readFile = (f) => virtual.get(path.resolve(f)) ?? readFile.call(host, f)
  host.getSourceFile = (f, lang, ...rest) =>
    virtual.has(path.resolve(f))
      ? ts.createSourceFile(f, virtual.get(path.resolve(f)), lang, true)
      : getSourceFile.call(host, f, lang, ...rest)
  const program = ts.createProgram([...virtual.keys()], options, host)
  const problems = ts.getPreEmitDiagnostics(program).map((d) => {
    const text = ts.flattenDiagnosticMessageText(d.messageText, '\n')
    const from = d.file && origin.get(path.resolve(d.file.fileName))
    if (!from) return `${d.file ? d.file.fileName : '(no file)'}: TS${d.code} ${text}`
    const { line } = d.file.getLineAndCharacterOfPosition(d.start)
    return `${from.block.file}:${from.block.line + line - from.offset}: TS${d.code} ${text}`
  })
  assert.deepEqual(problems, [], `code blocks that do not type-check:\n${problems.join('\n')}`)
})
