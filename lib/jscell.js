'use strict'
// Preparing a JavaScript or TypeScript cell on the host, where it is only text, for the in-box
// driver (src/kernel/js): types stripped by amaro (Node's own type stripper, swc underneath),
// then, with acorn's syntax tree, the cell made notebook-like:
//  - top-level const/let/var/class and import bindings become globals (`var` hoisted on the
//    first line), so later cells see them and may declare them again;
//  - a cell with top-level await (static import lines become awaited dynamic imports) runs in
//    an async arrow whose value is the trailing expression's; any other cell runs as a plain
//    script, whose completion value is that expression's: no function to compile, no promise
//    to settle (`sync`), which is most of a small cell's cost in the driver.
// Edits stay on their own lines (and keep columns where they can), so stacks point at the
// user's lines. The result is the JSON the driver takes: { code, col, guard, sync } or
// { syntaxError }.

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
  } catch (first) {
    let e = first
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

/** An edit that puts spaces for a span of source, its newlines kept. */
function blankEdit(code, start, end) {
  return { start, end, text: code.slice(start, end).replace(/[^\n]/g, ' ') }
}

/** `var x;`: declares names, does nothing at run time. */
function isBareVar(node) {
  return node.type === 'VariableDeclaration' && node.kind === 'var' && node.declarations.every((d) => !d.init)
}

const FUNCTIONS = new Set(['FunctionDeclaration', 'FunctionExpression', 'ArrowFunctionExpression'])
const RUNS_CODE = /^(For|ForIn|ForOf|While|DoWhile)Statement$|^(Call|New|TaggedTemplate)Expression$/

// Calls that end on their own, as far as the syntax tells: console's methods and display() (they
// format their arguments, never call them), Math's functions, JSON.stringify with no replacer,
// and a string literal's methods given no value that could be a function. Anything they reach
// through a getter, a coercion or a custom inspect is as unguarded as code a getter runs.

/** Whether evaluating `node` runs no loop and no function but those calls. */
function bounded(node) {
  switch (node.type) {
    case 'Literal':
    case 'Identifier':
    case 'ThisExpression':
      return true
    case 'TemplateLiteral':
      return node.expressions.every(bounded)
    case 'MemberExpression':
      return bounded(node.object) && (!node.computed || bounded(node.property))
    case 'UnaryExpression':
    case 'UpdateExpression':
      return bounded(node.argument)
    case 'BinaryExpression':
    case 'LogicalExpression':
    case 'AssignmentExpression':
      return bounded(node.left) && bounded(node.right)
    case 'ConditionalExpression':
      return bounded(node.test) && bounded(node.consequent) && bounded(node.alternate)
    case 'SequenceExpression':
      return node.expressions.every(bounded)
    case 'ArrayExpression':
      return node.elements.every((e) => e === null || (e.type !== 'SpreadElement' && bounded(e)))
    case 'ObjectExpression':
      return node.properties.every(
        (p) =>
          p.type === 'Property' &&
          p.kind === 'init' &&
          !p.method &&
          (!p.computed || bounded(p.key)) &&
          bounded(p.value),
      )
    case 'ChainExpression':
      return bounded(node.expression)
    case 'CallExpression':
      return boundedCall(node)
    default:
      return false // functions, classes, new, tagged templates, yield, await, spreads
  }
}

/** A value that cannot be a function: built of literals and operators only. */
function plainValue(node) {
  switch (node.type) {
    case 'Literal':
      return true
    case 'TemplateLiteral':
      return node.expressions.every(plainValue)
    case 'UnaryExpression':
      return plainValue(node.argument)
    case 'BinaryExpression':
      return plainValue(node.left) && plainValue(node.right)
    default:
      return false
  }
}

function boundedCall(node) {
  const { callee } = node
  const args = node.arguments
  if (args.some((a) => a.type === 'SpreadElement' || !bounded(a))) return false
  if (callee.type === 'Identifier') return callee.name === 'display'
  if (callee.type !== 'MemberExpression' || callee.computed) return false
  const owner = callee.object
  const method = callee.property.name
  if (owner.type === 'Identifier') {
    if (owner.name === 'console' || owner.name === 'Math') return true
    return owner.name === 'JSON' && method === 'stringify' && args.slice(1).every((a) => a.type === 'Literal')
  }
  const stringLiteral =
    (owner.type === 'Literal' && typeof owner.value === 'string') ||
    (owner.type === 'TemplateLiteral' && bounded(owner))
  return stringLiteral && args.every(plainValue)
}

/** One pass over the cell's tree, for what the rewrite needs to know beyond its top-level
 * statements (an ESTree walk is a good part of preparing a long cell):
 *  - every `import(...)` expression, anywhere, calls the driver's importer instead (a name of the
 *    keyword's length, so columns stay): node refuses `import()` in vm scripts without a flag;
 *  - `guard`: whether the synchronous part can run for long, a loop or a call (outside function
 *    bodies, which run only when called) but to the builtins above. Only such a cell runs under
 *    V8's SIGINT watchdog, which costs a thread and a reinstalled signal handler per cell (some
 *    50-90 us in node 18); the others end on their own;
 *  - `awaits`: whether it awaits at its top level (`await`, `for await`, `await using`, or an
 *    import line, which becomes an awaited import), so it must run as an async function. */
function scan(tree, edits) {
  let guard = false
  let awaits = false
  const visit = (node, inFunction) => {
    const type = node.type
    if (type === 'ImportExpression') edits.push({ start: node.start, end: node.start + 6, text: '__kimp' })
    if (FUNCTIONS.has(type)) inFunction = true
    else if (!inFunction) {
      if (!guard && RUNS_CODE.test(type) && !(type === 'CallExpression' && boundedCall(node))) guard = true
      if (type === 'AwaitExpression' || type === 'ImportDeclaration' || (type === 'ForOfStatement' && node.await))
        awaits = true
      if (type === 'VariableDeclaration' && node.kind === 'await using') awaits = true
    }
    for (const key in node) {
      const v = node[key]
      if (v === null || typeof v !== 'object') continue
      if (Array.isArray(v)) {
        for (const x of v) if (x !== null && typeof x.type === 'string') visit(x, inFunction)
      } else if (typeof v.type === 'string') visit(v, inFunction)
    }
  }
  visit(tree, false)
  return { guard, awaits }
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
  else if (def || named.length)
    text = `;({${[def && `default: ${def}`, ...named].filter(Boolean).join(', ')}} = ${call});`
  else text = `;${call};`
  const lines = code.slice(node.start, node.end).split('\n').length - 1
  return { start: node.start, end: node.end, text: text + '\n'.repeat(lines) }
}

/** Edits that make one top-level declaration assign globals instead. */
function declarationEdits(code, node, names, exported, edits) {
  if (node.type === 'VariableDeclaration') {
    if (!['var', 'let', 'const'].includes(node.kind)) return // `using`: stays the cell's own
    if (isBareVar(node)) {
      // `var x;` changes nothing at run time (the names are declared up front): no statement
      // is left of it, so it cannot become a script's completion value.
      for (const d of node.declarations) patternNames(d.id, names)
      edits.push(blankEdit(code, node.start, node.end))
      return
    }
    const k = node.kind.length
    edits.push({ start: node.start, end: node.start + k, text: ';(' + ' '.repeat(k - 2) })
    for (const d of node.declarations) {
      patternNames(d.id, names)
      if (!d.init && node.kind !== 'var') edits.push({ start: d.id.end, end: d.id.end, text: ' = undefined' })
    }
    // The `;` ends the statement that the declaration was: a next line opening with `(` or `[`
    // must not read as a call or an index of this expression.
    const last = node.declarations[node.declarations.length - 1]
    edits.push({ start: last.end, end: last.end, text: ');' })
  } else if (node.type === 'FunctionDeclaration' && node.id) {
    names.push(node.id.name)
    exported.push(node.id.name)
  } else if (node.type === 'ClassDeclaration' && node.id) {
    names.push(node.id.name)
    edits.push({ start: node.start, end: node.start, text: `;${node.id.name} = ` })
    edits.push({ start: node.end, end: node.end, text: ';' })
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

/** One cell, prepared: parsed, its statements rewritten, wrapped, the edits applied. */
function prepare(source, typescript) {
  const parsed = parseCell(source, typescript)
  if (parsed.syntaxError) return JSON.stringify(parsed)
  const { code, tree, comments } = parsed
  // import() edits go after the body's: one at the trailing expression's start follows its `return (`.
  const importEdits = []
  const { guard, awaits } = scan(tree, importEdits)
  const sync = !awaits
  const cell = rewriteStatements(code, tree.body, comments, sync)
  cell.edits.push(...importEdits)
  const { prefix, suffix } = wrapper(cell, prologueEnd(tree.body), sync)
  return JSON.stringify({ code: applyEdits(code, cell.edits, prefix, suffix), col: -prefix.length, guard, sync })
}

/** The cell as JavaScript (types stripped, a hashbang line made a comment) and its syntax tree
 * and comments; or the syntax error payload. */
function parseCell(source, typescript) {
  let code = source
  if (typescript) {
    const stripped = stripTypes(code)
    if (stripped.syntaxError) return stripped
    code = stripped.code
  }
  if (code.startsWith('#!')) code = '//' + code.slice(2)
  const comments = []
  warm(false)
  try {
    return { code, comments, tree: acorn.parse(code, { ...PARSE, onComment: comments }) }
  } catch (e) {
    const message = String(e.message).replace(/ \(\d+:\d+\)$/, '')
    return syntaxError(code, message, e.loc?.line ?? 0, e.loc?.column ?? 0)
  }
}

/** Whether the `i`th top-level statement is a directive ('use strict'). A string alone as the
 * last statement is the cell's value, not a directive. */
function isDirective(body, node, i) {
  return (
    node.type === 'ExpressionStatement' &&
    node.directive !== undefined &&
    (i < body.length - 1 || /^use /.test(node.directive))
  )
}

/** Where the directive prologue ends (0: none). Directives must stay first in the arrow's body,
 * so what the wrapper declares or exports goes after them. */
function prologueEnd(body) {
  let end = 0
  for (const [i, node] of body.entries()) {
    if (!isDirective(body, node, i)) break
    end = node.end
  }
  return end
}

/** The index of the statement that is the cell's value if it is an expression: the last one, not
 * counting `var x;` lines (no effect at run time; swc's transform mode appends them for enums and
 * namespaces). */
function trailingIndex(body) {
  let last = body.length - 1
  while (last > 0 && isBareVar(body[last])) last--
  return last
}

/** The edits for every top-level statement, in order, and what the wrapper needs to know of them:
 * the global `names` they declare, the function names an async cell copies to globalThis,
 * whether there is a trailing expression, and whether its `return (` goes in the wrapper. */
function rewriteStatements(code, body, comments, sync) {
  const cell = { names: [], exported: [], edits: [], trailing: false, returnInPrefix: false }
  const last = trailingIndex(body)
  body.forEach((node, i) => {
    switch (node.type) {
      case 'ImportDeclaration':
        cell.edits.push(importEdit(code, node, cell.names))
        break
      case 'ExportNamedDeclaration':
      case 'ExportDefaultDeclaration':
        exportEdits(code, node, cell.names, cell.exported, cell.edits)
        break
      case 'ExportAllDeclaration':
        cell.edits.push(blankEdit(code, node.start, node.end))
        break
      case 'ExpressionStatement':
        if (i === last && !isDirective(body, node, i)) {
          cell.trailing = true
          // A script's completion value is this statement's; an async cell returns it.
          if (!sync) cell.returnInPrefix = returnEdits(code, node, comments, cell.edits)
        }
        break
      default:
        declarationEdits(code, node, cell.names, cell.exported, cell.edits)
    }
  })
  return cell
}

/** Edits that drop `export` (and `export default`) from a top-level statement, keeping what it
 * declares. */
function exportEdits(code, node, names, exported, edits) {
  const d = node.declaration
  if (node.type === 'ExportDefaultDeclaration' && d && /Declaration$/.test(d.type) && !d.id) {
    // `export default function () {}`: with the export gone, a nameless declaration is no
    // statement; as an expression it is what the export was.
    edits.push(blankEdit(code, node.start, d.start))
    edits.push({ start: d.start, end: d.start, text: '(' })
    edits.push({ start: d.end, end: d.end, text: ');' })
  } else if (d && /Declaration$/.test(d.type)) {
    edits.push(blankEdit(code, node.start, d.start))
    declarationEdits(code, d, names, exported, edits)
  } else if (d) {
    edits.push(blankEdit(code, node.start, d.start))
  } else {
    edits.push(blankEdit(code, node.start, node.end))
  }
}

/** Edits that make the trailing expression statement `node` an async cell's return value; true
 * when its `return (` goes at the end of the wrapper's prefix instead (see returnAt). */
function returnEdits(code, node, comments, edits) {
  const at = returnAt(code, node.start, comments)
  if (at !== 'prefix') edits.push({ start: at, end: at, text: at === node.start ? 'return (' : ';return (' })
  const end = code[node.end - 1] === ';' ? node.end - 1 : node.end
  edits.push({ start: end, end, text: ')' })
  return at === 'prefix'
}

/** The text before and after the rewritten cell; what goes after a directive prologue is added to
 * `cell.edits`. */
function wrapper(cell, prologue, sync) {
  const unique = [...new Set(cell.names)]
  const vars = unique.length ? `var ${unique.join(', ')}; ` : ''
  if (sync) {
    // A script's top-level functions are globals already. Its last line is the wrapper's own: an
    // empty statement keeps the trailing expression's value, `void 0` stands in for none (a
    // directive or a declaration would otherwise be the completion value).
    if (prologue !== 0 && vars) cell.edits.push({ start: prologue, end: prologue, text: '; ' + vars })
    return { prefix: prologue === 0 ? vars : '', suffix: cell.trailing ? '\n;' : '\n;void 0' }
  }
  let prefix = vars + '(async () => {'
  const exports = cell.exported.map((n) => `globalThis.${n} = ${n}; `).join('')
  if (prologue === 0) prefix += exports
  else if (exports) cell.edits.push({ start: prologue, end: prologue, text: '; ' + exports })
  if (cell.returnInPrefix) prefix += 'return ('
  return { prefix, suffix: '\n})()' }
}

/** `code` with `edits` applied (by start; edits at one place in the order they were made). */
function applyEdits(code, edits, prefix, suffix) {
  edits.sort((a, b) => a.start - b.start)
  let out = prefix
  let pos = 0
  for (const e of edits) {
    out += code.slice(pos, e.start) + e.text
    pos = Math.max(pos, e.end)
  }
  return out + code.slice(pos) + suffix
}

module.exports = { prepareCell, warm }
