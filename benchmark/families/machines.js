'use strict'
// Machines on a real kern: start + first exec against a one-shot run(), later execs against the
// bare `kern exec` CLI, first output byte, PTY echo, 1 MiB files. The worker side is
// measure/machines.js.

const { spawn, spawnSync } = require('child_process')
const { ctx, IMPLS, worker, baseEnv, log } = require('../lib/runner')
const { median, fmt, line } = require('../lib/table')

/** How long `kern exec <box> true` takes into a running box: the floor a machine's exec is held to. */
function kernExecMs(n) {
  const name = `bench-exec-${process.pid}`
  const box = spawn(ctx.REAL_KERN, ['box', name, '--image', 'python:3.12-slim', '--', 'sleep', '600'], {
    stdio: 'ignore',
  })
  try {
    for (let i = 0; i < 100 && spawnSync(ctx.REAL_KERN, ['exec', name, 'true']).status !== 0; i++) {
      spawnSync('sleep', ['0.1'])
    }
    const ms = []
    for (let i = 0; i < n; i++) {
      const t = process.hrtime.bigint()
      spawnSync(ctx.REAL_KERN, ['exec', name, 'true'])
      ms.push(Number(process.hrtime.bigint() - t) / 1e6)
    }
    return median(ms)
  } finally {
    spawnSync(ctx.REAL_KERN, ['stop', name])
    box.kill('SIGKILL')
  }
}

async function machineRow() {
  const res = await worker(
    {
      mode: 'machine',
      module: IMPLS.ours,
      n: ctx.Q ? 5 : 15,
      warmup: 2,
      cells: ctx.Q ? 50 : 200,
      workspace: ctx.fixtures.realWs,
    },
    baseEnv(ctx.REAL_KERN),
  )
  if (res.error) throw new Error(res.error)
  const kernExec = kernExecMs(ctx.Q ? 20 : 50)
  const med = Object.fromEntries(
    ['start', 'run', 'exec', 'write', 'read', 'sbxWrite', 'sbxRead', 'firstByte', 'echo'].map((k) => [
      k,
      median(res[k]),
    ]),
  )
  log(
    `  machine: start + exec ${fmt(med.start)} ms, run ${fmt(med.run)} ms, exec ${fmt(med.exec)} ms, kern exec ${fmt(kernExec)} ms`,
  )
  const failed = res.failed
    ? { row: '', metric: 'failed calls', ours: String(res.failed), ref: '', ratio: '', target: '', result: '' }
    : null
  return {
    data: { ...med, kernExec, failed: res.failed },
    lines: [
      line(
        'machine() + first exec(["true"]) vs run(["true"])',
        'median ms',
        med.start,
        med.run,
        'lower',
        1.2,
        '<= 1.2x',
      ),
      line('  later exec(["true"]) vs `kern exec NAME true`', 'median ms', med.exec, kernExec, 'lower', 1.3, '<= 1.3x'),
      line(
        '  spawn to its first output byte',
        'median ms',
        med.firstByte,
        null,
        'none',
        null,
        '<= 5 ms',
        null,
        med.firstByte <= 5,
      ),
      line('  PTY keystroke echoed back', 'median ms', med.echo, null, 'none', null, '<= 2 ms', null, med.echo <= 2),
      line('  m.writeFile 1 MiB vs sbx.writeFile', 'median ms', med.write, med.sbxWrite, 'lower', 2, '<= 2x'),
      line('  m.readFile 1 MiB vs sbx.readFile', 'median ms', med.read, med.sbxRead, 'lower', 2, '<= 2x'),
      failed,
    ].filter(Boolean),
  }
}

/** pause() + resume() of a running machine (no reference: E2B's and others' pause is a remote
 * call of seconds; this is reported as it is). */
async function pauseRow() {
  const res = await worker(
    { mode: 'pause', module: IMPLS.ours, n: ctx.Q ? 10 : 50, warmup: 3, workspace: ctx.fixtures.realWs },
    baseEnv(ctx.REAL_KERN),
  )
  if (res.error) throw new Error(res.error)
  const med = { pause: median(res.pause), resume: median(res.resume), trip: median(res.trip) }
  log(
    `  pause: round trip ${fmt(med.trip)} ms (pause ${fmt(med.pause)}, resume ${fmt(med.resume)}) over ${res.procs} processes`,
  )
  return {
    data: { ...med, procs: res.procs, failed: res.failed },
    lines: [
      line(
        `pause + resume round trip (${res.procs} processes in the box)`,
        'median ms',
        med.trip,
        null,
        'none',
        null,
        'report',
      ),
      line('  pause() alone', 'median ms', med.pause, null, 'none', null, 'report'),
      line('  resume() alone', 'median ms', med.resume, null, 'none', null, 'report'),
      res.failed ? line('  exec after resume failed', 'count', res.failed, null, 'none', null, '0', null, false) : null,
    ].filter(Boolean),
  }
}

const ROW_TITLE = 'machines: start + first exec vs one run(); later exec vs `kern exec`; 1 MiB writeFile/readFile'
const rows = [
  { id: 'machine', real: true, title: ROW_TITLE, run: machineRow },
  { id: 'pause', real: true, title: 'machines: pause + resume round trip', run: pauseRow },
]

module.exports = { name: 'machines', title: 'machines (real kern)', rows }
