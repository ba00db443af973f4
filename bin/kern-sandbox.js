#!/usr/bin/env node
'use strict'
// `npx kern-sandbox doctor [--json]`: will boxes run here, and what to change if not. Exit code 0
// only when a box ran; 1 when none did; 2 for a usage error.
// `npx kern-sandbox snapshots [list|rm ID|gc --older-than DURATION]`: the machine snapshot store.

const USAGE = `usage: kern-sandbox doctor [--json] [--image IMAGE] [--timeout SECONDS]
       kern-sandbox snapshots [list [--json] | rm ID... | gc --older-than DURATION] [--dir DIR]

  doctor: checks that kern boxes can run here (kern, its images, user namespaces, seccomp, /proc
  masks, cgroup delegation, kern's scratch dir), then runs one box. Each finding says why and the
  fix for this host or container. --json prints the report as JSON (its shape: DoctorReport in
  index.d.ts). Exit code 0 only when the box ran.

  snapshots: the machine snapshot store (--dir, else $KERN_SANDBOX_SNAPSHOT_DIR, else
  $XDG_DATA_HOME/kern-sandbox/snapshots or ~/.local/share/kern-sandbox/snapshots). list (the
  default) prints id, name, image, size and creation time; rm removes snapshots by id (exit 1 if
  one is missing); gc removes those created more than DURATION ago (90s, 30m, 12h, 7d) and
  leftovers of interrupted snapshots as old. See docs/machines.md.`

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
  if (command === 'snapshots') return snapshots(rest)
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

function snapshots(args) {
  const store = require('../lib/snapshot-store.js')
  let dir = null
  let json = false
  let olderThan = null
  const words = []
  for (let i = 0; i < args.length; i++) {
    const a = args[i]
    if (a === '--dir' && args[i + 1]) dir = args[++i]
    else if (a === '--json') json = true
    else if (a === '--older-than' && args[i + 1]) olderThan = args[++i]
    else if (a.startsWith('-')) usage(`unknown or incomplete argument ${JSON.stringify(a)}`)
    else words.push(a)
  }
  const [sub = 'list', ...ids] = words
  const root = store.storeDir(dir)
  if (sub === 'list' && ids.length === 0) {
    const all = store.list(root)
    if (json) process.stdout.write(`${JSON.stringify(all, null, 2)}\n`)
    else if (all.length === 0) process.stdout.write(`no snapshots in ${root}\n`)
    else {
      for (const s of all) {
        const mib = (s.sizeBytes / (1 << 20)).toFixed(1)
        process.stdout.write(`${s.id}  ${s.name ?? '-'}  ${s.image}  ${mib} MiB  ${s.createdAt.toISOString()}\n`)
      }
    }
    return 0
  }
  if (sub === 'rm' && ids.length > 0) {
    let code = 0
    for (const id of ids) {
      if (!store.remove(root, id)) {
        process.stderr.write(`kern-sandbox: no snapshot ${JSON.stringify(id)} in ${root}\n`)
        code = 1
      }
    }
    return code
  }
  if (sub === 'gc' && ids.length === 0) {
    const ms = store.parseDuration(olderThan)
    if (olderThan === null || !(ms >= 0)) usage('gc needs --older-than DURATION (e.g. 7d, 12h, 30m, 90s)')
    const gone = store.gc(root, ms)
    process.stdout.write(json ? `${JSON.stringify(gone)}\n` : `removed ${gone.length} from ${root}\n`)
    return 0
  }
  usage(`snapshots: unknown or incomplete command ${JSON.stringify(words.join(' '))}`)
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (e) => {
    const which = process.argv[2] === 'snapshots' ? 'snapshots' : 'doctor'
    process.stderr.write(`kern-sandbox ${which}: ${e && e.stack ? e.stack : e}\n`)
    process.exitCode = 1
  },
)
