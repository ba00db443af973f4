'use strict'
// The one table of language names: the languages every entry point runs (Sandbox#runCode,
// Sandbox#kernel, the e2b entry's contexts, the MCP server), their other names, and the error for
// any other name. The native side gets the `native` name (src/kernel/language.rs parses it).

const { coded } = require('./errors.js')
const { show } = require('./options.js')

/** Each language: the name the native side runs it as, whether a kernel can run it, and whether
 * its cells are TypeScript (a JavaScript cell with its types stripped on the host first). */
const LANGUAGES = {
  python: { name: 'python', native: 'python', kernel: true, typescript: false },
  bash: { name: 'bash', native: 'bash', kernel: false, typescript: false },
  javascript: { name: 'javascript', native: 'javascript', kernel: true, typescript: false },
  typescript: { name: 'typescript', native: 'javascript', kernel: true, typescript: true },
}
for (const l of Object.values(LANGUAGES)) Object.freeze(l)

/** Other names for them (exact, lower case). */
const ALIASES = { python3: 'python', sh: 'bash', node: 'javascript', js: 'javascript', ts: 'typescript' }

/** Names people ask for that no kernel here runs, answered plainly. */
const NOT_OFFERED = { r: 'R', java: 'Java' }

/** Every accepted name, canonical ones first. */
const LANGUAGE_NAMES = Object.freeze([...Object.keys(LANGUAGES), ...Object.keys(ALIASES)])

/** How the accepted names read in a message, for a kernel or for any call. */
function accepted(kernel) {
  const list = Object.keys(LANGUAGES)
    .filter((n) => !kernel || LANGUAGES[n].kernel)
    .map((n) => {
      const other = Object.keys(ALIASES).filter((a) => ALIASES[a] === n)
      return other.length ? `'${n}' (${other.map((a) => `'${a}'`).join(', ')})` : `'${n}'`
    })
  return `${list.slice(0, -1).join(', ')} or ${list[list.length - 1]}`
}

/** The language `name` names (case-sensitive), or a SandboxError with code
 * ERR_UNSUPPORTED_LANGUAGE. `kernel`: only languages a kernel runs. */
function resolveLanguage(name, { kernel = false } = {}) {
  const key = typeof name === 'string' && Object.hasOwn(ALIASES, name) ? ALIASES[name] : name
  const lang = typeof key === 'string' && Object.hasOwn(LANGUAGES, key) ? LANGUAGES[key] : null
  if (lang && (lang.kernel || !kernel)) return lang
  const what = kernel ? 'kernel language' : 'language'
  if (typeof name === 'string' && Object.hasOwn(NOT_OFFERED, name.toLowerCase())) {
    throw coded(
      'ERR_UNSUPPORTED_LANGUAGE',
      `unsupported ${what} ${show(name)}: kern-sandbox runs Python, JavaScript, TypeScript and bash, ` +
        'and has no R or Java kernel',
    )
  }
  throw coded('ERR_UNSUPPORTED_LANGUAGE', `unsupported ${what} ${show(name)} (expected ${accepted(kernel)})`)
}

module.exports = { LANGUAGES, LANGUAGE_NAMES, resolveLanguage }
