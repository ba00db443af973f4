'use strict'
// Worker side (run in a fresh `node benchmark/worker.js` process): warm-kernel cells on ours, on
// 0.1.23 or on the pipe floor; kernel start to first result; TypeScript cell preparation.

const path = require('path')
const { spawn } = require('child_process')
const { now, openSandbox, ok, bareArgs } = require('../lib/probe')

/** The floor under a warm kernel: a resident python3 in a bare box (the argv our binding builds,
 * its command swapped for this loop), one length-prefixed frame each way per cell (kind byte, u32
 * LE length, payload, as our driver's protocol), execing the cell with print() framed straight
 * onto the pipe. No capture, no tail expression, no interrupts, no output cap: only the pipes,
 * the box and the interpreter. */
const FLOOR_PY = `
import os, struct, sys
H = struct.Struct("<BI")
inp, out = os.dup(0), os.dup(1)
class W:
    def write(self, s):
        b = s.encode()
        os.write(out, H.pack(111, len(b)) + b) if len(b) < 65536 else os.writev(out, [H.pack(111, len(b)), b])
        return len(s)
    def flush(self):
        pass
sys.stdout = W()
buf = bytearray()
def take(n):
    while len(buf) < n:
        c = os.read(inp, 1 << 16)
        if not c:
            sys.exit(0)
        buf.extend(c)
    v = bytes(buf[:n])
    del buf[:n]
    return v
ns = {"__name__": "__main__"}
os.write(out, H.pack(82, 0))
while True:
    _, n = H.unpack(take(5))
    exec(compile(take(n).decode(), "<cell>", "exec"), ns)
    os.write(out, H.pack(100, 1) + b"0")
`

/** The same floor under a warm JavaScript kernel: a resident node reading frames on fd 0 (node
 * streams), running each cell with vm.runInThisContext, console.log framed straight onto fd 1.
 * No preparation, no trailing value, no capture of anything else, no interrupts. */
const FLOOR_JS = `
const fs = require('fs'), vm = require('vm'), net = require('net')
function frame(kind, s) {
  const b = Buffer.from(s), h = Buffer.alloc(5)
  h[0] = kind
  h.writeUInt32LE(b.length, 1)
  fs.writeSync(1, b.length < 65536 ? Buffer.concat([h, b]) : h)
  if (b.length >= 65536) fs.writeSync(1, b)
}
console.log = (...a) => frame(111, a.join(' ') + '\\n')
let buf = Buffer.alloc(0)
const input = new net.Socket({ fd: 0, readable: true, writable: false })
input.on('data', (c) => {
  buf = buf.length ? Buffer.concat([buf, c]) : c
  while (buf.length >= 5) {
    const n = buf.readUInt32LE(1)
    if (buf.length < 5 + n) break
    const code = buf.subarray(5, 5 + n).toString()
    buf = buf.subarray(5 + n)
    vm.runInThisContext(code)
    frame(100, '0')
  }
})
input.on('end', () => process.exit(0))
frame(82, '')
`

/** A framed ping-pong with a resident interpreter, Node streams on this side. */
function pipeFloor(tpl, language) {
  const args = bareArgs(tpl)
  const dash = args.indexOf('--')
  const t = args.indexOf('--timeout')
  if (t >= 0 && t < dash) args[t + 1] = '3600'
  args.splice(
    dash + 1,
    args.length,
    ...(language === 'javascript' ? ['node', '-e', FLOOR_JS] : ['python3', '-c', FLOOR_PY]),
  )
  const child = spawn(tpl.kern, args, { detached: true, stdio: ['pipe', 'pipe', 'ignore'] })
  let pending = Buffer.alloc(0)
  let waiter = null
  let out = []
  child.stdout.on('data', (c) => {
    pending = pending.length ? Buffer.concat([pending, c]) : c
    while (pending.length >= 5) {
      const n = pending.readUInt32LE(1)
      if (pending.length < 5 + n) break
      const kind = pending[0]
      const body = pending.subarray(5, 5 + n)
      pending = pending.subarray(5 + n)
      if (kind === 111) out.push(body)
      else if (waiter) {
        const w = waiter
        waiter = null
        const stdout = Buffer.concat(out).toString('utf8')
        out = []
        w({ exitCode: Number(body.toString()) || 0, fault: null, stdout })
      }
    }
  })
  const next = () => new Promise((resolve) => (waiter = resolve))
  return {
    ready: next(),
    runCode(code) {
      const src = Buffer.from(code)
      const head = Buffer.alloc(5)
      head[0] = 99
      head.writeUInt32LE(src.length, 1)
      child.stdin.write(Buffer.concat([head, src]))
      return next()
    },
    close() {
      child.stdin.end()
      return new Promise((resolve) => child.on('close', resolve))
    },
  }
}

module.exports = {
  /** Warm-kernel cells: per-cell round trip (ms) for each of spec.cells, one kernel. */
  async kernel(spec) {
    let s = null
    let k
    if (spec.impl === 'floor') {
      k = pipeFloor(spec.bare, spec.language)
      await k.ready
    } else {
      s = await openSandbox(spec)
      // 0.1.23 takes no options; a language only for ours.
      k = await (spec.language ? s.kernel({ language: spec.language }) : s.kernel())
    }
    const out = {}
    const cpu0 = process.cpuUsage()
    let calls = 0
    const timed = async (name, code) => {
      const t = now()
      const r = await k.runCode(code)
      const cell = (out[name] ||= { samples: [], failed: 0 })
      cell.samples.push(now() - t)
      if (!ok(r)) cell.failed++
      calls++
    }
    const cells = Object.entries(spec.cells)
    if (spec.interleave) {
      // Cells compared with each other take turns, so drifting load hits them alike.
      for (let i = 0; i < spec.warmup; i++) for (const [, code] of cells) await k.runCode(code)
      for (let i = 0; i < spec.n; i++) for (const [name, code] of cells) await timed(name, code)
    } else {
      for (const [name, code] of cells) {
        for (let i = 0; i < spec.warmup; i++) await k.runCode(code)
        for (let i = 0; i < spec.n; i++) await timed(name, code)
      }
    }
    const cpu = process.cpuUsage(cpu0)
    const t = now()
    await k.close()
    const closeMs = now() - t
    if (s) await s.close()
    return { cells: out, closeMs, cpuMsPerCall: (cpu.user + cpu.system) / 1000 / calls }
  },

  /** Kernel start to first result (ms per kernel, closed after), beside a one-shot box running
   * spec.command (its start-to-exit). */
  async kernelStart(spec) {
    const s = await openSandbox(spec)
    const kernel = []
    const box = []
    let failed = 0
    for (let i = 0; i < spec.warmup + spec.n; i++) {
      let t = now()
      const k = await s.kernel({ language: spec.language })
      const r = await k.runCode(spec.cell)
      const ms = now() - t
      if (!ok(r) || r.results.length !== 1) failed++
      await k.close()
      t = now()
      const b = await s.run(spec.command)
      const boxMs = now() - t
      if (!ok(b)) failed++
      if (i >= spec.warmup) {
        kernel.push(ms)
        box.push(boxMs)
      }
    }
    await s.close()
    return { kernel, box, failed }
  },

  /** Host-side preparation of a TypeScript cell of spec.lines lines: type stripping alone (amaro,
   * strip-only) and the whole preparation (stripping plus the cell rewrite), ms per cell. */
  async tsPrepare(spec) {
    const amaro = require(require.resolve('amaro', { paths: [spec.module] }))
    const { prepareCell } = require(path.join(spec.module, 'lib', 'jscell.js'))
    const lines = []
    for (let i = 0; i < spec.lines; i++) {
      lines.push(
        i % 4 === 0
          ? `interface Row${i} { id: number; name?: string }`
          : `const v${i}: Array<number> = [${i}, ${i + 1}].map((x: number): number => x * 2)`,
      )
    }
    const code = lines.join('\n')
    const time = (fn) => {
      for (let i = 0; i < spec.warmup; i++) fn()
      const samples = []
      for (let i = 0; i < spec.n; i++) {
        const t = now()
        fn()
        samples.push(now() - t)
      }
      return samples
    }
    return {
      strip: time(() => amaro.transformSync(code, { mode: 'strip-only' })),
      prepare: time(() => prepareCell(code, { typescript: true })),
    }
  },
}
