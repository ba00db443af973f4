'use strict'
// Preparing a JavaScript or TypeScript cell on the host, where it is only text, for the in-box
// driver (src/kernel/js): types stripped by amaro (Node's own type stripper, swc underneath),
// then, with acorn's syntax tree, the cell made notebook-like:
//  - top-level const/let/var/class and import bindings become globals (`var` hoisted on the
//    first line), so later cells see them and may declare them again;
//  - the body runs in an async arrow, so top-level await works; static import lines become
//    awaited dynamic imports; the trailing expression is the arrow's value.
// Edits stay on their own lines (and keep columns where they can), so stacks point at the
// user's lines. The result is the JSON the driver takes: { code, col } or { syntaxError }.

const { SandboxError } = require('./errors.js')

// Dependencies of the package, loaded on the first JavaScript/TypeScript kernel or cell, so Python
// alone never pays for loading them (amaro's WebAssembly takes a while).
let acorn = null
let amaro = null

function dependency(name, what) {
  try {
    return require(name)
  } catch (e) {
    // Only an install that left them out (--omit, a pruned bundle) gets here.
    if (e && e.code === 'MODULE_NOT_FOUND') {
      throw new SandboxError(
        `${what} cells are prepared on the host with the \`${name}\` package, a dependency of ` +
          'kern-sandbox that is missing from this install: `npm install acorn amaro` next to kern-sandbox',
      )
    }
    throw e
  }
}

/** Loads what preparing a cell needs, so a missing package fails kernel() rather than a cell; the
 * type stripper's WebAssembly also takes a while to load. */
function warm(typescript) {
  acorn ??= dependency('acorn', 'JavaScript and TypeScript')
  if (typescript) amaro ??= dependency('amaro', 'TypeScript')
}

const PARSE = {
  ecmaVersion: 'latest',
  sourceType: 'script',
  allowAwaitOutsideFunction: true,
  allowImportExportEverywhere: true,
  allowHashBang: true,
}

/** A SyntaxError payload at a 1-based line and 0-based column of `code`. */
function syntaxError(code, message, line, column) {
  const source = line > 0 ? code.split('\n')[line - 1] : undefined
  return { syntaxError: { message, line, column, source: source?.slice(0, 500) } }
}

/** Types out, positions kept; enum/namespace/parameter properties need swc's transform mode,
 * which reprints the code (line numbers then follow the printed code). */
function stripTypes(code) {
  warm(true)
  try {
    return { code: amaro.transformSync(code, { mode: 'strip-only' }).code }
  } catch (e) {
    if (e && e.code === 'UnsupportedSyntax') {
      try {
        return { code: amaro.transformSync(code, { mode: 'transform', sourceMap: false }).code }
      } catch (e2) {
        e = e2
      }
    }
    const message = e && typeof e.message === 'string' ? e.message : String(e)
    return syntaxError(code, message, Number(e?.startLine) || 0, Number(e?.startColumn) || 0)
  }
}

/** The names a binding pattern declares. */
function patternNames(p, out) {
  switch (p.type) {
    case 'Identifier':
      out.push(p.name)
      break
    case 'ObjectPattern':
      for (const prop of p.properties) patternNames(prop.type === 'RestElement' ? prop.argument : prop.value, out)
      break
    case 'ArrayPattern':
      for (const el of p.elements) if (el) patternNames(el, out)
      break
    case 'RestElement':
      patternNames(p.argument, out)
      break
    case 'AssignmentPattern':
      patternNames(p.left, out)
      break
  }
  return out
}

/** Spaces for a span of source, its newlines kept. */
function blank(code, start, end) {
  return code.slice(start, end).replace(/[^\n]/g, ' ')
}

/** Every `import(...)` expression, anywhere in the cell, calls the driver's importer instead (a
 * name of the keyword's length, so columns stay): node refuses `import()` in vm scripts without
 * a flag. */
function dynamicImportEdits(tree, edits) {
  acornWalk(tree, (node) => {
    if (node.type === 'ImportExpression') edits.push({ start: node.start, end: node.start + 6, text: '__kimp' })
  })
}

/** Calls `visit` on every node of an ESTree tree; `visit` returning false skips its children. */
function acornWalk(node, visit) {
  if (visit(node) === false) return
  for (const key of Object.keys(node)) {
    const v = node[key]
    if (Array.isArray(v)) {
      for (const x of v) if (x && typeof x.type === 'string') acornWalk(x, visit)
    } else if (v && typeof v.type === 'string') acornWalk(v, visit)
  }
}

const FUNCTIONS = new Set(['FunctionDeclaration', 'FunctionExpression', 'ArrowFunctionExpression'])
const RUNS_CODE = /^(For|ForIn|ForOf|While|DoWhile)Statement$|^(Call|New|TaggedTemplate)Expression$/

/** Whether the cell's synchronous part can run for long: a loop or a call outside function bodies
 * (which run only when called). Only such a cell runs under V8's SIGINT watchdog, which costs a
 * thread per cell; the others end on their own (code reached through getters or coercions
 * aside). */
function mayLoop(tree) {
  let found = false
  acornWalk(tree, (node) => {
    if (found || FUNCTIONS.has(node.type)) return false
    if (RUNS_CODE.test(node.type)) found = true
  })
  return found
}

/** `import ... from 'm'` as an awaited dynamic import assigning the same (global) names. */
function importEdit(code, node, names) {
  const attrs = (node.attributes || []).map((a) => {
    const key = a.key.type === 'Identifier' ? a.key.name : a.key.value
    return `${JSON.stringify(key)}: ${JSON.stringify(a.value.value)}`
  })
  const call = `await __kimp(${JSON.stringify(node.source.value)}${attrs.length ? `, { with: {${attrs.join(', ')}} }` : ''})`
  let def = null
  let ns = null
  const named = []
  for (const s of node.specifiers) {
    names.push(s.local.name)
    if (s.type === 'ImportDefaultSpecifier') def = s.local.name
    else if (s.type === 'ImportNamespaceSpecifier') ns = s.local.name
    else {
      const imported = s.imported.type === 'Identifier' ? s.imported.name : s.imported.value
      named.push(`${JSON.stringify(imported)}: ${s.local.name}`)
    }
  }
  let text
  if (ns) text = `;(${ns} = ${call}${def ? `, ${def} = ${ns}.default` : ''});`
  else if (def || named.length) text = `;({${[def && `default: ${def}`, ...named].filter(Boolean).join(', ')}} = ${call});`
  else text = `;${call};`
  const lines = code.slice(node.start, node.end).split('\n').length - 1
  return { start: node.start, end: node.end, text: text + '\n'.repeat(lines) }
}

/** Edits that make one top-level declaration assign globals instead. */
function declarationEdits(code, node, names, exported, edits) {
  if (node.type === 'VariableDeclaration') {
    if (!['var', 'let', 'const'].includes(node.kind)) return // `using`: stays the cell's own
    const k = node.kind.length
    edits.push({ start: node.start, end: node.start + k, text: ';(' + ' '.repeat(k - 2) })
    for (const d of node.declarations) {
      patternNames(d.id, names)
      if (!d.init && node.kind !== 'var') edits.push({ start: d.id.end, end: d.id.end, text: ' = undefined' })
    }
    const last = node.declarations[node.declarations.length - 1]
    edits.push({ start: last.end, end: last.end, text: ')' })
  } else if (node.type === 'FunctionDeclaration' && node.id) {
    names.push(node.id.name)
    exported.push(node.id.name)
  } else if (node.type === 'ClassDeclaration' && node.id) {
    names.push(node.id.name)
    edits.push({ start: node.start, end: node.start, text: `;${node.id.name} = ` })
  }
}

/** Where `return (` goes before the trailing expression at `start` so that its line and column
 * stay: in the wrapper's prefix when it opens the cell, at the end of the line before when it
 * opens a line (unless a // comment ends that line), else right before it. */
function returnAt(code, start, comments) {
  const lineStart = code.lastIndexOf('\n', start - 1) + 1
  if (!/^[ \t]*$/.test(code.slice(lineStart, start))) return start
  if (lineStart === 0) return 'prefix'
  let eol = lineStart - 1
  if (code[eol - 1] === '\r') eol -= 1
  if (comments.some((c) => c.type === 'Line' && c.end === eol)) return start
  return eol
}

// Prepared cells by source: a notebook runs the same cell again, an agent retries one. A pure
// function of the source, so a bounded memo is safe; oldest out first.
const prepared = new Map()
const MEMO_ENTRIES = 128
const MEMO_SOURCE_MAX = 16 * 1024

/** The driver's payload for one cell (a JSON text). */
function prepareCell(source, { typescript = false } = {}) {
  if (source.length > MEMO_SOURCE_MAX) return prepare(source, typescript)
  const key = (typescript ? 't' : 'j') + source
  let got = prepared.get(key)
  if (got === undefined) {
    got = prepare(source, typescript)
    if (prepared.size >= MEMO_ENTRIES) prepared.delete(prepared.keys().next().value)
    prepared.set(key, got)
  }
  return got
}

function prepare(source, typescript) {
  let code = source
  if (typescript) {
    const stripped = stripTypes(code)
    if (stripped.syntaxError) return JSON.stringify(stripped)
    code = stripped.code
  }
  if (code.startsWith('#!')) code = '//' + code.slice(2)
  let tree
  const comments = []
  warm(false)
  try {
    tree = acorn.parse(code, { ...PARSE, onComment: comments })
  } catch (e) {
    const message = String(e.message).replace(/ \(\d+:\d+\)$/, '')
    return JSON.stringify(syntaxError(code, message, e.loc?.line ?? 0, e.loc?.column ?? 0))
  }
  const names = []
  const exported = []
  const edits = []
  const body = tree.body
  // Directives ('use strict') must stay first in the arrow's body: exports go after them. A
  // string alone as the last statement is the cell's value, not a directive.
  const isDirective = (node, i) =>
    node.type === 'ExpressionStatement' && node.directive !== undefined && (i < body.length - 1 || /^use /.test(node.directive))
  let prologueEnd = 0
  for (const [i, node] of body.entries()) {
    if (!isDirective(node, i)) break
    prologueEnd = node.end
  }
  let returnInPrefix = false
  // The trailing expression is the last statement, not counting `var x;` lines (no effect at
  // run time; swc's transform mode appends them for enums and namespaces).
  let last = body.length - 1
  while (last > 0 && body[last].type === 'VariableDeclaration' && body[last].kind === 'var' && body[last].declarations.every((d) => !d.init)) last--
  body.forEach((node, i) => {
    switch (node.type) {
      case 'ImportDeclaration':
        edits.push(importEdit(code, node, names))
        break
      case 'ExportNamedDeclaration':
      case 'ExportDefaultDeclaration':
        if (node.type === 'ExportDefaultDeclaration' && node.declaration && /Declaration$/.test(node.declaration.type) && !node.declaration.id) {
          // `export default function () {}`: with the export gone, a nameless declaration is no
          // statement; as an expression it is what the export was.
          const d = node.declaration
          edits.push({ start: node.start, end: d.start, text: blank(code, node.start, d.start) })
          edits.push({ start: d.start, end: d.start, text: '(' })
          edits.push({ start: d.end, end: d.end, text: ');' })
        } else if (node.declaration && /Declaration$/.test(node.declaration.type)) {
          edits.push({ start: node.start, end: node.declaration.start, text: blank(code, node.start, node.declaration.start) })
          declarationEdits(code, node.declaration, names, exported, edits)
        } else if (node.declaration) {
          edits.push({ start: node.start, end: node.declaration.start, text: blank(code, node.start, node.declaration.start) })
        } else {
          edits.push({ start: node.start, end: node.end, text: blank(code, node.start, node.end) })
        }
        break
      case 'ExportAllDeclaration':
        edits.push({ start: node.start, end: node.end, text: blank(code, node.start, node.end) })
        break
      case 'ExpressionStatement':
        if (i === last && !isDirective(node, i)) {
          const at = returnAt(code, node.start, comments)
          if (at === 'prefix') returnInPrefix = true
          else edits.push({ start: at, end: at, text: at === node.start ? 'return (' : ';return (' })
          const end = code[node.end - 1] === ';' ? node.end - 1 : node.end
          edits.push({ start: end, end, text: ')' })
        }
        break
      default:
        declarationEdits(code, node, names, exported, edits)
    }
  })
  dynamicImportEdits(tree, edits)
  const guard = mayLoop(tree)
  const unique = [...new Set(names)]
  let prefix = (unique.length ? `var ${unique.join(', ')}; ` : '') + '(async () => {'
  const exports = exported.map((n) => `globalThis.${n} = ${n}; `).join('')
  if (prologueEnd === 0) prefix += exports
  else if (exports) edits.push({ start: prologueEnd, end: prologueEnd, text: '; ' + exports })
  if (returnInPrefix) prefix += 'return ('
  edits.sort((a, b) => a.start - b.start)
  let out = prefix
  let pos = 0
  for (const e of edits) {
    out += code.slice(pos, e.start) + e.text
    pos = Math.max(pos, e.end)
  }
  out += code.slice(pos) + '\n})()'
  return JSON.stringify({ code: out, col: -prefix.length, guard })
}

module.exports = { prepareCell, warm }
