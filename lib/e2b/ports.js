'use strict'
// getHost(port): E2B returns a host name at once, so the host port must be known before anything
// can be awaited. Each sandbox port asked for gets a listener on 127.0.0.1 (bound synchronously by
// the native side) that forwards every connection to the machine's port, exposed through
// `machine.exposePort()` on first use.

const net = require('node:net')
const { bindLoopback } = require('../native.js')
const { InvalidArgumentError } = require('./errors.js')

/** How long a refused connection waits for the client's first bytes before it is reset. */
const REFUSE_GRACE_MS = 100

/** Nothing listens on the sandbox's port (yet): a reset, as a closed port gives. Sent once the
 * client has written (or after a short grace): a reset that lands before Node's fetch has written
 * its request leaves that fetch pending for ever. */
function refuse(socket) {
  const reset = () => {
    clearTimeout(timer)
    socket.resetAndDestroy()
  }
  const timer = setTimeout(reset, REFUSE_GRACE_MS)
  socket.once('data', reset)
  socket.resume()
}

class HostPorts {
  #machine
  /** sandbox port → { server, port, exposed: Promise<ExposedPort> | null } */
  #ports = new Map()
  #closed = false

  constructor(machine) {
    this.#machine = machine
  }

  /** `127.0.0.1:<host port>` reaching `port` in the sandbox. */
  host(port) {
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      throw new InvalidArgumentError(`port must be an integer from 1 to 65535, got ${String(port)}`)
    }
    let p = this.#ports.get(port)
    if (!p) {
      if (this.#closed) throw new InvalidArgumentError('the sandbox was killed: it exposes no ports any more')
      p = this.#listen(port)
      this.#ports.set(port, p)
    }
    return `127.0.0.1:${p.port}`
  }

  #listen(port) {
    const { fd, port: hostPort } = bindLoopback()
    const entry = { port: hostPort, exposed: null, sockets: new Set() }
    entry.server = net.createServer({ pauseOnConnect: true }, (socket) => this.#forward(entry, port, socket))
    entry.server.on('error', () => {}) // a failed accept ends that connection only
    entry.server.listen({ fd })
    entry.server.unref() // a forwarder never keeps Node alive
    return entry
  }

  async #forward(entry, port, socket) {
    entry.sockets.add(socket)
    socket.on('close', () => entry.sockets.delete(socket))
    socket.on('error', () => {})
    try {
      entry.exposed ??= this.#machine.exposePort(port)
      const { port: to } = await entry.exposed
      const peer = net.connect(to, '127.0.0.1')
      entry.sockets.add(peer)
      peer.on('close', () => entry.sockets.delete(peer))
      peer.on('error', () => refuse(socket))
      socket.on('error', () => peer.destroy())
      peer.once('connect', () => {
        socket.pipe(peer).pipe(socket)
        socket.resume()
      })
    } catch {
      entry.exposed = null // the next connection tries again
      refuse(socket)
    }
  }

  /** Stops every listener and forwarded connection. */
  async close() {
    this.#closed = true
    const all = [...this.#ports.values()]
    this.#ports.clear()
    await Promise.all(
      all.map((e) => {
        for (const s of e.sockets) s.destroy()
        return new Promise((resolve) => e.server.close(() => resolve()))
      }),
    )
  }
}

module.exports = { HostPorts }
