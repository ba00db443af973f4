'use strict'
// Reading a hand-kept .d.ts with the TypeScript compiler API, and a class's runtime members: what
// the drift tests of the two entries (drift.test.js, e2b-drift.test.js) compare.

const assert = require('node:assert/strict')
const ts = require('typescript')

const isExported = (n) => (ts.getCombinedModifierFlags(n) & ts.ModifierFlags.Export) !== 0
const isStatic = (n) => (ts.getCombinedModifierFlags(n) & ts.ModifierFlags.Static) !== 0

/** `foo`, `"foo"` or `[Symbol.asyncDispose]` → the runtime key (a string, or the well-known symbol). */
function memberKey(name) {
  if (ts.isIdentifier(name) || ts.isStringLiteral(name)) return name.text
  if (
    ts.isComputedPropertyName(name) &&
    ts.isPropertyAccessExpression(name.expression) &&
    name.expression.expression.getText() === 'Symbol'
  ) {
    return Symbol[name.expression.name.text]
  }
  throw new Error(`index.d.ts: cannot map member name ${name.getText()}`)
}

/** Declared value exports: kind, and for classes their members (kind, optional, parameters). */
function declaredValues(source) {
  const values = new Map()
  for (const st of source.statements) {
    if (ts.isClassDeclaration(st) && isExported(st)) {
      const members = new Map()
      const statics = new Map()
      for (const m of st.members) {
        if (ts.isConstructorDeclaration(m) || !m.name) continue
        const entry = {
          kind: ts.isMethodDeclaration(m) ? 'method' : 'property',
          optional: Boolean(m.questionToken),
          params: m.parameters ? m.parameters.length : 0,
        }
        ;(isStatic(m) ? statics : members).set(memberKey(m.name), entry)
      }
      values.set(st.name.text, {
        kind: 'class',
        members,
        statics,
        heritage: st.heritageClauses?.[0]?.types[0]?.expression.getText() ?? null,
      })
    } else if (ts.isFunctionDeclaration(st) && isExported(st)) {
      const prev = values.get(st.name.text)
      const params = Math.max(prev ? prev.params : 0, st.parameters.length)
      values.set(st.name.text, { kind: 'function', params })
    } else if (ts.isEnumDeclaration(st) && isExported(st)) {
      const members = new Map(
        st.members.map((m) => [
          memberKey(m.name),
          m.initializer && ts.isStringLiteral(m.initializer) ? m.initializer.text : undefined,
        ]),
      )
      values.set(st.name.text, { kind: 'enum', members })
    } else if (ts.isExportDeclaration(st) && !st.isTypeOnly && st.exportClause && ts.isNamedExports(st.exportClause)) {
      // `export { A, B } from "./other"`: values declared elsewhere.
      for (const el of st.exportClause.elements) if (!el.isTypeOnly) values.set(el.name.text, { kind: 'reexport' })
    } else if (ts.isVariableStatement(st) && isExported(st)) {
      for (const d of st.declarationList.declarations) values.set(d.name.text, { kind: 'const' })
    }
  }
  return values
}

function declaredInterface(source, name) {
  const decl = source.statements.find((s) => ts.isInterfaceDeclaration(s) && s.name.text === name)
  assert.ok(decl, `index.d.ts declares no interface ${name}`)
  return decl.members.filter((m) => m.name).map((m) => memberKey(m.name))
}

/** Public members a class's instances have at run time: its prototype chain up to (not including)
 * Object/Error, plus the own fields of a sample instance when one can be made without a kern. */
function runtimeMembers(Class, sample) {
  const keys = new Set()
  for (let p = Class.prototype; p && p !== Object.prototype && p !== Error.prototype; p = Object.getPrototypeOf(p)) {
    for (const k of Reflect.ownKeys(p)) if (k !== 'constructor') keys.add(k)
  }
  if (sample) for (const k of Reflect.ownKeys(sample)) keys.add(k)
  return keys
}

const show = (k) => (typeof k === 'symbol' ? k.toString() : k)

module.exports = { declaredValues, declaredInterface, runtimeMembers, memberKey, show }
