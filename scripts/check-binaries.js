#!/usr/bin/env node
'use strict'
// Checks built addons with readelf: the right ELF machine, a shared object, stripped, the napi entry
// point exported, and the libc it links: gnu builds need nothing newer than glibc 2.17 (so they load
// on old distributions), musl builds need musl's libc only and no glibc symbol versions.
//
//   node scripts/check-binaries.js [DIR] [--require-all] [--max-bytes N]
//
// DIR (default: the repo root, where `napi build --platform` puts the addon) holds
// <binaryName>.<platform>.node files. Prints a table; exits 1 if a present addon fails a check, or,
// with --require-all, if a target's addon is missing. Used by build-all.js and the release workflow.

const fs = require('node:fs')
const path = require('node:path')
const cp = require('node:child_process')
const { repo, targets, GLIBC_BASELINE } = require('./targets.js')

/** The size budget for the x64 gnu addon; every target is held to it. */
const MAX_BYTES = 3 * 1000 * 1000

const GLIBC_LIBS =
  /^(libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libgcc_s\.so\.1|ld-linux[-\w.]*\.so\.\d)$/
const MUSL_LIBS = /^(libc\.so|libc\.musl-[\w]+\.so\.1|ld-musl-[\w]+\.so\.1)$/

function readelf(args, file) {
  return cp.execFileSync('readelf', [...args, file], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
}

function cmpVersion(a, b) {
  const pa = a.split('.').map(Number)
  const pb = b.split('.').map(Number)
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] || 0) - (pb[i] || 0)
    if (d) return d
  }
  return 0
}

/** Everything readelf tells about one addon, and what is wrong with it for `target`. */
function inspect(file, target, { maxBytes = MAX_BYTES } = {}) {
  const problems = []
  const size = fs.statSync(file).size
  if (size > maxBytes) problems.push(`${size} bytes, over the ${maxBytes}-byte budget`)

  const header = readelf(['-h'], file)
  const machine = (/Machine:\s+(.+)/.exec(header) || [])[1]?.trim() ?? '?'
  const type = (/Type:\s+(\w+)/.exec(header) || [])[1] ?? '?'
  if (machine !== target.elfMachine) problems.push(`machine ${machine}, expected ${target.elfMachine}`)
  if (type !== 'DYN') problems.push(`ELF type ${type}, expected DYN (a shared object)`)

  const dynamic = readelf(['-d', '-W'], file)
  const needed = [...dynamic.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1])

  const sections = readelf(['-S', '-W'], file)
  const stripped = !/\s\.symtab\s/.test(sections) && !/\s\.debug_\w+\s/.test(sections)
  if (!stripped) problems.push('not stripped (.symtab or .debug_* present)')

  const program = readelf(['-l', '-W'], file)
  const interp = (/Requesting program interpreter: ([^\]]+)\]/.exec(program) || [])[1] ?? null
  if (interp) problems.push(`has a program interpreter (${interp}): not a plain shared object`)

  const dynsyms = readelf(['--dyn-syms', '-W'], file)
  const exportsEntry = dynsyms.split('\n').some((l) => / napi_register_module_v1$/.test(l) && !/\bUND\b/.test(l))
  if (!exportsEntry) problems.push('napi_register_module_v1 is not exported')

  const versions = readelf(['-V', '-W'], file)
  const glibcVersions = [...new Set([...versions.matchAll(/GLIBC_(\d+(?:\.\d+)+)/g)].map((m) => m[1]))].sort(cmpVersion)
  const glibcMax = glibcVersions.length ? glibcVersions[glibcVersions.length - 1] : null

  if (target.abi === 'gnu') {
    const odd = needed.filter((n) => !GLIBC_LIBS.test(n))
    if (odd.length) problems.push(`needs non-glibc libraries: ${odd.join(', ')}`)
    if (!needed.includes('libc.so.6')) problems.push('does not link libc.so.6')
    if (!glibcMax) problems.push('no GLIBC_ symbol versions found')
    else if (cmpVersion(glibcMax, GLIBC_BASELINE) > 0) {
      problems.push(
        `needs glibc ${glibcMax}, newer than the ${GLIBC_BASELINE} baseline (build with \`napi build -x --target ${target.buildTarget}\`)`,
      )
    }
  } else {
    const odd = needed.filter((n) => !MUSL_LIBS.test(n))
    if (odd.length) problems.push(`needs non-musl libraries: ${odd.join(', ')}`)
    if (!needed.some((n) => MUSL_LIBS.test(n))) problems.push("does not link musl's libc")
    if (glibcMax) problems.push(`references glibc symbol versions (up to GLIBC_${glibcMax})`)
  }

  return {
    file,
    triple: target.triple,
    size,
    machine,
    type,
    needed,
    stripped,
    interp,
    exportsEntry,
    glibcMax,
    problems,
  }
}

function table(rows, columns) {
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c] ?? '').length)))
  const line = (cells) =>
    cells
      .map((v, i) => String(v ?? '').padEnd(widths[i]))
      .join('  ')
      .trimEnd()
  return [
    line(columns),
    line(widths.map((w) => '-'.repeat(w))),
    ...rows.map((r) => line(columns.map((c) => r[c]))),
  ].join('\n')
}

/** One row per target for `dir`: the inspection, or why there is none. */
function checkDir(dir, { requireAll = false, maxBytes = MAX_BYTES } = {}) {
  return targets.map((t) => {
    const file = path.join(dir, t.nodeFile)
    if (!fs.existsSync(file)) {
      return { target: t, missing: true, problems: requireAll ? [`${t.nodeFile} not found in ${dir}`] : [] }
    }
    return { target: t, ...inspect(file, t, { maxBytes }) }
  })
}

function summaryRow(r) {
  if (r.missing) {
    return { target: r.target.triple, file: '(not built)', status: r.problems.length ? 'FAIL' : 'skip' }
  }
  return {
    target: r.target.triple,
    file: path.basename(r.file),
    size: `${(r.size / 1e6).toFixed(2)} MB`,
    machine: r.machine.replace('Advanced Micro Devices ', ''),
    libc: r.needed.find((n) => /^libc\./.test(n)) ?? '-',
    needed: r.needed.length,
    'glibc max': r.glibcMax ?? '-',
    stripped: r.stripped ? 'yes' : 'NO',
    'napi entry': r.exportsEntry ? 'yes' : 'NO',
    status: r.problems.length ? 'FAIL' : 'ok',
  }
}

const COLUMNS = ['target', 'file', 'size', 'machine', 'libc', 'needed', 'glibc max', 'stripped', 'napi entry', 'status']

function main(argv) {
  let dir = repo
  let requireAll = false
  let maxBytes = MAX_BYTES
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--require-all') requireAll = true
    else if (argv[i] === '--max-bytes') maxBytes = Number(argv[++i])
    else if (argv[i].startsWith('-')) throw new Error(`unknown option ${argv[i]}`)
    else dir = path.resolve(argv[i])
  }
  const rows = checkDir(dir, { requireAll, maxBytes })
  console.log(table(rows.map(summaryRow), COLUMNS))
  const bad = rows.filter((r) => r.problems.length)
  for (const r of bad) console.error(`${r.target.triple}: ${r.problems.join('; ')}`)
  if (!rows.some((r) => !r.missing)) {
    console.error(`no addon found in ${dir}`)
    return 1
  }
  return bad.length ? 1 : 0
}

module.exports = { inspect, checkDir, summaryRow, table, COLUMNS, MAX_BYTES }

if (require.main === module) process.exitCode = main(process.argv.slice(2))
