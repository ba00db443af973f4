#!/usr/bin/env node
'use strict'
// kern-sandbox benchmark: every row measured on our addon and on its reference (kern-sandbox 0.1.1
// or 0.1.23, a pipe floor, the bare kern CLI) in one run, alternating which goes first, several
// rounds, medians. A benchmark, not a test: it prints a table, writes JSON, and exits 0 whatever
// the numbers. Rows come in families, one module each under benchmark/families/.
//
//   npm run bench                  # default: 5 rounds (a few minutes)
//   npm run bench -- --quick       # 2 rounds, fewer iterations (about a minute)
//   KERN_BIN=/path/to/kern npm run bench   # adds the real-kern rows
//
// Options: --quick, --rounds N, --only ID,ID (row ids or family names), --out FILE, --no-real,
// --keep (fixtures), --dir DIR (fixtures, workspaces and TMPDIR of both implementations; default
// the temp dir), --rt (run the measurements under SCHED_FIFO via chrt, to shield them from other
// load; root), --list (families and row ids). See benchmark/README.md.

const fs = require('fs')
const os = require('os')
const path = require('path')
const { spawnSync } = require('child_process')
const runner = require('./lib/runner')
const { table } = require('./lib/table')

const { ROOT, IMPLS, TRUE_BIN, ctx, log, sync, rtPrefix } = runner

/** The families, in the order their rows are printed. */
const FAMILIES = [
  'binding',
  'snapshot',
  'cli',
  'oneshot',
  'kernels',
  'e2b',
  'machines',
  'forks',
  'pool',
  'proxy',
  'size',
].map((f) => require(`./families/${f}`))

function parseArgs(argv) {
  const a = {
    quick: false,
    rounds: null,
    only: null,
    out: path.join(__dirname, 'results.json'),
    real: true,
    keep: false,
    list: false,
    dir: null,
    rt: false,
  }
  for (let i = 0; i < argv.length; i++) {
    const v = argv[i]
    if (v === '--quick') a.quick = true
    else if (v === '--rounds') a.rounds = Math.max(1, parseInt(argv[++i], 10) || 1)
    else if (v === '--only') a.only = new Set(String(argv[++i]).split(','))
    else if (v === '--out') a.out = path.resolve(argv[++i])
    else if (v === '--no-real') a.real = false
    else if (v === '--keep') a.keep = true
    else if (v === '--list') a.list = true
    else if (v === '--dir') a.dir = path.resolve(argv[++i])
    else if (v === '--rt') a.rt = true
    else if (v === '--help' || v === '-h') {
      console.log(
        fs
          .readFileSync(__filename, 'utf8')
          .split('\n')
          .slice(2, 16)
          .map((l) => l.replace(/^\/\/ ?/, ''))
          .join('\n'),
      )
      process.exit(0)
    } else {
      console.error(`unknown option ${v} (try --help)`)
      process.exit(2)
    }
  }
  return a
}

/** Every family's setup() for the rows that will run, and the directories all real-kern rows share. */
function setupFixtures(selected) {
  const { fixtures, TMP } = ctx
  const t = Date.now()
  for (const { family, rows } of selected) {
    if (family.setup) family.setup((id) => rows.some((r) => r.id === id))
  }
  fixtures.emptyWs = path.join(TMP, 'ws-empty')
  fs.mkdirSync(fixtures.emptyWs)
  if (ctx.REAL_KERN) fixtures.realWs = path.join(TMP, 'ws-real')
  if (ctx.REAL_KERN) fs.mkdirSync(fixtures.realWs)
  sync()
  log(`fixtures ready in ${((Date.now() - t) / 1000).toFixed(1)} s under ${TMP}`)
}

function fsType(dir) {
  const r = spawnSync('stat', ['-f', '-c', '%T', dir], { encoding: 'utf8' })
  return (r.stdout || '').trim() || 'unknown'
}

function machine() {
  const cpus = os.cpus()
  let rev = null
  try {
    rev = spawnSync('git', ['-C', ROOT, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).stdout.trim() || null
    const dirty = spawnSync('git', ['-C', ROOT, 'status', '--porcelain', '--', 'src', 'index.js'], {
      encoding: 'utf8',
    }).stdout.trim()
    if (dirty) rev += '+dirty'
  } catch {}
  let addon = null
  try {
    const f = fs.readdirSync(ROOT).find((n) => n.endsWith('.node'))
    if (f) addon = { file: f, built: fs.statSync(path.join(ROOT, f)).mtime.toISOString() }
  } catch {}
  return {
    host: os.hostname(),
    kernel: os.release(),
    cpu: cpus[0] && cpus[0].model,
    cores: cpus.length,
    memGiB: +(os.totalmem() / 2 ** 30).toFixed(1),
    node: process.version,
    loadavg: os.loadavg().map((x) => +x.toFixed(2)),
    git: rev,
    addon,
  }
}

async function main(args) {
  if (args.list) {
    for (const f of FAMILIES) {
      console.log(`${f.name}: ${f.title}`)
      for (const r of f.rows) console.log(`  ${r.id.padEnd(15)} ${r.title}${r.real ? '  (only with KERN_BIN)' : ''}`)
    }
    return
  }
  if (args.only) {
    const known = new Set(FAMILIES.flatMap((f) => [f.name, ...f.rows.map((r) => r.id)]))
    const unknown = [...args.only].filter((x) => !known.has(x))
    if (unknown.length) log(`--only: no family or row named ${unknown.join(', ')} (try --list)`)
  }
  try {
    require.resolve(path.join(ROOT, 'binding.js'))
    if (!fs.readdirSync(ROOT).some((n) => n.endsWith('.node'))) throw new Error('no .node file')
  } catch {
    console.error('kern-sandbox: the native addon is not built. Run `npm run build` in the package root first.')
    process.exitCode = 1
    return
  }
  const { TMP, REAL_KERN, ROUNDS, Q } = ctx
  const wanted = (f, r) => !args.only || args.only.has(f.name) || args.only.has(r.id)
  const skipped = []
  const selected = []
  for (const family of FAMILIES) {
    const rows = family.rows.filter((r) => wanted(family, r))
    skipped.push(...rows.filter((r) => r.real && !REAL_KERN).map((r) => r.id))
    const runnable = rows.filter((r) => !r.real || REAL_KERN)
    if (runnable.length) selected.push({ family, rows: runnable })
  }
  const started = Date.now()
  const m0 = machine()
  m0.fixtureFs = fsType(TMP)
  log(
    `kern-sandbox bench: ${ROUNDS} rounds${Q ? ' (quick)' : ''}${rtPrefix().length ? ', SCHED_FIFO (--rt)' : ''}; ours=${IMPLS.ours}; reference=${IMPLS.ref}`,
  )
  log(`machine: ${m0.cores} × ${m0.cpu}, ${m0.memGiB} GiB, ${m0.kernel}, node ${m0.node}, load ${m0.loadavg.join(' ')}`)
  log(`fixtures and workspaces: ${TMP} (${m0.fixtureFs})`)
  if (REAL_KERN) log(`real kern: ${REAL_KERN}`)
  else log('real-kern rows skipped (set KERN_BIN=/path/to/kern to add them)')

  setupFixtures(selected)
  const results = {}
  const lines = []
  for (const { family, rows } of selected) {
    for (const row of rows) {
      log(`${row.id}: ${row.title}`)
      const t = Date.now()
      try {
        const r = await row.run()
        results[row.id] = {
          family: family.name,
          title: row.title,
          seconds: (Date.now() - t) / 1000,
          lines: r.lines,
          summary: r.summary,
          data: r.data,
        }
        lines.push(...r.lines)
      } catch (e) {
        results[row.id] = { family: family.name, title: row.title, error: String((e && e.stack) || e) }
        lines.push({
          row: row.title,
          metric: 'error',
          ours: '',
          ref: '',
          ratio: '',
          target: '',
          result: 'ERROR',
          errors: [String(e && e.message)],
        })
      }
    }
  }
  const { fixtures } = ctx
  const m1 = machine()
  const notes = [
    `do-nothing kern: KERN_BIN=${TRUE_BIN}; "the floor" = posix_spawn + waitpid of ${TRUE_BIN} from a C program (no binding, no Node). Rows marked [fake kern] use a stand-in that ignores its argv and only writes stdout:`,
    `  flood: ${fixtures.floodKern ? 'a sh script, `exec head -c 268435456 /dev/zero`' : '-'}; stream: ${fixtures.chunkKern ? fixtures.chunkKern.kind + ', 100,000 distinct lines "chunk NNNNNNN\\n"' : '-'}.`,
    `fixtures, workspaces and TMPDIR: ${m0.fixtureFs} (${path.dirname(TMP)}; --dir to change).`,
    'snapshot data: 2 × 50 MiB random bytes + 2 × 50 MiB CSV text + 2,000 text files of 1-4 KiB in 20 dirs; restore reads the archive our snapshot wrote.',
    'peak RSS growth: VmHWM (reset through /proc/self/clear_refs) minus VmRSS just before the operation, one fresh Node process per measurement.',
    `each figure: ${ROUNDS} rounds, ours and the reference alternating which goes first; per-call rows pool every call's wall time and take the median.`,
    rtPrefix().length
      ? 'measured under SCHED_FIFO (--rt): other load on the machine is mostly kept off the figures.'
      : 'measured at normal priority (--rt shields the figures from other load, as root).',
    `machine load: ${m0.loadavg.join(' ')} at the start, ${m1.loadavg.join(' ')} at the end (1/5/15-min load on ${m0.cores} cores; other work on the host skews all figures).`,
  ]
  if (skipped.length) notes.push(`skipped (no KERN_BIN): ${skipped.join(', ')}`)
  const failures = lines.filter((l) => l.errors).flatMap((l) => l.errors)

  console.log('')
  console.log(table(lines))
  const issueLines = lines.filter((l) => l.issue34)
  if (issueLines.length) {
    console.log('\nissue 34 figures (the rows above, each against its reference in this run):\n')
    console.log(table(issueLines.map((l) => ({ ...l, row: l.issue34, metric: l.metric.trim() }))))
  }
  console.log('')
  for (const n of notes) console.log(n)
  if (failures.length) {
    console.log('\nerrors:')
    for (const f of new Set(failures)) console.log(`  ${f.slice(0, 300)}`)
  }
  const doc = {
    date: new Date().toISOString(),
    durationS: (Date.now() - started) / 1000,
    rounds: ROUNDS,
    quick: Q,
    rt: rtPrefix().length > 0,
    machine: { ...m0, loadavgEnd: m1.loadavg },
    kern: { doNothing: TRUE_BIN, real: REAL_KERN },
    reference: IMPLS.ref,
    notes,
    table: lines.map(({ errors, ...l }) => ({ ...l, errors: errors || undefined })),
    rows: results,
  }
  fs.writeFileSync(args.out, JSON.stringify(doc, null, 2) + '\n')
  console.log(
    `\nwrote ${path.relative(process.cwd(), args.out) || args.out} in ${((Date.now() - started) / 1000).toFixed(0)} s`,
  )
}

const args = parseArgs(process.argv.slice(2))
if (!args.list) runner.init(args)
main(args)
  .catch((e) => {
    console.error('benchmark crashed:', e)
    process.exitCode = 1
  })
  .finally(() => {
    if (!ctx.TMP) return
    if (!args.keep) fs.rmSync(ctx.TMP, { recursive: true, force: true })
    else log(`fixtures kept in ${ctx.TMP}`)
  })
