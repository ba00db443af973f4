'use strict'
// Shared test helpers: which kern the suite drives, child node processes, temp dirs, fake kerns
// (built from the scripts in fixtures/), sessions and kernels closed when their test ends
// (openSandbox, openKernel), and /proc probes for "nothing is left running".
//
// kern selection: `KERN_BIN` set → that binary is a real kern (unless it is our stand-in);
// otherwise the stand-in built by `cargo build --release -p kern-standin`. Either way
// process.env.KERN_BIN is set at load, so `new Sandbox()` finds it.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const cp = require('node:child_process')
const crypto = require('node:crypto')

const repo = path.resolve(__dirname, '..')
const standinBin = path.join(repo, 'target', 'release', 'kern-standin')

function realpathOr(p) {
  try {
    return fs.realpathSync(p)
  } catch {
    return p
  }
}

const kernBin = process.env.KERN_BIN || standinBin
const realKern = Boolean(process.env.KERN_BIN) && realpathOr(process.env.KERN_BIN) !== realpathOr(standinBin)

if (!fs.existsSync(kernBin)) {
  throw new Error(
    realKern
      ? `KERN_BIN=${kernBin} does not exist`
      : `the kern stand-in is not built (${standinBin}): run \`cargo build --release -p kern-standin\` ` +
          'or point KERN_BIN at a real kern',
  )
}
process.env.KERN_BIN = kernBin

/** Skip reason for tests that need the stand-in's argv log. */
const STANDIN_ONLY = realKern
  ? 'records argv through the kern stand-in (KERN_STANDIN_ARGV_LOG); KERN_BIN is a real kern'
  : false

const kern = require(repo)

// ---------------------------------------------------------------------------------------------
// temp dirs

const made = []
process.on('exit', () => {
  for (const d of made) {
    try {
      fs.rmSync(d, { recursive: true, force: true })
    } catch {
      /* best effort */
    }
  }
})

/** A fresh temp dir (0700), removed when the test process exits. */
function tmpDir(prefix = 'kst-') {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  made.push(d)
  return d
}

function rand(n = 6) {
  return crypto.randomBytes(n).toString('hex')
}

/** Our session dirs (kern-sbx-<pid>-*) in os.tmpdir() for `pid`. */
function sessionDirs(pid = process.pid) {
  const prefix = `kern-sbx-${pid}-`
  try {
    return fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith(prefix))
  } catch {
    return []
  }
}

// ---------------------------------------------------------------------------------------------
// child processes

/** Writes `source` to a temp .js file and runs it with this node. Resolves with
 * { code, signal, stdout, stderr, timedOut, pid, child }. `env` entries set to undefined are removed.
 * `onSpawn(child)` is called right after the spawn. */
function runNode(source, { env = {}, timeoutMs = 60_000, args = [], onSpawn, cwd } = {}) {
  const dir = tmpDir('kst-node-')
  const file = path.join(dir, 'script.js')
  fs.writeFileSync(file, `const REPO = ${JSON.stringify(repo)};\n${source}`)
  const childEnv = { ...process.env }
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) delete childEnv[k]
    else childEnv[k] = v
  }
  return new Promise((resolve) => {
    const child = cp.spawn(process.execPath, [file, ...args], {
      env: childEnv,
      cwd: cwd || dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    let timedOut = false
    child.stdout.on('data', (c) => (stdout += c))
    child.stderr.on('data', (c) => (stderr += c))
    const timer = setTimeout(() => {
      timedOut = true
      child.kill('SIGKILL')
    }, timeoutMs)
    if (onSpawn) onSpawn(child)
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr, timedOut, pid: child.pid })
    })
  })
}

/** Parses the last line of a child's stdout that is JSON. */
function lastJson(stdout) {
  const lines = stdout.trim().split('\n').filter(Boolean)
  for (let i = lines.length - 1; i >= 0; i--) {
    try {
      return JSON.parse(lines[i])
    } catch {
      /* keep looking */
    }
  }
  throw new Error(`no JSON line in child stdout:\n${stdout}`)
}

// ---------------------------------------------------------------------------------------------
// kern wrappers and fakes

const fixtures = path.join(__dirname, 'fixtures')

/** A copy of fixture `name` as `<dir>/kern` (executable). */
function kernFrom(name, dir) {
  const file = path.join(dir, 'kern')
  fs.copyFileSync(path.join(fixtures, name), file)
  fs.chmodSync(file, 0o755)
  return file
}

/** A sh wrapper around `bin` (default: the suite's kern) that exports `env` first (a null value
 * unsets the variable); fixtures/wrap-kern.sh. */
function wrapKern(env, bin = kernBin) {
  const dir = tmpDir('kst-wrap-')
  const lines = [String(bin)]
  for (const [k, v] of Object.entries(env)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) throw new Error(`wrapKern: not a variable name: ${k}`)
    if (v !== null && /[\n\0]/.test(String(v))) throw new Error(`wrapKern: ${k}'s value holds a newline or NUL`)
    lines.push(v === null ? `-${k}` : `${k}=${v}`)
  }
  fs.writeFileSync(path.join(dir, 'wrap.env'), lines.join('\n') + '\n')
  return kernFrom('wrap-kern.sh', dir)
}

/** Parses a KERN_STANDIN_ARGV_LOG file: one argv array per call. */
function readArgvLog(file) {
  let text
  try {
    text = fs.readFileSync(file, 'utf8')
  } catch {
    return []
  }
  return text
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => l.split('\0'))
}

/** A stand-in wrapper that records argv; returns { bin, calls(), boxCalls() }. */
function recordingKern(extraEnv = {}) {
  const log = path.join(tmpDir('kst-argv-'), 'argv.log')
  const bin = wrapKern({ KERN_STANDIN_ARGV_LOG: log, ...extraEnv })
  return {
    bin,
    log,
    calls: () => readArgvLog(log),
    boxCalls: () => readArgvLog(log).filter((a) => a[0] === 'box'),
  }
}

/**
 * A fake kern that records, per invocation, its argv, its environment, and the --env-file (content,
 * mode, its directory's mode), then behaves as told:
 *   { exitCode, started: [bytes] | null, stdout, stderr, sleepMs, ignoreTerm, strayMs, psLists, psDelayMs }
 * `box` runs a node script (fixtures/fake-kern.js); `ps`/`stop` are answered by a sh front end
 * (fixtures/fake-kern.sh), fast even on a loaded machine (stop: "no running box"; ps: `[]`, or with
 * psLists every box this fake ever ran, as if it survived `stop`; psDelayMs delays the answer).
 * strayMs leaves a detached `sleep` holding stdout/stderr open after exit; its pid is in strayPid().
 */
function fakeKern(behaviour = {}) {
  const dir = tmpDir('kst-fake-')
  const logDir = path.join(dir, 'calls')
  fs.mkdirSync(logDir)
  const b = {
    exitCode: 0,
    started: [1, 0],
    stdout: '',
    stderr: '',
    sleepMs: 0,
    ignoreTerm: false,
    strayMs: 0,
    psLists: false,
    psDelayMs: 0,
    ...behaviour,
  }
  fs.writeFileSync(path.join(dir, 'behaviour.json'), JSON.stringify(b))
  const conf = [process.execPath, String(b.psDelayMs ? b.psDelayMs / 1000 : 0), b.psLists ? '1' : '0']
  fs.writeFileSync(path.join(dir, 'fake-kern.conf'), conf.join('\n') + '\n')
  fs.copyFileSync(path.join(fixtures, 'fake-kern.js'), path.join(dir, 'fake-kern.js'))
  const file = kernFrom('fake-kern.sh', dir)
  const calls = () =>
    fs
      .readdirSync(logDir)
      .filter((n) => n.endsWith('.json'))
      .sort()
      .map((n) => JSON.parse(fs.readFileSync(path.join(logDir, n), 'utf8')))
  const strayPid = () => {
    try {
      return Number(fs.readFileSync(path.join(dir, 'stray.pid'), 'utf8'))
    } catch {
      return 0
    }
  }
  return { bin: file, calls, boxCalls: () => calls().filter((c) => c.argv[0] === 'box'), strayPid }
}

/** Constructs a Sandbox with KERN_BIN temporarily pointing at `bin` (the constructor locates kern). */
function sandboxWith(bin, opts = {}) {
  const saved = process.env.KERN_BIN
  process.env.KERN_BIN = bin
  try {
    // A recording or fake kern counts every invocation: boxes started ahead (prewarm) would be
    // invocations of their own, so these sessions keep none unless the test asks.
    return new kern.Sandbox({ prewarm: 0, ...opts })
  } finally {
    process.env.KERN_BIN = saved
  }
}

// ---------------------------------------------------------------------------------------------
// sessions tied to a test

/**
 * Opens a Sandbox for test `t` and closes it when the test ends, passed or failed (`t.after`;
 * close() is idempotent, so a test may also close it itself). `opts` are the Sandbox options;
 * `bin` runs it on another kern (a fakeKern/recordingKern/wrapKern), as sandboxWith does.
 *   const sbx = await openSandbox(t, { timeoutS: 5 }, { bin: fake.bin })
 * A test that asserts on what close() does, or on the state after it, closes by hand instead.
 */
async function openSandbox(t, opts = {}, { bin } = {}) {
  const sbx = bin === undefined ? new kern.Sandbox(opts) : sandboxWith(bin, opts)
  await sbx.open()
  t.after(() => sbx.close())
  return sbx
}

/** Starts a kernel of `sbx` (kernel() options `opts`) and closes it when test `t` ends; for a
 * session shared by several tests, whose close() would come too late. */
async function openKernel(t, sbx, opts = {}) {
  const k = await sbx.kernel(opts)
  t.after(() => k.close())
  return k
}

// ---------------------------------------------------------------------------------------------
// /proc probes

/** The Python cell a process runs through the rich-result runner (`python3 /workspace/.run-<id>.py`,
 * or kern's `box … -v <ws>:/workspace … python3 /workspace/.run-<id>.py`), or ''. The code is in a
 * workspace file, not in any command line. */
/** A machine of `sbx`, closed when the test ends. */
async function openMachine(t, sbx, opts = {}) {
  const m = await sbx.machine(opts)
  t.after(() => m.close())
  return m
}

function cellOf(pid, args) {
  const run = args.find((a) => /^\/workspace\/\.run-[0-9a-f]{8}\.py$/.test(a))
  if (!run) return ''
  const cell = run.replace('/.run-', '/.cell-')
  const vol = args.find((a, i) => args[i - 1] === '-v' && a.endsWith(':/workspace'))
  const file = vol ? vol.slice(0, -':/workspace'.length) + cell.slice('/workspace'.length) : `/proc/${pid}/root${cell}`
  try {
    return fs.readFileSync(file, 'utf8')
  } catch {
    return ''
  }
}

/** Live (non-zombie) processes whose cmdline (or Python cell, see cellOf) contains `marker`,
 * excluding this process. */
function procsMatching(marker) {
  const out = []
  let entries
  try {
    entries = fs.readdirSync('/proc')
  } catch {
    return out
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue
    const pid = Number(e)
    if (pid === process.pid) continue
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1')
      if (!cmd.includes(marker) && !cellOf(pid, cmd.split('\0')).includes(marker)) continue
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1')
      const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0]
      if (state === 'Z' || state === 'X') continue
      out.push({ pid, cmd: cmd.replace(/\0/g, ' ').trim(), state })
    } catch {
      /* vanished */
    }
  }
  return out
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** Polls `fn` until it returns truthy or `ms` passes; returns its last value. */
async function waitFor(fn, ms, every = 100) {
  const end = Date.now() + ms
  let v = await fn()
  while (!v && Date.now() < end) {
    await sleep(every)
    v = await fn()
  }
  return v
}

/** Rejects if `p` does not settle within `ms` (so a hang fails one test, not the suite). */
function within(p, ms, what = 'operation') {
  let timer
  const guard = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms)
  })
  return Promise.race([p, guard]).finally(() => clearTimeout(timer))
}

/** The reference's mem byte semantics are host-dependent; a SIGKILL in a box without --memory is
 * always `killed`. */
const PY_SELF_SIGKILL = 'import os, signal\nos.kill(os.getpid(), signal.SIGKILL)'

/** A Node script for inside a box that GETs https://api.test:PORT/PATH through the egress relay
 * with an explicit CONNECT (the image's Node 18 ignores the proxy variables; the box trusts the
 * proxy's CA through NODE_EXTRA_CA_CERTS). It prints the body, or why it failed (exit 2-4). */
const nodeProxyGet = (port, p) => `
const http = require('http'), tls = require('tls')
const px = new URL(process.env.HTTPS_PROXY)
const req = http.request({ host: px.hostname, port: px.port, method: 'CONNECT', path: 'api.test:${port}' })
req.on('connect', (res, sock) => {
  if (res.statusCode !== 200) { console.log('status', res.statusCode); process.exit(2) }
  const s = tls.connect({ socket: sock, servername: 'api.test' }, () =>
    s.write('GET ${p} HTTP/1.1\\r\\nHost: api.test\\r\\nConnection: close\\r\\n\\r\\n'))
  let d = ''
  s.on('data', (c) => (d += c))
  s.on('end', () => console.log(d.split('\\r\\n\\r\\n')[1]))
  s.on('error', (e) => { console.log('tls', e.message); process.exit(3) })
})
req.on('error', (e) => { console.log('proxy', e.message); process.exit(4) })
req.end()`

module.exports = {
  nodeProxyGet,
  repo,
  kern,
  kernBin,
  realKern,
  standinBin,
  STANDIN_ONLY,
  tmpDir,
  rand,
  sessionDirs,
  runNode,
  lastJson,
  wrapKern,
  readArgvLog,
  recordingKern,
  fakeKern,
  sandboxWith,
  openSandbox,
  openKernel,
  openMachine,
  procsMatching,
  sleep,
  waitFor,
  within,
  PY_SELF_SIGKILL,
}
