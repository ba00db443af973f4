#!/usr/bin/env node
'use strict'
// `npx kern-sandbox doctor [--json]`: will boxes run here, and what to change if not. Exit code 0
// only when a box ran; 1 when none did; 2 for a usage error.

const USAGE = `usage: kern-sandbox doctor [--json] [--image IMAGE] [--timeout SECONDS]

  Checks that kern boxes can run here (kern, its images, user namespaces, seccomp, /proc masks,
  cgroup delegation, kern's scratch dir), then runs one box. Each finding says why and the fix
  for this host or container. --json prints the report as JSON (its shape: DoctorReport in
  index.d.ts). Exit code 0 only when the box ran.`

function usage(message) {
  if (message) process.stderr.write(`kern-sandbox: ${message}\n`)
  process.stderr.write(`${USAGE}\n`)
  process.exit(2)
}

async function main(argv) {
  const [command, ...rest] = argv
  if (command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(`${USAGE}\n`)
    return 0
  }
  if (command !== 'doctor') usage(command ? `unknown command ${JSON.stringify(command)}` : 'a command is needed')
  const opts = {}
  let json = false
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i]
    if (a === '--json') json = true
    else if (a === '--image' && rest[i + 1]) opts.image = rest[++i]
    else if (a === '--timeout' && Number(rest[i + 1]) > 0) opts.timeoutS = Number(rest[++i])
    else if (a === '--help' || a === '-h') {
      process.stdout.write(`${USAGE}\n`)
      return 0
    } else usage(`unknown or incomplete argument ${JSON.stringify(a)}`)
  }
  // kern's notes about the host (KernWarning) are facts doctor's checks already state: keep them
  // off the terminal; other warnings print as usual.
  process.removeAllListeners('warning')
  process.on('warning', (w) => {
    if (w.name !== 'KernWarning') process.stderr.write(`${w.name}: ${w.message}\n`)
  })
  const { doctor, formatReport } = require('../lib/doctor/index.js')
  const report = await doctor(opts)
  process.stdout.write(json ? `${JSON.stringify(report, null, 2)}\n` : `${formatReport(report)}\n`)
  return report.ok ? 0 : 1
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (e) => {
    process.stderr.write(`kern-sandbox doctor: ${e && e.stack ? e.stack : e}\n`)
    process.exitCode = 1
  },
)
