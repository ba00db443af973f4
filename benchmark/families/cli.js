'use strict'
// The bare kern CLI as a reference, in the same run as our calls: `kern box NAME --image
// python:3.12-slim -- python3 -c 'x=1'` and `… -- true`, spawned straight from Node (no library,
// no workspace, kern's defaults), against a cold runCode("x = 1") and run(["true"]) (a box
// started per call). Issue 34 holds the cold runCode to 1.1x the CLI's python3 call. The worker
// side is the `cli` impl of measure/calls.js.

const { spawnSync } = require('child_process')
const { ctx, callRows } = require('../lib/runner')
const { errs, failedLine, line, issue34 } = require('../lib/table')

const IMAGE = 'python:3.12-slim'

/** kern's argv for a bare box running `cmd`; the worker puts a fresh name where NAME is. */
const cliArgv = (cmd) => ['box', 'NAME', '--image', IMAGE, '--', ...cmd]

async function cliRow() {
  const { Q, REAL_KERN, fixtures } = ctx
  // The CLI would pull a missing image: refuse instead, the bench never touches the network. (A
  // kern without `images`, like the project's stand-in, pulls nothing either.)
  const images = spawnSync(REAL_KERN, ['images'], { encoding: 'utf8' })
  if (images.status === 0 && !images.stdout.split('\n').some((l) => l.split(/\s+/)[0] === IMAGE))
    throw new Error(`\`${REAL_KERN} images\` does not list ${IMAGE}: load it first (the bench does not pull)`)
  const n = Q ? 8 : 20
  const sandbox = { workspace: fixtures.realWs }
  const py = await callRows('cli python3', {
    kern: REAL_KERN,
    n,
    warmup: 3,
    sandbox,
    impls: ['ours', 'cli'],
    extra: { ours: { code: 'x = 1' }, cli: { cli: cliArgv(['python3', '-c', 'x=1']) } },
  })
  const tr = await callRows('cli true', {
    kern: REAL_KERN,
    n,
    warmup: 3,
    sandbox,
    impls: ['ours', 'cli'],
    extra: { ours: { command: ['true'] }, cli: { cli: cliArgv(['true']) } },
  })
  return {
    data: { python3: py, true: tr, image: IMAGE },
    lines: [
      issue34(
        'cold runCode("x = 1") vs the bare CLI python3 call',
        line(
          "cold runCode('x = 1') vs bare `kern box … -- python3 -c 'x=1'`",
          'median ms',
          py.ours.median,
          py.cli.median,
          'lower',
          1.1,
          '<= 1.1x (issue 34)',
          errs(py),
        ),
      ),
      line('', 'node CPU ms per call', py.ours.cpuMsPerCall, py.cli.cpuMsPerCall, 'lower', null, '(all threads)'),
      failedLine(py, ['ours', 'cli']),
      issue34(
        "cold run(['true']) vs the bare CLI true",
        line(
          "cold run(['true']) vs bare `kern box … -- true`",
          'median ms',
          tr.ours.median,
          tr.cli.median,
          'lower',
          null,
          'report',
          errs(tr),
        ),
      ),
      line('', 'node CPU ms per call', tr.ours.cpuMsPerCall, tr.cli.cpuMsPerCall, 'lower', null, '(all threads)'),
      failedLine(tr, ['ours', 'cli']),
    ].filter(Boolean),
  }
}

const ROW_TITLE =
  "bare kern CLI: `kern box NAME --image python:3.12-slim -- python3 -c 'x=1'` and `-- true` vs cold calls"
const rows = [{ id: 'cli', real: true, title: ROW_TITLE, run: cliRow }]

module.exports = { name: 'cli', title: 'the bare kern CLI as a reference (real kern)', rows }
