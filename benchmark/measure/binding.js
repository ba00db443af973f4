'use strict'
// Worker side (run in a fresh `node benchmark/worker.js` process): the binding's output path on
// fake kerns, a capped flood and 100,000 chunks through onStdout.

const { now, rssWindow, openSandbox } = require('../lib/probe')

module.exports = {
  /** A fake kern floods stdout; the session caps the capture at spec.cap. */
  async flood(spec) {
    const s = await openSandbox(spec, { maxOutputBytes: spec.cap })
    const w = rssWindow()
    const t = now()
    const r = await s.run(['flood'])
    const ms = now() - t
    const rss = w.end()
    const res = {
      ms,
      ...rss,
      stdoutBytes: Buffer.byteLength(r.stdout),
      truncated: r.truncated,
      exitCode: r.exitCode,
      fault: r.fault,
    }
    await s.close()
    return res
  },


  /** A fake kern writes spec.n distinct lines; every byte must reach onStdout, in order. */
  async stream(spec) {
    const { chunkLine } = require('../lib/fixtures')
    const chunks = []
    // onStdout as a session option: the reference's run() takes no per-call options.
    // spec.perChunkUs: a callback that does some work per chunk; spec.blockMs: the JS thread busy
    // for that long right after the call starts (a slow consumer either way).
    const spin = (ms) => {
      const end = now() + ms
      while (now() < end);
    }
    const onStdout = spec.perChunkUs
      ? (c) => {
          chunks.push(c)
          spin(spec.perChunkUs / 1000)
        }
      : (c) => chunks.push(c)
    const s = await openSandbox(spec, { onStdout })
    const t = now()
    const pending = s.run(['stream'])
    if (spec.blockMs) spin(spec.blockMs)
    const r = await pending
    const ms = now() - t
    await s.close()
    const expected = Buffer.from(Array.from({ length: spec.n }, (_, i) => chunkLine(i)).join(''))
    const got = Buffer.concat(chunks)
    let firstMismatch = -1
    if (!got.equals(expected)) {
      const m = Math.min(got.length, expected.length)
      for (let i = 0; i < m; i++)
        if (got[i] !== expected[i]) {
          firstMismatch = i
          break
        }
      if (firstMismatch < 0) firstMismatch = m
    }
    const lines = got.toString('latin1').split('\n').length - 1
    return {
      ms,
      callbacks: chunks.length,
      deliveredBytes: got.length,
      expectedBytes: expected.length,
      deliveredLines: lines,
      inOrder: firstMismatch < 0,
      firstMismatch,
      resultStdoutMatches: r.stdout === expected.toString('utf8'),
      linesPerS: (spec.n * 1000) / ms,
    }
  },
}
