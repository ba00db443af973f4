'use strict'
// Checks that imports run one way: no circle between the top-level modules of each Rust crate
// (src/, agent/src/, the stand-in) or between the files and folders of lib/ and mcp/lib/. Prints
// each circle with the edges that close it and exits 1; with --graph, prints the modules bottom
// layer first, each with what it imports. Run by `npm run lint`.
//
// Rust: a file belongs to its crate's top-level module (src/machine/procs.rs is `machine`; the
// crate root lib.rs/main.rs is `(root)`). An edge is a `crate::name` path (`use crate::{a, b}`
// too), a `super::name` at the top level, or in the root a path starting with one of its modules.
// Comments and literals are skipped. JS: an edge is a relative require() within the folder.

const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.join(__dirname, '..')
const ROOT_MODULE = '(root)'

function walk(dir, ext, out = []) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name)
    if (e.isDirectory()) walk(p, ext, out)
    else if (e.name.endsWith(ext)) out.push(p)
  }
  return out
}

/** Adds `from -> to` for `file` to the graph (a Map of Maps of file sets). */
function addEdge(graph, from, to, file) {
  if (from === to) return
  if (!graph.has(from)) graph.set(from, new Map())
  const targets = graph.get(from)
  if (!targets.has(to)) targets.set(to, new Set())
  targets.get(to).add(path.relative(ROOT, file))
}

const CHAR = /^'(?:\\.[^']*|[^\\'])'/

/** Rust source with comments removed and string and char literals emptied. */
function stripRust(src) {
  let out = ''
  let i = 0
  while (i < src.length) {
    const rest = src.slice(i, i + 2)
    if (rest === '//') {
      while (i < src.length && src[i] !== '\n') i++
    } else if (rest === '/*') {
      const end = src.indexOf('*/', i + 2)
      i = end < 0 ? src.length : end + 2
    } else if (src[i] === '"' || /^r#*"/.test(src.slice(i, i + 8))) {
      // A plain string, or a raw one (r"..", r#".."#) that ends at the same number of hashes.
      const raw = src.slice(i).match(/^r(#*)"/)
      const close = raw ? `"${raw[1]}` : '"'
      let j = i + (raw ? raw[0].length : 1)
      while (j < src.length && !src.startsWith(close, j)) j += !raw && src[j] === '\\' ? 2 : 1
      out += '""'
      i = j + close.length
    } else if (src[i] === "'" && CHAR.test(src.slice(i, i + 12))) {
      // A char literal ('x', '\'', '\u{..}'); a lifetime ('a) is left as it is.
      i += src.slice(i, i + 12).match(CHAR)[0].length
      out += "' '"
    } else out += src[i++]
  }
  return out
}

/** How many braces are open at `end`. */
function braceDepth(src, end) {
  let depth = 0
  for (let i = 0; i < end; i++) depth += src[i] === '{' ? 1 : src[i] === '}' ? -1 : 0
  return depth
}

/** The first names of `crate::{a, b::c, d}`'s items, braces nested. */
function groupHeads(group) {
  const heads = []
  let depth = 0
  let item = ''
  for (const ch of group) {
    if (ch === '{') depth++
    if (ch === '}') depth--
    if (ch === ',' && depth === 0) {
      heads.push(item)
      item = ''
    } else item += ch
  }
  heads.push(item)
  return heads.map((s) => s.trim().match(/^\w+/)?.[0]).filter(Boolean)
}

function rustGraph(srcDir, rootFile) {
  const graph = new Map()
  const files = walk(srcDir, '.rs')
  const modules = new Set()
  const moduleOf = (file) => {
    const rel = path.relative(srcDir, file)
    if (rel === rootFile) return ROOT_MODULE
    return rel.split(path.sep)[0].replace(/\.rs$/, '')
  }
  for (const f of files) if (moduleOf(f) !== ROOT_MODULE) modules.add(moduleOf(f))
  // A root-level name: one of the modules, or an item of the root itself.
  const target = (name) => (modules.has(name) ? name : ROOT_MODULE)
  for (const file of files) {
    const from = moduleOf(file)
    const rel = path.relative(srcDir, file)
    const topLevel = !rel.includes(path.sep) || rel.endsWith(`${path.sep}mod.rs`)
    const src = stripRust(fs.readFileSync(file, 'utf8'))
    for (const m of src.matchAll(/\bcrate::(?:\{([^;]*?)\}\s*;|(\w+))/g)) {
      const names = m[1] !== undefined ? groupHeads(m[1]) : [m[2]]
      for (const name of names) addEdge(graph, from, target(name), file)
    }
    if (from === ROOT_MODULE) {
      for (const m of src.matchAll(/(?<![\w:])(\w+)::/g)) {
        if (modules.has(m[1])) addEdge(graph, from, m[1], file)
      }
    } else if (topLevel) {
      // Only outside braces: `super` in an inline `mod tests { .. }` is this file's own module.
      for (const m of src.matchAll(/\bsuper::(?:\{([^;]*?)\}\s*;|(\w+))/g)) {
        if (braceDepth(src, m.index) > 0) continue
        const names = m[1] !== undefined ? groupHeads(m[1]) : [m[2]]
        for (const name of names) addEdge(graph, from, target(name), file)
      }
    }
  }
  return graph
}

/** Edges between a JS folder's files, and between its subfolders and top-level files. */
function jsGraphs(libDir) {
  const files = new Map()
  const folders = new Map()
  const unit = (file) => {
    const rel = path.relative(libDir, file).split(path.sep)
    return rel.length > 1 ? `${rel[0]}/` : rel[0]
  }
  for (const file of walk(libDir, '.js')) {
    const src = fs.readFileSync(file, 'utf8').replace(/^\s*\/\/.*$/gm, '')
    for (const m of src.matchAll(/\brequire\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/g)) {
      const dep = path.resolve(path.dirname(file), m[1])
      if (!dep.startsWith(libDir + path.sep)) continue
      addEdge(files, path.relative(ROOT, file), path.relative(ROOT, dep), file)
      addEdge(folders, unit(file), unit(dep), file)
    }
  }
  return [files, folders]
}

/** Tarjan's strongly connected components of more than one node: the circles. */
function circles(graph) {
  const index = new Map()
  const low = new Map()
  const stack = []
  const onStack = new Set()
  const found = []
  let next = 0
  const visit = (v) => {
    index.set(v, next)
    low.set(v, next++)
    stack.push(v)
    onStack.add(v)
    for (const w of graph.get(v)?.keys() ?? []) {
      if (!index.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v), low.get(w)))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)))
    }
    if (low.get(v) === index.get(v)) {
      const scc = []
      let w
      do {
        w = stack.pop()
        onStack.delete(w)
        scc.push(w)
      } while (w !== v)
      if (scc.length > 1) found.push(scc.sort())
    }
  }
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v)
  return found
}

/** Nodes bottom first: each only imports nodes listed before it (the graph has no circle). */
function layers(graph) {
  const nodes = new Set(graph.keys())
  for (const targets of graph.values()) for (const t of targets.keys()) nodes.add(t)
  const order = []
  const placed = new Set()
  while (placed.size < nodes.size) {
    const ready = [...nodes]
      .filter((n) => !placed.has(n) && [...(graph.get(n)?.keys() ?? [])].every((t) => placed.has(t)))
      .sort()
    if (ready.length === 0) break
    order.push(ready)
    for (const n of ready) placed.add(n)
  }
  return order
}

const showGraph = process.argv.includes('--graph')
let failed = false
const graphs = [
  ['src/ (modules)', rustGraph(path.join(ROOT, 'src'), 'lib.rs')],
  ['agent/src/ (modules)', rustGraph(path.join(ROOT, 'agent', 'src'), 'main.rs')],
  ['__test__/kern-standin/src/ (modules)', rustGraph(path.join(ROOT, '__test__', 'kern-standin', 'src'), 'main.rs')],
  ...jsGraphs(path.join(ROOT, 'lib')).map((g, i) => [i === 0 ? 'lib/ (files)' : 'lib/ (folders)', g]),
  ...jsGraphs(path.join(ROOT, 'mcp', 'lib')).map((g, i) => [i === 0 ? 'mcp/lib/ (files)' : 'mcp/lib/ (folders)', g]),
]
for (const [name, graph] of graphs) {
  const found = circles(graph)
  for (const scc of found) {
    failed = true
    console.error(`${name}: circle between ${scc.join(', ')}`)
    for (const from of scc) {
      for (const [to, by] of graph.get(from) ?? []) {
        if (scc.includes(to)) console.error(`  ${from} -> ${to}  (${[...by].sort().join(', ')})`)
      }
    }
  }
  if (showGraph) {
    console.log(`${name}, bottom layer first:`)
    for (const layer of found.length ? [] : layers(graph)) {
      console.log(
        `  ${layer.map((n) => `${n} -> [${[...(graph.get(n)?.keys() ?? [])].sort().join(', ')}]`).join('; ')}`,
      )
    }
  }
}
if (failed) process.exit(1)
