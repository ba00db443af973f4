'use strict'
// kern's own notes about its boxes (its "caps are not enforced on this host" warning and their
// kin). kern prints them before the workload starts; they are about the host, not the workload, so
// the native side keeps them out of stderr and onStderr and hands them here, each distinct line
// once per process.

const native = require('./native.js')

/** Reports the notes kern printed since the last call as process warnings of type KernWarning. */
function reportKernNotes() {
  for (const line of native.takeKernNotes()) process.emitWarning(line, { type: 'KernWarning' })
}

module.exports = { reportKernNotes }
