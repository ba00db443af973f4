'use strict'
// Machine and process options at their edges: each refused value is an ERR_INVALID_OPTION (a
// TypeError where JS checks a JS type) whose message names the option, worded as it always was;
// the values at the edge of what is accepted still work.

const test = require('node:test')
const assert = require('node:assert/strict')
const { kern, openSandbox, openMachine } = require('./helpers.js')

const { SandboxError } = kern

/** `p` rejects with an ERR_INVALID_OPTION whose message is `message` (a string: exactly). */
async function refused(p, message) {
  await assert.rejects(p, (e) => {
    assert.ok(e instanceof SandboxError, `a SandboxError, got ${e}`)
    assert.equal(e.code, 'ERR_INVALID_OPTION', e.message)
    if (typeof message === 'string') assert.equal(e.message, message)
    else assert.match(e.message, message)
    return true
  })
}

let shared
/** One machine for the whole file: option checks never disturb it. */
async function machine() {
  if (!shared) {
    const sbx = new kern.Sandbox()
    await sbx.open()
    shared = { sbx, m: await sbx.machine() }
  }
  return shared.m
}
test.after(async () => {
  if (shared) {
    await shared.m.close()
    await shared.sbx.close()
  }
})

test('machine(): image, ports and timeoutS are refused by name before a box starts', async (t) => {
  const sbx = await openSandbox(t)
  await refused(sbx.machine({ image: 5 }), 'image must be a string, got 5')
  await refused(sbx.machine({ image: ['python'] }), 'image must be a string, got an array')
  await refused(sbx.machine({ image: '--evil' }), /^invalid option image: /)
  await refused(sbx.machine({ image: 'a b' }), /^invalid option image: .*got "a b"$/)
  await refused(sbx.machine({ ports: 'x' }), 'ports must be an array of port numbers')
  await refused(sbx.machine({ ports: { 0: 80 } }), 'ports must be an array of port numbers')
  await refused(sbx.machine({ ports: [0] }), 'port must be an integer from 1 to 65535, got 0')
  await refused(sbx.machine({ ports: [80, 65536] }), 'port must be an integer from 1 to 65535, got 65536')
  await refused(sbx.machine({ ports: ['80'] }), 'port must be an integer from 1 to 65535, got "80"')
  await refused(sbx.machine({ ports: [80.5] }), 'port must be an integer from 1 to 65535, got 80.5')
  await refused(sbx.machine({ ports: [NaN] }), 'port must be an integer from 1 to 65535, got NaN')
  await refused(sbx.machine({ ports: [null] }), 'port must be an integer from 1 to 65535, got null')
  for (const v of [0, -1, NaN, '5', true, -Infinity]) {
    await refused(sbx.machine({ timeoutS: v }), 'timeoutS must be a positive number')
  }
  await refused(sbx.machine({ timeoutS: Infinity }), /^invalid option timeoutS: /)
  await refused(sbx.machine({ timeoutS: 400 * 86400 }), /^invalid option timeoutS: /)
  await assert.rejects(sbx.machine(5), (e) => e instanceof TypeError && /machine options/.test(e.message))
  await assert.rejects(sbx.machine([]), (e) => e instanceof TypeError && /machine options/.test(e.message))
})

test('machine(): null options are absent, and the ports asked for are exposed', async (t) => {
  const sbx = await openSandbox(t)
  const m = await openMachine(t, sbx, { image: null, ports: null, timeoutS: null })
  assert.equal((await m.exec('echo ok')).stdout, 'ok\n')
})

test('exec/spawn env: an object of strings, each a variable the agent can set', async () => {
  const m = await machine()
  for (const env of ['x', 5, ['A=1'], () => {}]) {
    await refused(m.exec('true', { env }), 'env must be an object')
    await refused(m.spawn('true', { env }), 'env must be an object')
  }
  await refused(m.exec('true', { env: { A: 1 } }), 'env.A must be a string, got 1')
  await refused(m.exec('true', { env: { OK: 'x', B: null } }), 'env.B must be a string, got null')
  await refused(m.exec('true', { env: { C: {} } }), 'env.C must be a string, got an object')
  await refused(m.exec('true', { env: { D: 2n } }), 'env.D must be a string, got 2n')
  await refused(m.exec('true', { env: { E: Symbol('x') } }), 'env.E must be a string, got symbol')
  // The first refused entry in Object.entries order: integer-like keys first.
  await refused(m.exec('true', { env: { b: 'x', 2: 5, a: 1 } }), 'env.2 must be a string, got 5')
  const invalid = (k) =>
    `env: ${JSON.stringify(k)} is not a valid variable (a name without '=' or NUL, a value without NUL)`
  await refused(m.exec('true', { env: { 'A=B': '1' } }), invalid('A=B'))
  await refused(m.spawn('true', { env: { 'A=B': '1' } }), invalid('A=B'))
  await refused(m.exec('true', { env: { '': '1' } }), invalid(''))
  await refused(m.exec('true', { env: { 'A\0B': '1' } }), /^env: "A\\0B" is not a valid variable/)
  await refused(m.exec('true', { env: { A: 'x\0y' } }), invalid('A'))
  // '=' in a value, a symbol key (skipped, as Object.entries skips it) and null: all fine.
  const r = await m.exec('echo "$A|$B"', { env: { A: 'b=c', B: '', [Symbol('s')]: 1 } })
  assert.equal(r.stdout, 'b=c|\n')
  assert.equal((await m.exec('echo ok', { env: null })).stdout, 'ok\n')
})

test('exec/spawn timeoutS and maxOutputBytes: positive numbers', async () => {
  const m = await machine()
  for (const v of [0, -1, NaN, '5', true, {}]) {
    await refused(m.exec('true', { timeoutS: v }), 'timeoutS must be a positive number')
    await refused(m.spawn('true', { timeoutS: v }), 'timeoutS must be a positive number')
    await refused(m.exec('true', { maxOutputBytes: v }), 'maxOutputBytes must be a positive number')
    await refused(m.spawn('true', { maxOutputBytes: v }), 'maxOutputBytes must be a positive number')
  }
  await refused(m.exec('true', { timeoutS: Infinity }), /^invalid option timeoutS: /)
  await refused(m.exec('true', { maxOutputBytes: 0.5 }), 'maxOutputBytes must be positive')
  await refused(m.exec('true', { maxOutputBytes: Infinity }), 'maxOutputBytes must be positive')
  const r = await m.exec('printf 12345', { maxOutputBytes: 3.9, timeoutS: 1e-3 + 30 })
  assert.equal(r.stdout, '123')
})

test('exec/spawn user and cwd: a user name, a path string', async () => {
  const m = await machine()
  await refused(m.exec('true', { user: 0 }), 'user must be a string, got 0')
  await refused(m.spawn('true', { user: ['root'] }), 'user must be a string, got an array')
  await refused(m.exec('true', { user: '--root' }), 'user: "--root" is not a user name or uid')
  await refused(m.exec('true', { user: '' }), 'user: "" is not a user name or uid')
  await refused(m.exec('true', { user: 'a b' }), 'user: "a b" is not a user name or uid')
  await assert.rejects(m.exec('true', { cwd: 5 }), (e) => e instanceof TypeError && /cwd/.test(e.message))
  await assert.rejects(m.spawn('true', { cwd: {} }), (e) => e instanceof TypeError && /cwd/.test(e.message))
  await refused(m.exec('true', { cwd: '' }), /machine path/)
  await refused(m.exec('true', { cwd: '/tmp/a\0b' }), /machine path/)
  assert.equal((await m.exec('pwd', { cwd: '/tmp', user: null })).stdout, '/tmp\n')
})

test('exec stdin: a string or bytes of any view; spawn stdin: only true keeps it open', async () => {
  const m = await machine()
  for (const stdin of [5, {}, true, new ArrayBuffer(2), [1, 2]]) {
    await refused(m.exec('cat', { stdin }), 'stdin must be a string or a Buffer')
  }
  const bytes = new Uint8Array([0x68, 0x69, 0x21, 0x21])
  for (const stdin of ['hi!!', Buffer.from('hi!!'), bytes, new DataView(bytes.buffer), new Uint16Array(bytes.buffer)]) {
    assert.equal((await m.exec('cat', { stdin })).stdout, 'hi!!', String(stdin))
  }
  const sliced = new Uint8Array(bytes.buffer, 1, 2)
  assert.equal((await m.exec('cat', { stdin: sliced })).stdout, 'i!')
  assert.equal((await m.exec('cat', { stdin: 'é\u{1F600}' })).stdout, 'é\u{1F600}')
  const closed = await m.spawn(['sleep', '30'], { stdin: 'yes' })
  await assert.rejects(closed.write('x'), (e) => e.code === 'ERR_STDIN_CLOSED')
  await closed.kill()
})

test('spawn pty and resize(): { cols, rows } of whole positive numbers a terminal has', async () => {
  const m = await machine()
  const shape = 'pty must be { cols, rows } with whole numbers'
  for (const pty of [
    5,
    'x',
    [],
    { cols: 80 },
    { cols: 1.5, rows: 2 },
    { cols: '80', rows: 24 },
    { cols: NaN, rows: 1 },
  ]) {
    await refused(m.spawn(['true'], { pty }), shape)
  }
  await refused(m.spawn(['true'], { pty: { cols: 0, rows: 1 } }), 'pty cols and rows must be positive')
  await refused(m.spawn(['true'], { pty: { cols: 80, rows: -24 } }), 'pty cols and rows must be positive')
  await refused(
    m.spawn(['true'], { pty: { cols: 65536, rows: 1 } }),
    'pty cols must be a positive whole number up to 65535',
  )
  await refused(
    m.spawn(['true'], { pty: { cols: 1, rows: 2 ** 32 + 1 } }),
    'pty rows must be a positive whole number up to 65535',
  )
  // exec has no terminal: its pty option is not read.
  assert.equal((await m.exec('echo ok', { pty: 5 })).stdout, 'ok\n')
  const tty = await m.spawn(['sleep', '30'], { pty: { cols: 80, rows: 24 } })
  await refused(tty.resize(), 'resize needs { cols, rows }')
  await refused(tty.resize(null), 'resize needs { cols, rows }')
  await refused(tty.resize(5), shape)
  await refused(tty.resize({ cols: 10 }), shape)
  await refused(tty.resize({ cols: 10, rows: 0 }), 'pty cols and rows must be positive')
  await tty.resize({ cols: 65535, rows: 1 })
  await tty.kill()
})

test('kill(): a signal name in any case or a number from 1 to 64', async () => {
  const m = await machine()
  const p = await m.spawn(['sleep', '30'])
  await refused(p.kill('SIGNOPE'), 'unknown signal "SIGNOPE"')
  await refused(p.kill('TERM'), 'unknown signal "TERM"')
  await refused(p.kill(''), 'unknown signal ""')
  await refused(p.kill(1.5), 'unknown signal 1.5')
  await refused(p.kill(NaN), 'unknown signal NaN')
  await refused(p.kill({}), 'unknown signal an object')
  await refused(p.kill(true), 'unknown signal true')
  await refused(p.kill(null), 'unknown signal null')
  await refused(p.kill('x'.repeat(70)), `unknown signal "${'x'.repeat(60)}..."`)
  await refused(p.kill(0), '0 is not a signal number')
  await refused(p.kill(65), '65 is not a signal number')
  await refused(p.kill(-9), '-9 is not a signal number')
  await refused(p.kill(2 ** 32 + 9), '4294967305 is not a signal number')
  assert.equal(p.exitCode, null, 'no refused signal reached the process')
  assert.equal(await p.kill('sigterm'), true)
  assert.equal((await p.wait()).exitCode, 143)
  const q = await m.spawn(['sleep', '30'])
  assert.equal(await q.kill(undefined), true)
  assert.equal((await q.wait()).exitCode, 137)
})

test('readFile maxBytes, writeFile mode, list depth, exposePort and kernel timeoutS', async () => {
  const m = await machine()
  await m.writeFile('/tmp/opts.txt', 'abc')
  for (const maxBytes of [0, -1, NaN, '5']) {
    await refused(m.readFile('/tmp/opts.txt', { maxBytes }), 'maxBytes must be a positive number')
  }
  await refused(m.readFile('/tmp/opts.txt', { maxBytes: Infinity }), 'maxBytes must be a non-negative number of bytes')
  assert.equal(String(await m.readFile('/tmp/opts.txt', { maxBytes: null })), 'abc')
  for (const mode of [-1, 1.5, '644', NaN, true]) {
    await refused(m.writeFile('/tmp/opts.txt', 'x', { mode }), 'mode must be a non-negative integer')
  }
  await refused(m.writeFile('/tmp/opts.txt', 'x', { mode: 0o10000 }), 'mode must be permission bits (at most 0o7777)')
  await refused(m.writeFile('/tmp/opts.txt', 'x', { mode: 2 ** 32 }), 'mode must be permission bits (at most 0o7777)')
  await m.writeFile('/tmp/opts.txt', 'x', { mode: 0o600 })
  assert.equal((await m.stat('/tmp/opts.txt')).mode & 0o777, 0o600)
  for (const depth of [0, -1, 1.5, '2', NaN]) {
    await refused(m.list('/tmp', { depth }), 'depth must be an integer >= 1')
  }
  assert.ok(Array.isArray(await m.list('/tmp', { depth: null })))
  for (const [port, shown] of [
    ['80', '"80"'],
    [undefined, 'undefined'],
    [0, '0'],
    [-1, '-1'],
    [65536, '65536'],
    [1.5, '1.5'],
    [1e21, '1e+21'],
  ]) {
    await refused(m.exposePort(port), `port must be an integer from 1 to 65535, got ${shown}`)
  }
  for (const timeoutS of [0, -1, NaN, 'x']) {
    await refused(m.kernel({ timeoutS }), 'timeoutS must be a positive number')
  }
})
