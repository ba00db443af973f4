'use strict'
// A session closed while calls are still running: close() must stop them, and every call settles.

const { kern, MARKER, MAX_OUT, sleep, sh, tally, problems, state } = require('./context')

async function closeWhileRunning() {
  const closer = await new kern.Sandbox({ maxOutputBytes: MAX_OUT }).open()
  const running = Array.from({ length: 6 }, () =>
    closer.run(sh(`python3 -c 'import time; time.sleep(30)' ${MARKER} & sleep 30`), { timeoutS: 60 }).then(
      (r) => r,
      (e) => e,
    ),
  )
  await sleep(400)
  await closer.close()
  const closed = await Promise.race([Promise.all(running), sleep(30_000).then(() => null)])
  const t = (tally['close-while-running'] = { n: 6, bad: 0, ms: 0 })
  if (!closed) {
    t.bad = 6
    state.hungCalls += 6
    problems.push('close-while-running: calls did not settle within 30 s of close()')
  }
}

module.exports = { closeWhileRunning }
