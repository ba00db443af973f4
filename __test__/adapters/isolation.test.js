'use strict'
// The frameworks are optional peers: `require('kern-sandbox')` (and its ESM import) loads none
// of them, and each entry loads only its own framework.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const cp = require('node:child_process')

const repo = path.resolve(__dirname, '..', '..')
const FRAMEWORKS = ['ai', '@ai-sdk', '@openai', '@mastra', 'deepagents', 'langchain', '@langchain', 'langsmith']

/** The framework packages a fresh node process loads for `code`: every module Node loads, CommonJS
 * or ES (require() of an ES module, as ai 7 is, never shows in require.cache), from NODE_DEBUG. */
function loadedAfter(code) {
  const r = cp.spawnSync(process.execPath, ['-e', code], {
    cwd: repo,
    encoding: 'utf8',
    maxBuffer: 512 * 1024 * 1024,
    env: { ...process.env, NODE_DEBUG: 'module,esm' },
  })
  assert.equal(r.status, 0, r.stderr.slice(-2000))
  const seen = new Set()
  const loads = /^(?:MODULE \d+: load "|ESM \d+: Translating \w+ file:\/\/)([^"\s]+)/gm
  for (const [, file] of r.stderr.matchAll(loads)) {
    const m = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(file)
    if (m) seen.add(m[1])
  }
  return [...seen].filter((n) => FRAMEWORKS.some((f) => n === f || n.startsWith(`${f}/`)))
}

test("require('kern-sandbox') loads no framework", () => {
  assert.deepEqual(loadedAfter("require('kern-sandbox')"), [])
  assert.deepEqual(loadedAfter("import('kern-sandbox')"), [])
})

test("require('kern-sandbox/ai') loads ai, and no other framework", () => {
  const loaded = loadedAfter("require('kern-sandbox/ai')")
  assert.ok(loaded.includes('ai'), JSON.stringify(loaded))
  assert.deepEqual(
    loaded.filter((n) => !(n === 'ai' || n.startsWith('@ai-sdk/'))),
    [],
  )
})

test("require('kern-sandbox/openai-agents') loads @openai/agents-core, and no other framework", () => {
  const loaded = loadedAfter("require('kern-sandbox/openai-agents')")
  assert.ok(loaded.includes('@openai/agents-core'), JSON.stringify(loaded))
  assert.deepEqual(
    loaded.filter((n) => !n.startsWith('@openai/')),
    [],
  )
})

test("require('kern-sandbox/mastra') loads @mastra/core, and no other framework", () => {
  const loaded = loadedAfter("require('kern-sandbox/mastra')")
  assert.ok(loaded.includes('@mastra/core'), JSON.stringify(loaded))
  // @mastra/core itself depends on some @ai-sdk packages; no other framework entry is loaded.
  assert.deepEqual(
    loaded.filter((n) => !n.startsWith('@mastra/') && !n.startsWith('@ai-sdk/') && n !== 'ai'),
    [],
  )
})

test("require('kern-sandbox/langchain') loads deepagents and LangChain, and no other framework", () => {
  const loaded = loadedAfter("require('kern-sandbox/langchain')")
  assert.ok(loaded.includes('deepagents'), JSON.stringify(loaded))
  assert.deepEqual(
    loaded.filter((n) => !['deepagents', 'langchain', 'langsmith'].includes(n) && !n.startsWith('@langchain/')),
    [],
  )
})
