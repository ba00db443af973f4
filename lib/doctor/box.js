'use strict'
// doctor's end-to-end check: one real box, started the way the package starts every box (a
// session's run(), so the workspace, the env file and kern's started channel are all exercised),
// with no box started ahead and a deadline. A box that fails to start comes back as the session's
// startup_failed fault, already diagnosed (lib/host/diagnose.js via lib/sandbox.js).

/** `{ ran, ms, why, cause }`: whether `true` ran in `image`, and if not, why. */
async function runBox({ image, timeoutS }) {
  const started = Date.now()
  let sbx
  try {
    // Loaded here, so a missing native binary is this check's finding, not doctor's crash.
    const { Sandbox } = require('../sandbox.js')
    sbx = new Sandbox({ image, prewarm: 0, trackFiles: false, timeoutS })
    await sbx.open()
    const r = await sbx.run(['true'])
    const ms = Date.now() - started
    if (r.success) return { ran: true, ms }
    if (r.fault && r.fault.code) {
      // The fault's message says the cause and the fix, which the report has as checks: keep kern's words.
      const said = r.fault.message.split('kern said: ').pop()
      return { ran: false, ms, why: `startup_failed (${r.fault.code}): ${said}`, cause: r.fault.code }
    }
    if (r.fault) return { ran: false, ms, why: `${r.fault.type}: ${r.fault.message}`, cause: null }
    const stderr = r.stderr.trim().split('\n').slice(-2).join(' ')
    return {
      ran: false,
      ms,
      why: `\`true\` exited ${r.exitCode} in the box${stderr ? `: ${stderr}` : ''}`,
      cause: null,
    }
  } catch (e) {
    return { ran: false, ms: Date.now() - started, why: String(e && e.message ? e.message : e), cause: null }
  } finally {
    if (sbx) await sbx.close().catch(() => {})
  }
}

module.exports = { runBox }
