// Warm kernel driver: one resident node serving cells, run as `node -e DRIVER <marker>` by the
// launcher (launch.sh), which hands it the box's stdin/stdout as fds 3/4 (the control channel),
// /dev/null as fd 0, and as fds 1/2 the write ends of two pipes whose read ends are fds 5/6.
// Frames both ways are a kind byte, a little-endian u32 length and the payload:
//   host -> box:  c <prepared cell, JSON>  i (interrupt the running cell)
//   box -> host:  R (ready)  o/e <stdout/stderr bytes>  r <result JSON>  x <error JSON>  d <exit status>
// console and process.stdout/stderr write frames directly; raw fd 1/2 writes (child processes,
// fs.writeSync) go through the pipes this driver drains, so they cannot desync the frames.
// An interrupt is an `i` frame, read between turns of the event loop, that ends a cell stuck on
// an await; a cell still running after it (synchronous code) gets SIGINT, which V8 stops
// (breakOnSigint) or, landing as the cell awaits, the handler below. The frame comes first
// because node's SIGINT watchdog races with a signal landing as a guarded run starts or stops.
const net = require('net')
const C = fs.constants

/** A private copy of an inherited pipe (close-on-exec, its own file status flags), so children
 * of a cell never hold the control channel; the inherited one is closed. Anything but a pipe
 * cannot be reopened and is used as it is (`fallback`), or not at all. */
function reopen(fd, flags, fallback) {
  try {
    const own = fs.openSync('/proc/self/fd/' + fd, flags)
    fs.closeSync(fd)
    return own
  } catch {
    return fallback ? fd : -1
  }
}

// Non-blocking (libuv makes a pipe so anyway): linger() reads it past libuv.
const ctrlIn = reopen(3, C.O_RDONLY | C.O_NONBLOCK, true)
const ctrlOut = reopen(4, C.O_WRONLY, true)
const rawFds = [
  [reopen(5, C.O_RDONLY | C.O_NONBLOCK, false), 0x6f],
  [reopen(6, C.O_RDONLY | C.O_NONBLOCK, false), 0x65],
].filter(([fd]) => fd >= 0)
const realExit = process.exit.bind(process)

// Frames are built in one buffer, kept between writes (they are synchronous): a fresh one per
// large frame would be memory outside V8's heap that it collects garbage to account for.
let framing = Buffer.allocUnsafeSlow(1 << 16)
const FRAMING_KEPT = 4 << 20

/** Writes frames, [kind, Buffer or string] each, in one write. A string is encoded (UTF-8)
 * straight into the frame, its length filled in after: room for 3 bytes per UTF-16 unit costs
 * less than counting its bytes first. */
function send(...frames) {
  let room = 0
  for (const [, p] of frames) room += 5 + (typeof p === 'string' ? 3 * p.length : p.length)
  let frame = framing
  if (room > frame.length) {
    if (room <= FRAMING_KEPT)
      frame = framing = Buffer.allocUnsafeSlow(Math.max(room, Math.min(FRAMING_KEPT, 2 * framing.length)))
    else {
      room = 0
      for (const [, p] of frames) room += 5 + (typeof p === 'string' ? Buffer.byteLength(p) : p.length)
      frame = Buffer.allocUnsafeSlow(room)
    }
  }
  let size = 0
  for (const [kind, p] of frames) {
    const n = typeof p === 'string' ? frame.write(p, size + 5) : (frame.set(p, size + 5), p.length)
    frame[size] = kind
    frame.writeUInt32LE(n, size + 1)
    size += 5 + n
  }
  let off = 0
  while (off < size) {
    try {
      off += fs.writeSync(ctrlOut, frame, off, size - off)
    } catch (e) {
      if (e.code !== 'EAGAIN' && e.code !== 'EINTR') realExit(71) // the host is gone
    }
  }
}

// The running cell, or null between cells.
let cell = null
// Output made between cells (a timer, a late rejection) goes to the next cell, within a bound.
const held = []
let heldBytes = 0
const HELD_MAX = 1 << 20
let lastDrain = 0
const scratch = Buffer.allocUnsafe(1 << 16)

/** Forwards what raw fd 1/2 writes are waiting. An empty pipe answers EAGAIN, which node throws
 * as an error it captures a full stack for (raising Error.stackTraceLimit to do so, unless the
 * limit is read-only): held read-only at 0 meanwhile, a read that finds nothing costs a few
 * microseconds instead of tens. */
function drainRaw() {
  lastDrain = performance.now()
  const limit = Object.getOwnPropertyDescriptor(Error, 'stackTraceLimit')
  let frozen = false
  try {
    Object.defineProperty(Error, 'stackTraceLimit', { value: 0, writable: false, configurable: true })
    frozen = true
  } catch {
    // a cell made it unconfigurable: the reads cost more, nothing else changes
  }
  try {
    for (const [fd, kind] of rawFds) {
      for (;;) {
        let n
        try {
          n = fs.readSync(fd, scratch, 0, scratch.length, null)
        } catch {
          break // EAGAIN: nothing waits
        }
        if (n <= 0) break
        output(kind, scratch.subarray(0, n), true) // output() copies what it keeps
      }
    }
  } finally {
    if (frozen) {
      if (limit) Object.defineProperty(Error, 'stackTraceLimit', limit)
      else delete Error.stackTraceLimit
    }
  }
}

function output(kind, buf, drained) {
  if (!buf.length) return
  if (cell) {
    // Raw writes made before this one go out first (checked at most every millisecond: a read
    // that finds nothing costs an exception).
    if (!drained && cell.guard && performance.now() - lastDrain > 1) drainRaw()
    send([kind, buf])
  } else if (heldBytes < HELD_MAX) {
    // A copy: `buf` may be a view of a read buffer that is reused.
    const room = HELD_MAX - heldBytes
    const kept = typeof buf === 'string' ? Buffer.from(buf).subarray(0, room) : Buffer.from(buf.subarray(0, room))
    held.push([kind, kept])
    heldBytes += kept.length
  }
}

function patchStream(stream, kind) {
  stream.write = function write(chunk, encoding, cb) {
    if (typeof encoding === 'function') {
      cb = encoding
      encoding = undefined
    }
    let buf
    if (typeof chunk === 'string') {
      // UTF-8 text goes to the frame as it is (encoded once, there).
      const utf8 = encoding == null || encoding === 'utf8' || encoding === 'utf-8' || !Buffer.isEncoding(encoding)
      buf = utf8 ? chunk : Buffer.from(chunk, encoding)
    } else if (chunk instanceof Uint8Array) buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
    else throw new TypeError('The "chunk" argument must be of type string or an instance of Buffer or Uint8Array')
    output(kind, buf, false)
    if (typeof cb === 'function') process.nextTick(cb)
    return true
  }
}

function report(prefix, e) {
  const { text } = describeError(e)
  output(0x65, prefix + text, false)
}

function onStray(prefix) {
  return (e) => {
    if (e instanceof KernelExit) {
      if (cell && cell.stop) cell.stop({ exit: e.code })
      return
    }
    report(prefix, e)
  }
}

/** node's SIGINT watchdog (breakOnSigint) counts signals on a semaphore that its stop does not
 * reset: a SIGINT racing with the end of a guarded run (the host interrupts again while an
 * aborted cell has not ended) can stay counted and interrupt the next guarded cell the moment it
 * starts. After an interrupted cell, before the next one is read, a guarded run made to be
 * interrupted spends such a count; with none, it ends on its own after some milliseconds. */
function spendStrayInterrupt() {
  try {
    strayInterruptSpin.runInThisContext({ breakOnSigint: true })
  } catch {
    // interrupted: the count is spent
  }
}
// A few milliseconds of counting, touching no global a cell could have replaced (a faked clock).
const strayInterruptSpin = new vm.Script('for (let i = 0; i < 5e6; i++);')

// Compiled cells by their prepared text: a notebook runs a cell again, an agent retries or polls
// with the same code, and compiling is most of what a small cell costs (more still in node 18
// for a source compiled before under another name). A cell run again keeps the name it was
// compiled with (its first <cell-N>) in stacks.
const compiled = new Map()
const COMPILED_ENTRIES = 64
const COMPILED_SOURCE_MAX = 16 * 1024

function compiledCell(body, file) {
  const text = body.toString('utf8')
  const keep = body.length <= COMPILED_SOURCE_MAX
  let c = keep ? compiled.get(text) : undefined
  if (c === undefined) {
    let prepared
    try {
      prepared = JSON.parse(text)
    } catch {
      prepared = { syntaxError: { message: 'the host sent a cell that is not JSON' } }
    }
    c = compileCell(prepared, file)
    if (keep) {
      if (compiled.size >= COMPILED_ENTRIES) compiled.delete(compiled.keys().next().value)
      compiled.set(text, c)
    }
  }
  return c
}

/** Runs one cell. A cell with no await and no promise for a value ends here, synchronously;
 * otherwise the returned promise settles when it has. */
function serveCell(body) {
  count += 1
  const file = `<cell-${count}>`
  const current = (cell = { stop: null, guard: true })
  for (const [kind, buf] of held.splice(0)) send([kind, buf])
  heldBytes = 0
  let interrupted = false
  // Raw output still in the pipes goes out before the cell's last frames; a cell with no call
  // and no loop (guard false) wrote none.
  const finish = (rc, result) => {
    if (current.guard) drainRaw()
    cell = null
    if (result === undefined) send([0x64, String(rc)])
    else send([0x72, result], [0x64, String(rc)])
    if (interrupted) spendStrayInterrupt()
  }
  const fail = (e) => {
    if (e instanceof KernelExit) return finish(e.code)
    if (field(e, 'code') === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') interrupted = true
    const { error, text } = describeError(e)
    output(0x65, text, false)
    send([0x78, JSON.stringify(error)])
    finish(1)
  }
  const done = (value) => finish(0, value === undefined ? undefined : resultJson(bundleOf(value), true))
  let value
  let running
  try {
    const c = compiledCell(body, file)
    current.guard = c.guard
    value = c.run()
    if (c.sync) {
      // A thenable value is awaited, as an async cell's would be.
      const then = value !== null && (typeof value === 'object' || typeof value === 'function') ? value.then : undefined
      if (typeof then !== 'function') return done(value)
      running = Promise.resolve(value)
    } else running = value
  } catch (e) {
    return fail(e)
  }
  const stopped = new Promise((resolve) => (current.stop = resolve))
  running.catch(() => {}) // settling after an interrupt is no one's business
  return Promise.race([running.then((v) => ({ value: v })), stopped]).then((end) => {
    if (end.exit !== undefined) return finish(end.exit)
    if (end.interrupted) {
      interrupted = true
      output(0x65, 'Interrupted: the cell was still awaiting when it was interrupted\n', false)
      return finish(130)
    }
    done(end.value)
  }, fail)
}

/** Answers a cell interrupted before it started, without running it (output held for the next
 * cell stays held: this one's call rejects). */
function skipCell() {
  count += 1
  send([0x65, 'Interrupted: the cell was interrupted before it started\n'], [0x64, '130'])
}

let count = 0
const queue = []
let busy = false
const EMPTY = Buffer.alloc(0)
let inbuf = EMPTY

async function pump() {
  if (busy) return
  busy = true
  while (queue.length) {
    const next = queue.shift()
    const pending = next.interrupted ? skipCell() : serveCell(next.body)
    if (pending) await pending
  }
  busy = false
  if (!lingering) {
    lingering = true
    later(linger)
  }
}

// After a cell, the host's next frame (an agent's or a notebook's next cell, an interrupt) often
// comes within tens of microseconds, and node sleeping in epoll for it and being woken again cost
// more than the rest of a short cell's round trip. So once the cell and what it queued have run
// (this is an immediate: microtasks and the cell's own immediates went first), the control pipe
// is read without blocking for up to LINGER_NS before the loop may sleep; never while a timer or
// an immediate is pending, which would run late. When the driver's own pipes are all the loop
// holds, nothing could be served before the frame it reads, which is taken at once (the turn of
// the loop was a tenth of a short cell's round trip; an unref'd timer, which node does not count,
// then runs after that cell). Otherwise the frame goes through the loop as one libuv read would,
// a turn later: I/O and timers come due meanwhile are served before the next cell, and a frame
// libuv reads first is taken after it. The clock, the check and the scheduling are the
// driver's own copies (a cell may replace the globals), and the reads are counted as well. A host
// slower than that (a person typing, cells with much output) finds the driver asleep anyway: after
// a few lingers in a row found nothing, one in 16 is tried until one finds a frame.
let lingering = false
let lingerMisses = 0
let lingerSkips = 0
const LINGER_NS = 100_000n
const LINGER_READS = 400
const clock = process.hrtime.bigint
const later = setImmediate
const activeResources = process.getActiveResourcesInfo
// The handles the driver itself keeps open (its pipe readers, process.stdout/stderr), once served.
let ownHandles = 0

function linger() {
  lingering = false
  if (busy || cell || queue.length || inbuf.length || typeof activeResources !== 'function') return
  if (ctrlIn === 3) return // not reopened, so maybe blocking: a read could wait for the host
  if (lingerMisses >= 4 && ++lingerSkips % 16 !== 0) return
  const active = activeResources()
  let alone = active.length <= ownHandles
  for (let i = 0; i < active.length; i++) {
    if (active[i] === 'Timeout' || active[i] === 'Immediate') return
    if (active[i] !== 'PipeWrap') alone = false
  }
  const limit = Object.getOwnPropertyDescriptor(Error, 'stackTraceLimit')
  try {
    // An empty pipe answers EAGAIN, thrown with a stack: see drainRaw.
    Object.defineProperty(Error, 'stackTraceLimit', { value: 0, writable: false, configurable: true })
  } catch {
    return // a cell made it unconfigurable: each read would cost tens of microseconds
  }
  const end = clock() + LINGER_NS
  let n = -1
  try {
    for (let reads = 0; n < 0 && reads < LINGER_READS && clock() < end; reads++) {
      try {
        n = fs.readSync(ctrlIn, scratch, 0, scratch.length, null)
      } catch {
        n = -1 // EAGAIN: nothing yet
      }
    }
  } finally {
    if (limit) Object.defineProperty(Error, 'stackTraceLimit', limit)
    else delete Error.stackTraceLimit
  }
  lingerMisses = n > 0 ? 0 : lingerMisses + 1
  // End of file (n 0) is left for the control socket to find.
  if (n > 0 && alone) onControl(scratch.subarray(0, n), true)
  else if (n > 0) {
    inbuf = Buffer.from(scratch.subarray(0, n))
    later(onControl, EMPTY, true)
  }
}

/** Frames of the control channel; `chunk` is a view of a read buffer that the next read reuses,
 * so what is kept is copied. Cells start at once when `now` (the driver read them in an
 * immediate, after those queued before it); ones libuv read, in its poll phase, wait for the
 * check phase, so that what an earlier cell queued with setImmediate runs first (the driver
 * being preempted as a cell ends lets the host's next frame in before those). */
function onControl(chunk, now = false) {
  let data = inbuf.length ? Buffer.concat([inbuf, chunk]) : chunk
  while (data.length >= 5) {
    const n = data.readUInt32LE(1)
    if (data.length < 5 + n) break
    const kind = data[0]
    const body = data.subarray(5, 5 + n)
    data = data.subarray(5 + n)
    if (kind === 0x69) {
      // For the host's one cell in flight: the running one, or one read with this frame and not
      // started yet. The host writes the next cell only after this one's done frame.
      if (cell && cell.stop) cell.stop({ interrupted: true })
      else if (queue.length) queue[queue.length - 1].interrupted = true
      continue
    }
    if (kind !== 0x63) realExit(0)
    queue.push({ body: Buffer.from(body), interrupted: false })
  }
  inbuf = data.length ? Buffer.from(data) : EMPTY
  if (now) pump()
  else later(pump)
}

/** A read-only socket on `fd` whose reads go to `onChunk(view)` in one reused buffer, past
 * node's stream machinery (most of what a small cell's read cost the driver). */
function reader(fd, onChunk) {
  return new net.Socket({
    fd,
    readable: true,
    writable: false,
    onread: { buffer: Buffer.allocUnsafe(1 << 16), callback: (n, buf) => void onChunk(buf.subarray(0, n)) },
  })
}

function serve() {
  process.argv.splice(1) // the marker is the host's business, as `node -e` has no arguments
  patchStream(process.stdout, 0x6f)
  patchStream(process.stderr, 0x65)
  process.exit = function exit(code) {
    throw new KernelExit(code === undefined ? (process.exitCode ?? 0) : code)
  }
  process.on('SIGINT', () => {
    if (cell && cell.stop) cell.stop({ interrupted: true })
  })
  process.on('uncaughtException', onStray('Uncaught '))
  process.on('unhandledRejection', onStray('Uncaught (in promise) '))
  installGlobals(makeDisplay((data) => output(0x72, resultJson(data, false), false)))
  for (const [fd, kind] of rawFds) {
    reader(fd, (b) => output(kind, b, true)).on('error', () => {})
  }
  const control = reader(ctrlIn, onControl)
  control.on('end', () => realExit(0))
  control.on('error', () => realExit(0))
  if (typeof activeResources === 'function') ownHandles = activeResources().length
  send([0x52, ''])
}

serve()
