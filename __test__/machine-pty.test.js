'use strict'
// Terminals in a machine, driven through a real terminal emulator (@xterm/headless): an
// interactive shell, the Python REPL, vi and top behave as they do in a terminal.

const test = require('node:test')
const assert = require('node:assert/strict')
const { Terminal } = require('@xterm/headless')
const { openSandbox, openMachine, waitFor } = require('./helpers.js')

/** A PTY process with an emulated screen: what it draws, as rows of text. */
async function terminal(t, m, command, { cols = 100, rows = 30 } = {}) {
  const term = new Terminal({ cols, rows, allowProposedApi: true })
  let pending = Promise.resolve()
  const p = await m.spawn(command, {
    pty: { cols, rows },
    onData: (d) => {
      pending = pending.then(() => new Promise((r) => term.write(d, r)))
    },
  })
  t.after(() => p.kill().catch(() => {}))
  // Output callbacks never keep Node alive; the test's waits hold the loop with a timer.
  const keep = setInterval(() => {}, 1000)
  t.after(() => clearInterval(keep))
  const screen = () => {
    const b = term.buffer.active
    const lines = []
    for (let i = 0; i < term.rows; i++) lines.push(b.getLine(b.viewportY + i)?.translateToString(true) ?? '')
    return lines.join('\n')
  }
  const shows = async (re, what) => {
    await waitFor(async () => {
      await pending
      return re.test(screen())
    }, 15_000).catch(() => assert.fail(`${what}: ${re} never showed; the screen:\n${screen()}`))
  }
  const resize = async (c, r) => {
    term.resize(c, r)
    await p.resize({ cols: c, rows: r })
  }
  return { p, term, screen, shows, type: (s) => p.write(s), resize }
}

test('an interactive shell: prompt, commands, the window size and its changes', async (t) => {
  const sbx = await openSandbox(t)
  const m = await openMachine(t, sbx)
  const sh = await terminal(t, m, ['bash', '-i'])
  await sh.type('echo $TERM $((6 * 7))\r')
  await sh.shows(/xterm-256color 42/, 'echo')
  await sh.type('stty size\r')
  await sh.shows(/30 100/, 'stty size')
  await sh.resize(120, 40)
  await sh.type('stty size\r')
  await sh.shows(/40 120/, 'stty size after resize')
  await sh.type('exit 3\r')
  assert.equal((await sh.p.wait()).exitCode, 3)
})

test('the Python REPL: a prompt, an expression, a KeyboardInterrupt from ^C, exit()', async (t) => {
  const sbx = await openSandbox(t)
  const m = await openMachine(t, sbx)
  const py = await terminal(t, m, ['python3'])
  await py.shows(/>>> $/m, 'the prompt')
  await py.type('import shutil; print(6 * 7, shutil.get_terminal_size())\r')
  await py.shows(/42 os\.terminal_size\(columns=100, lines=30\)/, 'the result')
  await py.type('while True: pass\r\r')
  await new Promise((r) => setTimeout(r, 300))
  await py.type('\x03')
  await py.shows(/KeyboardInterrupt/, '^C')
  await py.type('exit()\r')
  assert.equal((await py.p.wait()).exitCode, 0)
})

test('vi edits a file through the terminal', async (t) => {
  const sbx = await openSandbox(t)
  const m = await openMachine(t, sbx)
  // Debian's slim images carry no vi (the stand-in's box has the host's).
  if ((await m.exec(['sh', '-c', 'command -v vi'])).exitCode !== 0) return t.skip('the image has no vi')
  const vi = await terminal(t, m, ['vi', '/tmp/edited.txt'])
  await vi.shows(/~/, 'the empty buffer')
  await vi.type('ihello from vi\x1b')
  await vi.shows(/hello from vi/, 'the typed text')
  await vi.type(':wq\r')
  assert.equal((await vi.p.wait()).exitCode, 0)
  assert.equal((await m.readFile('/tmp/edited.txt')).toString(), 'hello from vi\n')
})

test('top draws its process table and quits on q', async (t) => {
  const sbx = await openSandbox(t)
  const m = await openMachine(t, sbx)
  const top = await terminal(t, m, ['top'])
  await top.shows(/PID\s+USER/, 'the header')
  await top.type('q')
  assert.equal((await top.p.wait()).exitCode, 0)
})
