'use strict'
// doctor(): will boxes run here, and if not, what to change. kern's own commands (--version,
// doctor, info, images --json) and one real box run side by side, so the whole report takes
// about as long as kern's doctor; nothing is cached between runs. The report's shape is
// documented in index.d.ts (DoctorReport) and is stable: tools may parse `--json`.

const os = require('node:os')
const path = require('node:path')
const host = require('../host/facts.js')
const kern = require('./kern.js')
const checks = require('./checks.js')
const { runBox } = require('./box.js')

const DEFAULT_IMAGE = 'python:3.12-slim'
/** kern's own commands answer in well under this; a hung one must not hold the report. */
const KERN_COMMAND_MS = 5000

/** The default image, from the native core when it loads (it applies the defaults). */
function defaultImage() {
  try {
    return require('../native.js').optionDefaults().image ?? DEFAULT_IMAGE
  } catch {
    return DEFAULT_IMAGE
  }
}

function agentPath() {
  return require('../machine.js').agentPath()
}

/** The report: `{ ok, environment, durationMs, checks }`; `ok` is true only when a box ran. */
async function doctor(opts = {}) {
  if (opts === null || typeof opts !== 'object') throw new TypeError('doctor(opts): opts must be an object')
  const started = Date.now()
  const image = opts.image ?? defaultImage()
  const timeoutS = opts.timeoutS ?? 15
  if (typeof image !== 'string' || !image) throw new TypeError('doctor(opts): image must be a non-empty string')
  if (typeof timeoutS !== 'number' || !(timeoutS > 0))
    throw new TypeError('doctor(opts): timeoutS must be a positive number')
  const environment = host.environment()
  const located = kern.locate()
  const bin = located.error ? null : located.path

  const none = Promise.resolve(null)
  const [version, doctorOut, infoOut, imagesOut, box] = await Promise.all([
    bin ? kern.run(bin, ['--version'], KERN_COMMAND_MS) : none,
    bin ? kern.run(bin, ['doctor'], KERN_COMMAND_MS) : none,
    bin ? kern.run(bin, ['info'], KERN_COMMAND_MS) : none,
    bin ? kern.run(bin, ['images', '--json'], KERN_COMMAND_MS) : none,
    bin
      ? runBox({ image, timeoutS })
      : Promise.resolve({ ran: false, why: 'no kern to start a box with', cause: null }),
  ])

  const list = [checks.kernCheck(located, version)]
  if (bin) {
    const kernDoctor = doctorOut && doctorOut.code === 0 ? kern.parseDoctor(doctorOut.stdout) : null
    const info = infoOut && infoOut.code === 0 ? kern.parseInfo(infoOut.stdout) : {}
    const kernRuntime = info['runtime dir'] ?? null
    const scratch = kernRuntime ?? path.join(process.env.XDG_RUNTIME_DIR || `/run/user/${process.getuid()}`, 'kern')
    list.push(
      checks.kernDoctorCheck(kernDoctor && kernDoctor.findings.length ? kernDoctor : null),
      checks.imagesCheck(imagesOut.code === 0 ? kern.parseImages(imagesOut.stdout) : null, image),
      checks.agentCheck(agentPath),
      checks.usernsCheck(kernDoctor, host.usernsSysctls(), environment),
      checks.seccompCheck(host.seccomp(), environment, box),
      checks.procCheck(host.procMasks(), environment, box),
      checks.apparmorCheck(host.apparmorProfile(), environment, box),
      checks.cgroupCheck(kernDoctor, host.cgroup(), environment),
      checks.scratchCheck(path.join(scratch, 'scratch'), host.fsType(scratch), environment),
      checks.runtimeDirCheck(host.runtimeDir(), kernRuntime),
    )
  } else {
    list.push(checks.agentCheck(agentPath))
  }
  list.push(checks.bubblewrapCheck(host.onPath('bwrap')), checks.boxCheck(box, environment, image))
  return { ok: box.ran, environment, durationMs: Date.now() - started, checks: list }
}

const MARK = { ok: 'ok  ', warn: 'WARN', fail: 'FAIL' }

/** The report as text for a terminal: one line per check, its fix indented below. */
function formatReport(report) {
  const lines = [`kern-sandbox doctor (${report.environment}, ${os.release()})`]
  for (const c of report.checks) {
    lines.push(`  ${MARK[c.status]} ${c.id}: ${c.why}`)
    if (c.fix) lines.push(`         fix: ${c.fix}`)
  }
  const failed = report.checks.filter((c) => c.status === 'fail').length
  const warned = report.checks.filter((c) => c.status === 'warn').length
  lines.push(
    report.ok
      ? `ready: a box runs here (${warned} warning(s)), ${report.durationMs} ms`
      : `not ready: no box runs here (${failed} failure(s), ${warned} warning(s)), ${report.durationMs} ms`,
  )
  return lines.join('\n')
}

module.exports = { doctor, formatReport }
