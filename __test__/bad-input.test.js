'use strict'
// Bad input (issue 7): every public function and option, given wrong types, NaN, negative, huge
// (1e308, past Number.MAX_SAFE_INTEGER, 2**64), empty and NUL-laden values, fails cleanly: a
// SandboxError (a TypeError where index.js checks a JS type: code, paths, callbacks, signal,
// withSandbox's fn) whose message names the option or argument. Never a crash, never a hang (each
// call races a timer), never a native panic reaching JS ("panicked", "internal error").
//
// Each test walks a table of cases and reports every case that misbehaves at once.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { kern, tmpDir, sessionDirs } = require('./helpers')

const { Sandbox, SandboxError, MountRefused, withSandbox } = kern

// ---------------------------------------------------------------------------------------------
// values

const BIG_STRING = 'a'.repeat(100_000)

/** Values of the wrong JS type for a string option. */
const NOT_STRINGS = {
  number: 5,
  NaN: NaN,
  'negative number': -1,
  Infinity: Infinity,
  '1e308': 1e308,
  'MAX_SAFE_INTEGER + 2': Number.MAX_SAFE_INTEGER + 2,
  '2**64': 2 ** 64,
  boolean: true,
  object: {},
  array: ['x'],
  bigint: 10n,
  symbol: Symbol('s'),
  function: () => {},
}

/** Values of the wrong JS type for a number option. */
const NOT_NUMBERS = {
  string: '5',
  'empty string': '',
  'NUL-laden string': '1\0',
  boolean: true,
  object: {},
  array: [5],
  bigint: 10n,
  symbol: Symbol('n'),
  function: () => 5,
}

/** Numbers no count, size or duration can be. */
const BAD_NUMBERS = {
  NaN: NaN,
  '-1': -1,
  '-0.5': -0.5,
  0: 0,
  Infinity: Infinity,
  '-Infinity': -Infinity,
}

/** Numbers past any sane cap. */
const HUGE_NUMBERS = {
  '1e308': 1e308,
  'MAX_SAFE_INTEGER + 2': Number.MAX_SAFE_INTEGER + 2,
  '2**64': 2 ** 64,
}

/** Values of the wrong JS type for a boolean option. */
const NOT_BOOLEANS = {
  0: 0,
  1: 1,
  NaN: NaN,
  '1e308': 1e308,
  'string "true"': 'true',
  'empty string': '',
  'NUL-laden string': '\0',
  object: {},
  array: [],
  bigint: 1n,
  symbol: Symbol('b'),
  function: () => true,
}

/** Values that are not an array (for the string-list options). */
const NOT_ARRAYS = {
  string: 'ALL',
  'empty string': '',
  number: 5,
  NaN: NaN,
  '2**64': 2 ** 64,
  boolean: true,
  object: {},
  bigint: 10n,
  symbol: Symbol('a'),
  function: () => [],
}

/** Values of the wrong JS type for an options bag (null/undefined mean "no options"). */
const NOT_OPTION_BAGS = {
  string: 'bash',
  'empty string': '',
  number: 5,
  NaN: NaN,
  boolean: true,
  array: [],
  bigint: 10n,
  symbol: Symbol('o'),
}

/** Values that are not a function (for callbacks). */
const NOT_FUNCTIONS = {
  string: 'x',
  'empty string': '',
  number: 5,
  NaN: NaN,
  boolean: true,
  object: {},
  array: [],
  bigint: 1n,
  symbol: Symbol('f'),
}

/** Values that are not a string (for code and path arguments). */
const NOT_STRING_ARGS = { undefined: undefined, null: null, ...NOT_STRINGS }

// ---------------------------------------------------------------------------------------------
// running one case

const HANG_MS = 10_000

/** Runs `fn` (sync or async) against a timer: { ok, value } | { error } | { hung }. */
async function outcome(fn) {
  let timer
  const guard = new Promise((resolve) => {
    timer = setTimeout(() => resolve({ hung: true }), HANG_MS)
  })
  const run = (async () => {
    try {
      return { ok: true, value: await fn() }
    } catch (error) {
      return { error }
    }
  })()
  try {
    return await Promise.race([run, guard])
  } finally {
    clearTimeout(timer)
  }
}

const CLASSES = {
  SandboxError: (e) => e instanceof SandboxError,
  MountRefused: (e) => e instanceof MountRefused,
  TypeError: (e) => e instanceof TypeError,
  /** A wrong JS type: either is fine. */
  either: (e) => e instanceof SandboxError || e instanceof TypeError,
}

function show(v) {
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…(${v.length})` : v)
  if (typeof v === 'bigint') return `${v}n`
  if (typeof v === 'symbol' || typeof v === 'function') return String(v)
  if (Number.isNaN(v)) return 'NaN'
  try {
    return JSON.stringify(v) ?? String(v)
  } catch {
    return String(v)
  }
}

/** What is wrong with an outcome that should be a refusal of class `cls` naming `name`, or null. */
function refusalProblem(o, cls, name) {
  if (o.hung) return `did not settle within ${HANG_MS} ms`
  if (o.ok) return 'was accepted'
  const e = o.error
  if (!(e instanceof Error)) return `threw a non-Error: ${show(e)}`
  const msg = String(e.message)
  if (/panicked|internal error/i.test(msg)) return `a native panic reached JS: ${e.name}: ${msg}`
  if (!CLASSES[cls](e)) return `threw ${e.name} (${e.constructor && e.constructor.name}), want ${cls}: ${msg}`
  if (!name.test(msg)) return `message does not name ${name}: ${e.name}: ${msg}`
  return null
}

function acceptProblem(o) {
  if (o.hung) return `did not settle within ${HANG_MS} ms`
  if (!o.ok) return `was refused: ${o.error && o.error.name}: ${o.error && o.error.message}`
  return null
}

/** A table walker: collects problems, then asserts there are none (listing them all). */
function cases() {
  const problems = []
  return {
    async refused(label, fn, cls, name) {
      const p = refusalProblem(await outcome(fn), cls, name)
      if (p) problems.push(`${label}: ${p}`)
    },
    async accepted(label, fn) {
      const p = acceptProblem(await outcome(fn))
      if (p) problems.push(`${label}: ${p}`)
    },
    /** Refused with a message naming `name`, or accepted: never a crash, hang or panic. */
    async noCrash(label, fn, name) {
      const o = await outcome(fn)
      if (o.ok) return
      const p = refusalProblem(o, 'SandboxError', name)
      if (p) problems.push(`${label}: ${p}`)
    },
    problem(p) {
      problems.push(p)
    },
    done() {
      assert.deepEqual(problems, [], `\n${problems.length} misbehaving case(s):\n  ${problems.join('\n  ')}\n`)
    },
  }
}

const construct = (opts) => () => new Sandbox(opts)

/** Session directories of this process that were not there at `before` (the shared session of
 * the calls below has one of its own). */
function newSessionDirs(before) {
  return sessionDirs().filter((d) => !before.includes(d))
}

// ---------------------------------------------------------------------------------------------
// the Sandbox constructor

test('Sandbox(opts): opts that is not an object is a SandboxError naming the options', async () => {
  const c = cases()
  for (const [k, v] of Object.entries({ ...NOT_OPTION_BAGS, function: () => {}, 'NUL-laden string': 'a\0b' })) {
    await c.refused(`new Sandbox(${k})`, () => new Sandbox(v), 'SandboxError', /options/i)
  }
  await c.accepted('new Sandbox(undefined)', construct(undefined))
  await c.accepted('new Sandbox(null)', construct(null))
  await c.accepted('new Sandbox({})', construct({}))
  c.done()
})

test('string options: image, securityProfile, apparmor, setup', async () => {
  const c = cases()
  const names = { image: /image/, securityProfile: /securityProfile/, apparmor: /apparmor/, setup: /setup/ }
  for (const [opt, name] of Object.entries(names)) {
    for (const [k, v] of Object.entries(NOT_STRINGS))
      await c.refused(`${opt}: ${k}`, construct({ [opt]: v }), 'SandboxError', name)
    await c.refused(`${opt}: NUL-laden`, construct({ [opt]: 'a\0b' }), 'SandboxError', name)
    await c.refused(`${opt}: NUL only`, construct({ [opt]: '\0' }), 'SandboxError', name)
    await c.accepted(`${opt}: undefined`, construct({ [opt]: undefined }))
    await c.accepted(`${opt}: null`, construct({ [opt]: null }))
  }
  for (const opt of ['image', 'securityProfile', 'apparmor']) {
    await c.refused(`${opt}: empty`, construct({ [opt]: '' }), 'SandboxError', names[opt])
    await c.refused(`${opt}: 100,000 chars`, construct({ [opt]: BIG_STRING }), 'SandboxError', names[opt])
    await c.refused(`${opt}: a flag`, construct({ [opt]: '--privileged' }), 'SandboxError', names[opt])
  }
  await c.accepted('setup: empty (no setup)', construct({ setup: '' }))
  await c.accepted('image: valid', construct({ image: 'node:20-slim' }))
  await c.accepted('securityProfile: untrusted', construct({ securityProfile: 'untrusted' }))
  await c.accepted('apparmor: a profile name', construct({ apparmor: 'kern-box' }))
  c.done()
})

test('workspace: wrong types and NUL bytes are refused at construction, empty or relative by open(), naming workspace', async () => {
  const c = cases()
  const dirs = sessionDirs()
  for (const [k, v] of Object.entries(NOT_STRINGS))
    await c.refused(`workspace: ${k}`, construct({ workspace: v }), 'SandboxError', /workspace/)
  await c.refused('workspace: NUL-laden', construct({ workspace: `${tmpDir()}/a\0b` }), 'SandboxError', /workspace/)
  // Empty or relative: refused by the constructor or by open(), either way naming the option.
  for (const [k, v] of Object.entries({ empty: '', relative: 'rel/dir', dot: '.' })) {
    await c.refused(`workspace: ${k}`, () => new Sandbox({ workspace: v }).open(), 'SandboxError', /workspace/)
  }
  await c.refused(
    'workspace: 5,000 chars',
    () => new Sandbox({ workspace: `${tmpDir()}/${'w'.repeat(5000)}` }).open(),
    'SandboxError',
    /workspace/,
  )
  assert.deepEqual(newSessionDirs(dirs), [], 'a refused open() leaves no session directory')
  c.done()
})

test('whole-number caps: memoryMb and pids', async () => {
  const c = cases()
  for (const opt of ['memoryMb', 'pids']) {
    const name = new RegExp(opt)
    for (const [k, v] of Object.entries({ ...BAD_NUMBERS, 0.5: 0.5, ...HUGE_NUMBERS }))
      await c.refused(`${opt}: ${k}`, construct({ [opt]: v }), 'SandboxError', name)
    for (const [k, v] of Object.entries(NOT_NUMBERS))
      await c.refused(`${opt}: ${k}`, construct({ [opt]: v }), 'SandboxError', name)
    await c.accepted(`${opt}: null (uncapped)`, construct({ [opt]: null }))
    await c.accepted(`${opt}: 64`, construct({ [opt]: 64 }))
  }
  c.done()
})

test('cpus: a positive number of cores, null for none', async () => {
  const c = cases()
  for (const [k, v] of Object.entries({ ...BAD_NUMBERS, ...HUGE_NUMBERS }))
    await c.refused(`cpus: ${k}`, construct({ cpus: v }), 'SandboxError', /cpus/)
  for (const [k, v] of Object.entries(NOT_NUMBERS))
    await c.refused(`cpus: ${k}`, construct({ cpus: v }), 'SandboxError', /cpus/)
  await c.accepted('cpus: 0.5', construct({ cpus: 0.5 }))
  await c.accepted('cpus: null', construct({ cpus: null }))
  c.done()
})

test('timeoutS (session): a positive, finite number of seconds', async () => {
  const c = cases()
  for (const [k, v] of Object.entries({ ...BAD_NUMBERS, ...HUGE_NUMBERS }))
    await c.refused(`timeoutS: ${k}`, construct({ timeoutS: v }), 'SandboxError', /timeoutS/)
  for (const [k, v] of Object.entries(NOT_NUMBERS))
    await c.refused(`timeoutS: ${k}`, construct({ timeoutS: v }), 'SandboxError', /timeoutS/)
  await c.accepted('timeoutS: 0.5', construct({ timeoutS: 0.5 }))
  await c.accepted('timeoutS: null (default)', construct({ timeoutS: null }))
  c.done()
})

test('maxOutputBytes: positive; a huge cap never crashes', async () => {
  const c = cases()
  for (const [k, v] of Object.entries(BAD_NUMBERS))
    await c.refused(`maxOutputBytes: ${k}`, construct({ maxOutputBytes: v }), 'SandboxError', /maxOutputBytes/)
  for (const [k, v] of Object.entries(NOT_NUMBERS))
    await c.refused(`maxOutputBytes: ${k}`, construct({ maxOutputBytes: v }), 'SandboxError', /maxOutputBytes/)
  for (const [k, v] of Object.entries(HUGE_NUMBERS))
    await c.noCrash(`maxOutputBytes: ${k}`, construct({ maxOutputBytes: v }), /maxOutputBytes/)
  // A huge cap must not be allocated up front: a call still runs.
  const o = await outcome(async () => {
    const s = await new Sandbox({ maxOutputBytes: 2 ** 64 }).open()
    try {
      return await s.run(['echo', 'hi'])
    } finally {
      await s.close()
    }
  })
  if (o.ok) assert.equal(o.value.stdout, 'hi\n')
  else if (!o.error || !/maxOutputBytes/.test(o.error.message))
    c.problem(`maxOutputBytes 2**64, a call: ${o.hung ? 'hung' : `${o.error.name}: ${o.error.message}`}`)
  c.done()
})

test('boolean options: network, enforceLimits, depsReadonly, trackFiles, requireLimits', async () => {
  const c = cases()
  for (const opt of ['network', 'enforceLimits', 'depsReadonly', 'trackFiles', 'requireLimits']) {
    for (const [k, v] of Object.entries(NOT_BOOLEANS)) {
      // An object is network's policy form (issue 37): `{}` is a valid, empty policy.
      if (opt === 'network' && k === 'object') await c.accepted(`${opt}: ${k} (a policy)`, construct({ [opt]: v }))
      else await c.refused(`${opt}: ${k}`, construct({ [opt]: v }), 'SandboxError', new RegExp(opt))
    }
    await c.accepted(`${opt}: false`, construct({ [opt]: false }))
    await c.accepted(`${opt}: null`, construct({ [opt]: null }))
  }
  c.done()
})

test('string-list options: egressAllow, profiles, capDrop', async () => {
  const c = cases()
  const names = { egressAllow: /egressAllow|egress domain/, profiles: /profile/, capDrop: /capDrop/ }
  const badEntries = {
    number: 5,
    NaN: NaN,
    null: null,
    undefined: undefined,
    object: {},
    bigint: 1n,
    symbol: Symbol('e'),
    empty: '',
    'NUL-laden': 'a\0b',
    'a flag': '--net',
    '100,000 chars': BIG_STRING,
  }
  for (const [opt, name] of Object.entries(names)) {
    for (const [k, v] of Object.entries(NOT_ARRAYS))
      await c.refused(`${opt}: ${k}`, construct({ [opt]: v }), 'SandboxError', name)
    for (const [k, v] of Object.entries(badEntries))
      await c.refused(`${opt}: [${k}]`, construct({ [opt]: [v] }), 'SandboxError', name)
    await c.refused(`${opt}: an array with a hole`, construct({ [opt]: new Array(2) }), 'SandboxError', name)
    await c.accepted(`${opt}: []`, construct({ [opt]: [] }))
    await c.accepted(`${opt}: null`, construct({ [opt]: null }))
  }
  c.done()
})

test('mounts: anything but { absoluteHostPath: absoluteBoxPath | [path, "ro"|"rw"] } is MountRefused', async () => {
  const c = cases()
  const d = tmpDir()
  for (const [k, v] of Object.entries({ ...NOT_OPTION_BAGS, 'NUL-laden string': 'a\0b', function: () => {} })) {
    await c.refused(`mounts: ${k}`, construct({ mounts: v }), 'MountRefused', /mount/)
  }
  const bad = {
    'NUL in the source': { [`${d}\0x`]: '/data' },
    'empty source': { '': '/data' },
    'NUL in the target': { [d]: '/da\0ta' },
    'empty target': { [d]: '' },
    'numeric target': { [d]: 5 },
    'NaN target': { [d]: NaN },
    'object target': { [d]: {} },
    'null target': { [d]: null },
    'bigint target': { [d]: 1n },
    'symbol target': { [d]: Symbol('t') },
    'numeric target in a pair': { [d]: [5, 'ro'] },
    'NUL in the mode': { [d]: ['/data', 'r\0o'] },
    'numeric mode': { [d]: ['/data', 1] },
    'bigint mode': { [d]: ['/data', 1n] },
    'empty pair': { [d]: [] },
    // past PATH_MAX: kern could only fail the box later (exit 125, "File name too long")
    'huge target': { [d]: `/${BIG_STRING}` },
    'a 300-char target component': { [d]: `/data/${'c'.repeat(300)}` },
  }
  for (const [k, v] of Object.entries(bad))
    await c.refused(`mounts: ${k}`, construct({ mounts: v }), 'MountRefused', /mount/)
  await c.accepted('mounts: {}', construct({ mounts: {} }))
  c.done()
})

test('env: not an object is refused; bad names or values fail by the first call at the latest, naming env', async () => {
  const c = cases()
  for (const [k, v] of Object.entries({ ...NOT_OPTION_BAGS, 'NUL-laden string': 'a\0b', function: () => {} })) {
    if (Array.isArray(v)) continue // an array is an object of index keys, as in 0.1.1
    await c.refused(`env: ${k}`, construct({ env: v }), 'SandboxError', /env/)
  }
  const bad = {
    'NUL in a value': { A: 'a\0b' },
    'newline in a value': { A: 'a\nb' },
    'NUL in a name': { 'A\0': 'x' },
    'empty name': { '': 'x' },
    '= in a name': { 'A=B': 'x' },
  }
  for (const [k, v] of Object.entries(bad)) {
    await c.refused(
      `env: ${k}`,
      async () => {
        const s = await new Sandbox({ env: v }).open()
        try {
          return await s.run(['true'])
        } finally {
          await s.close()
        }
      },
      'SandboxError',
      /env/,
    )
  }
  await c.accepted('env: {}', construct({ env: {} }))
  c.done()
})

test('onStdout / onStderr (session): not a function is a TypeError', async () => {
  const c = cases()
  for (const opt of ['onStdout', 'onStderr']) {
    for (const [k, v] of Object.entries(NOT_FUNCTIONS))
      await c.refused(`${opt}: ${k}`, construct({ [opt]: v }), 'TypeError', new RegExp(opt))
    await c.accepted(`${opt}: null`, construct({ [opt]: null }))
  }
  c.done()
})

test('wrong JS types on options get a JS message, not a Rust/napi one', async () => {
  // The message names the option (checked above) and says what it must be, in JS terms.
  const c = cases()
  const opts = {
    image: 5,
    setup: 5,
    workspace: 5,
    securityProfile: 5,
    apparmor: 5,
    memoryMb: 'x',
    pids: 'x',
    cpus: 'x',
    timeoutS: 'x',
    maxOutputBytes: 'x',
    network: 'x',
    enforceLimits: 'x',
    depsReadonly: 'x',
    trackFiles: 'x',
    requireLimits: 'x',
    egressAllow: 'x',
    profiles: 'x',
    capDrop: 'x',
  }
  for (const [opt, v] of Object.entries(opts)) {
    const o = await outcome(construct({ [opt]: v }))
    if (o.ok || o.hung) c.problem(`${opt}: ${show(v)} was not refused`)
    else if (/rust type|napi|\bf64\b|Array length|JavaScript value/i.test(o.error.message))
      c.problem(`${opt}: ${show(v)}: ${o.error.message}`)
  }
  for (const opt of ['profiles', 'capDrop', 'egressAllow']) {
    const o = await outcome(construct({ [opt]: [5] }))
    if (o.ok || o.hung) c.problem(`${opt}: [5] was not refused`)
    else if (/rust type|napi|\bf64\b|Array length|JavaScript value/i.test(o.error.message))
      c.problem(`${opt}: [5]: ${o.error.message}`)
  }
  c.done()
})

// ---------------------------------------------------------------------------------------------
// calls on an open session

let sbx
let workdir
test.before(async () => {
  workdir = tmpDir('kst-bad-')
  sbx = await new Sandbox({ timeoutS: 30 }).open()
  await sbx.writeFile('present.txt', 'present')
  sbx.snapshot(path.join(workdir, 'good.tgz'))
})
test.after(async () => {
  if (sbx) await sbx.close()
})

test('runCode(code): code that is not a string is a TypeError; a NUL byte a SandboxError', async () => {
  const c = cases()
  for (const [k, v] of Object.entries(NOT_STRING_ARGS))
    await c.refused(`runCode(${k})`, () => sbx.runCode(v), 'TypeError', /code/)
  await c.refused('runCode(NUL-laden)', () => sbx.runCode('print(1)\0'), 'SandboxError', /code|NUL/)
  await c.refused(
    'runCode(NUL-laden, bash)',
    () => sbx.runCode('echo \0', { language: 'bash' }),
    'SandboxError',
    /code|NUL/,
  )
  c.done()
})

test('run(argv): a string, a non-array, an empty array or a non-string entry is a SandboxError', async () => {
  const c = cases()
  await c.refused('run("echo hi")', () => sbx.run('echo hi'), 'SandboxError', /argv|array/i)
  await c.refused('run("")', () => sbx.run(''), 'SandboxError', /argv|array/i)
  await c.refused('run("a\\0b")', () => sbx.run('a\0b'), 'SandboxError', /argv|array/i)
  for (const [k, v] of Object.entries({ undefined: undefined, null: null, ...NOT_STRINGS })) {
    if (Array.isArray(v)) continue
    await c.refused(`run(${k})`, () => sbx.run(v), 'SandboxError', /command|array/i)
  }
  await c.refused('run([])', () => sbx.run([]), 'SandboxError', /command|array/i)
  const entries = {
    number: 5,
    NaN: NaN,
    '2**64': 2 ** 64,
    null: null,
    undefined: undefined,
    boolean: false,
    object: {},
    array: ['echo'],
    bigint: 1n,
    symbol: Symbol('c'),
    function: () => 'echo',
    'NUL-laden': 'ec\0ho',
  }
  for (const [k, v] of Object.entries(entries)) {
    await c.refused(`run([${k}])`, () => sbx.run([v]), 'SandboxError', /command/)
    await c.refused(`run(["echo", ${k}])`, () => sbx.run(['echo', v]), 'SandboxError', /command/)
  }
  // Array.prototype.some skips holes: they must be caught too.
  await c.refused('run(new Array(3))', () => sbx.run(new Array(3)), 'SandboxError', /command/)
  const sparse = ['echo']
  sparse[3] = 'x'
  await c.refused('run(["echo", <3 holes>, "x"])', () => sbx.run(sparse), 'SandboxError', /command/)
  c.done()
})

test('run / runCode: an argv or code too big for exec is a SandboxError, not a crash', async () => {
  const c = cases()
  await c.noCrash(
    'run(["echo", 200,000 chars])',
    () => sbx.run(['echo', 'x'.repeat(200_000)]),
    /kern|argument|command/i,
  )
  await c.noCrash(
    'run(100 x 100,000 chars)',
    () => sbx.run(['echo', ...Array.from({ length: 100 }, () => 'y'.repeat(100_000))]),
    /kern|argument|command/i,
  )
  c.done()
})

test('per-call options that are not an object are refused, naming the options', async () => {
  const c = cases()
  for (const [k, v] of Object.entries(NOT_OPTION_BAGS)) {
    await c.refused(`runCode(code, ${k})`, () => sbx.runCode('print(1)', v), 'either', /option/i)
    await c.refused(`run(argv, ${k})`, () => sbx.run(['true'], v), 'either', /option/i)
  }
  await c.accepted('runCode(code, null)', () => sbx.runCode('print(1)', null))
  await c.accepted('run(argv, undefined)', () => sbx.run(['true'], undefined))
  c.done()
})

test('per-call timeoutS: a positive, finite number of seconds', async () => {
  const c = cases()
  for (const [k, v] of Object.entries({ ...BAD_NUMBERS, ...HUGE_NUMBERS, ...NOT_NUMBERS })) {
    await c.refused(`run timeoutS ${k}`, () => sbx.run(['true'], { timeoutS: v }), 'SandboxError', /timeoutS/)
    await c.refused(`runCode timeoutS ${k}`, () => sbx.runCode('print(1)', { timeoutS: v }), 'SandboxError', /timeoutS/)
  }
  c.done()
})

test('per-call onStdout / onStderr: not a function is a TypeError', async () => {
  const c = cases()
  for (const opt of ['onStdout', 'onStderr']) {
    for (const [k, v] of Object.entries(NOT_FUNCTIONS)) {
      await c.refused(`run ${opt} ${k}`, () => sbx.run(['true'], { [opt]: v }), 'TypeError', new RegExp(opt))
      await c.refused(`runCode ${opt} ${k}`, () => sbx.runCode('print(1)', { [opt]: v }), 'TypeError', new RegExp(opt))
    }
  }
  c.done()
})

test('per-call signal: not an AbortSignal is a TypeError', async () => {
  const c = cases()
  const fakes = {
    ...NOT_FUNCTIONS,
    function: () => {},
    'an object with a string aborted': { aborted: 'no', addEventListener() {} },
    'an object without addEventListener': { aborted: false },
  }
  for (const [k, v] of Object.entries(fakes)) {
    await c.refused(`run signal ${k}`, () => sbx.run(['true'], { signal: v }), 'TypeError', /signal/)
    await c.refused(`runCode signal ${k}`, () => sbx.runCode('print(1)', { signal: v }), 'TypeError', /signal/)
  }
  c.done()
})

test('runCode language: anything but python, bash or node is a SandboxError naming language', async () => {
  const c = cases()
  const bad = {
    unknown: 'ruby',
    empty: '',
    'upper case': 'PYTHON',
    'trailing space': 'python ',
    'NUL-laden': 'python\0',
    '100,000 chars': BIG_STRING,
    ...NOT_STRINGS,
  }
  for (const [k, v] of Object.entries(bad))
    await c.refused(`language ${k}`, () => sbx.runCode('print(1)', { language: v }), 'SandboxError', /language/)
  c.done()
})

// ---------------------------------------------------------------------------------------------
// files

const PATH_VALUES = {
  empty: '',
  'NUL-laden': 'a\0b',
  'NUL only': '\0',
  'escaping ..': '../x',
  'deep escape': 'a/../../x',
  'the root': '/',
  dot: '.',
  '5,000 chars': 'p'.repeat(5000),
  'a 300-char component': 'q'.repeat(300),
}

test('writeFile / readFile: a path that is not a string is a TypeError; an unusable one a SandboxError', async () => {
  const c = cases()
  for (const [k, v] of Object.entries(NOT_STRING_ARGS)) {
    await c.refused(`writeFile(${k})`, () => sbx.writeFile(v, 'x'), 'TypeError', /path/)
    await c.refused(`readFile(${k})`, () => sbx.readFile(v), 'TypeError', /path/)
  }
  for (const [k, v] of Object.entries(PATH_VALUES)) {
    // The message names the path (it quotes it, or says "path").
    const name = /path|cannot (write|read)|workspace/i
    await c.refused(`writeFile(${k})`, () => sbx.writeFile(v, 'x'), 'SandboxError', name)
    await c.refused(`readFile(${k})`, () => sbx.readFile(v), 'SandboxError', name)
  }
  await c.refused('readFile(missing)', () => sbx.readFile('no-such-file'), 'SandboxError', /no-such-file/)
  c.done()
})

test('writeFile data: bytes as given; anything else is String()-ed, as 0.1.1 did', async () => {
  const c = cases()
  const bytes = {
    Buffer: [Buffer.from([0, 1, 2]), Buffer.from([0, 1, 2])],
    Uint8Array: [new Uint8Array([3, 4]), Buffer.from([3, 4])],
    'Uint16Array view': [new Uint16Array([0x0201]), Buffer.from([1, 2])],
    DataView: [new DataView(new Uint8Array([5, 6, 7]).buffer, 1, 2), Buffer.from([6, 7])],
    ArrayBuffer: [new Uint8Array([8]).buffer, Buffer.from([8])],
    'NUL-laden string': ['a\0b', Buffer.from('a\0b')],
    'empty string': ['', Buffer.alloc(0)],
  }
  const coerced = {
    undefined: undefined,
    null: null,
    number: 5,
    NaN: NaN,
    '2**64': 2 ** 64,
    boolean: true,
    object: {},
    bigint: 10n,
    symbol: Symbol('d'),
  }
  for (const [k, v] of Object.entries(coerced)) bytes[k] = [v, Buffer.from(String(v))]
  for (const [k, [v, want]] of Object.entries(bytes)) {
    const o = await outcome(async () => {
      await sbx.writeFile('data.bin', v)
      return sbx.readFile('data.bin')
    })
    if (o.hung || !o.ok) c.problem(`writeFile(data: ${k}): ${o.hung ? 'hung' : `${o.error.name}: ${o.error.message}`}`)
    else if (!want.equals(o.value))
      c.problem(
        `writeFile(data: ${k}): wrote ${show(o.value.toString('latin1'))}, want ${show(want.toString('latin1'))}`,
      )
  }
  c.done()
})

/** The `{ maxBytes }` option of readFile, snapshot and restore. */
function maxBytesCases(label, call) {
  return async (c) => {
    for (const [k, v] of Object.entries({ ...NOT_NUMBERS, 'NUL-laden string': 'a\0b' }))
      await c.refused(`${label} maxBytes ${k}`, () => call({ maxBytes: v }), 'SandboxError', /maxBytes/)
    for (const [k, v] of Object.entries({
      NaN: NaN,
      '-1': -1,
      '-0.5': -0.5,
      Infinity: Infinity,
      '-Infinity': -Infinity,
    })) {
      await c.refused(`${label} maxBytes ${k}`, () => call({ maxBytes: v }), 'SandboxError', /maxBytes/)
    }
    for (const [k, v] of Object.entries(HUGE_NUMBERS))
      await c.accepted(`${label} maxBytes ${k}`, () => call({ maxBytes: v }))
    for (const [k, v] of Object.entries(NOT_OPTION_BAGS))
      await c.refused(`${label} options ${k}`, () => call(v), 'either', /option/i)
    await c.accepted(`${label} options null`, () => call(null))
    await c.accepted(`${label} maxBytes null`, () => call({ maxBytes: null }))
  }
}

test('readFile(path, { maxBytes }): a non-negative number of bytes', async () => {
  const c = cases()
  await maxBytesCases('readFile', (o) => sbx.readFile('present.txt', o))(c)
  await c.refused(
    'readFile maxBytes 0 on a non-empty file',
    () => sbx.readFile('present.txt', { maxBytes: 0 }),
    'SandboxError',
    /limit|maxBytes/,
  )
  c.done()
  // A limit past what 64 bits hold is no limit, not a read of nothing.
  assert.equal(String(await sbx.readFile('present.txt', { maxBytes: 2 ** 64 })), 'present')
})

test('listFiles(subdir): not a string is a TypeError; an unusable one a SandboxError', async () => {
  const c = cases()
  for (const [k, v] of Object.entries(NOT_STRINGS))
    await c.refused(`listFiles(${k})`, () => sbx.listFiles(v), 'TypeError', /subdir/)
  for (const [k, v] of Object.entries({ 'NUL-laden': 'a\0b', 'escaping ..': '../', 'deep escape': 'a/../../' })) {
    await c.refused(`listFiles(${k})`, () => sbx.listFiles(v), 'SandboxError', /path|subdir|workspace/i)
  }
  await c.noCrash('listFiles(5,000 chars)', () => sbx.listFiles('s'.repeat(5000)), /path|subdir|workspace|cannot/i)
  await c.accepted('listFiles(undefined)', () => sbx.listFiles(undefined))
  await c.accepted('listFiles(null)', () => sbx.listFiles(null))
  c.done()
})

test('snapshot(dest, opts): a bad destination or maxBytes is refused, naming it', async () => {
  const c = cases()
  const dest = path.join(workdir, 'snap.tgz')
  for (const [k, v] of Object.entries(NOT_STRING_ARGS))
    await c.refused(`snapshot(${k})`, () => sbx.snapshot(v), 'TypeError', /dest/)
  const bad = {
    empty: '',
    'NUL-laden': `${workdir}/a\0b.tgz`,
    'a directory': workdir,
    'in a missing directory': path.join(workdir, 'no', 'such', 'dir', 'x.tgz'),
    '5,000 chars': path.join(workdir, 'n'.repeat(5000)),
  }
  for (const [k, v] of Object.entries(bad))
    await c.refused(`snapshot(${k})`, () => sbx.snapshot(v), 'SandboxError', /dest|snapshot/)
  await maxBytesCases('snapshot', (o) => sbx.snapshot(dest, o))(c)
  c.done()
})

test('restore(src, opts): a bad source, archive or maxBytes is refused, naming it', async () => {
  const c = cases()
  const good = path.join(workdir, 'good.tgz')
  for (const [k, v] of Object.entries(NOT_STRING_ARGS))
    await c.refused(`restore(${k})`, () => sbx.restore(v), 'TypeError', /src/)
  const garbage = path.join(workdir, 'garbage.tgz')
  fs.writeFileSync(garbage, 'not a gzip at all')
  const empty = path.join(workdir, 'empty.tgz')
  fs.writeFileSync(empty, '')
  const bad = {
    empty: '',
    'NUL-laden': `${good}\0`,
    missing: path.join(workdir, 'missing.tgz'),
    'a directory': workdir,
    'not gzip': garbage,
    'an empty file': empty,
    '5,000 chars': path.join(workdir, 'm'.repeat(5000)),
  }
  for (const [k, v] of Object.entries(bad))
    await c.refused(`restore(${k})`, () => sbx.restore(v), 'SandboxError', /src|source|restore|snapshot/)
  await maxBytesCases('restore', (o) => sbx.restore(good, o))(c)
  c.done()
})

// ---------------------------------------------------------------------------------------------
// withSandbox and the one-shot runCode

test('withSandbox: bad options are refused before fn runs; a non-function fn is a TypeError', async () => {
  const c = cases()
  const dirs = sessionDirs()
  let ran = 0
  const fn = async () => ran++
  for (const [k, v] of Object.entries({ ...NOT_OPTION_BAGS, 'NUL-laden string': 'a\0b' })) {
    await c.refused(`withSandbox(${k}, fn)`, () => withSandbox(v, fn), 'SandboxError', /options/i)
  }
  await c.refused(
    'withSandbox({ timeoutS: NaN }, fn)',
    () => withSandbox({ timeoutS: NaN }, fn),
    'SandboxError',
    /timeoutS/,
  )
  await c.refused(
    'withSandbox({ memoryMb: 2**64 }, fn)',
    () => withSandbox({ memoryMb: 2 ** 64 }, fn),
    'SandboxError',
    /memoryMb/,
  )
  await c.refused(
    'withSandbox({ workspace: "" }, fn)',
    () => withSandbox({ workspace: '' }, fn),
    'SandboxError',
    /workspace/,
  )
  await c.refused('withSandbox({ onStdout: 5 }, fn)', () => withSandbox({ onStdout: 5 }, fn), 'TypeError', /onStdout/)
  assert.equal(ran, 0, 'fn never ran')
  for (const [k, v] of Object.entries({ undefined: undefined, null: null, ...NOT_FUNCTIONS })) {
    await c.refused(`withSandbox({}, ${k})`, () => withSandbox({}, v), 'TypeError', /function/)
  }
  await c.refused('withSandbox(5)', () => withSandbox(5), 'TypeError', /function/)
  assert.deepEqual(newSessionDirs(dirs), [], 'no session directory left behind')
  c.done()
})

test('runCode (one-shot): bad code, options, language or signal are refused, naming them', async () => {
  const c = cases()
  const dirs = sessionDirs()
  for (const [k, v] of Object.entries(NOT_STRING_ARGS))
    await c.refused(`runCode(${k})`, () => kern.runCode(v), 'TypeError', /code/)
  await c.refused('runCode(NUL-laden)', () => kern.runCode('print(1)\0'), 'SandboxError', /code|NUL/)
  for (const [k, v] of Object.entries(NOT_OPTION_BAGS))
    await c.refused(`runCode(code, ${k})`, () => kern.runCode('print(1)', v), 'either', /option/i)
  await c.refused('runCode timeoutS NaN', () => kern.runCode('print(1)', { timeoutS: NaN }), 'SandboxError', /timeoutS/)
  await c.refused(
    'runCode timeoutS 2**64',
    () => kern.runCode('print(1)', { timeoutS: 2 ** 64 }),
    'SandboxError',
    /timeoutS/,
  )
  await c.refused('runCode pids -1', () => kern.runCode('print(1)', { pids: -1 }), 'SandboxError', /pids/)
  await c.refused('runCode image NUL', () => kern.runCode('print(1)', { image: 'py\0' }), 'SandboxError', /image/)
  await c.refused(
    'runCode language ruby',
    () => kern.runCode('print(1)', { language: 'ruby' }),
    'SandboxError',
    /language/,
  )
  await c.refused('runCode language 10n', () => kern.runCode('print(1)', { language: 10n }), 'SandboxError', /language/)
  await c.refused('runCode signal "x"', () => kern.runCode('print(1)', { signal: 'x' }), 'TypeError', /signal/)
  await c.refused('runCode onStdout 5', () => kern.runCode('print(1)', { onStdout: 5 }), 'TypeError', /onStdout/)
  assert.deepEqual(newSessionDirs(dirs), [], 'no session directory left behind')
  c.done()
})
