'use strict'
// Machines under bad input and faults: floods stay bounded, stubborn processes still end, wrong
// arguments are clear SandboxErrors, a box that dies takes its pending calls with it, and many
// processes at once are all run and reaped.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { kern, openSandbox, openMachine, waitFor, procsMatching } = require('./helpers.js')

const { SandboxError } = kern
/** The host pid of the agent of machine `name`: below the kern process that runs `box <name>`. */
function agentOf(name) {
  const ppid = (pid) => {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1')
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
  }
  // kern's own processes carry the agent's path in their -v arguments: only the agent starts with it.
  const agents = procsMatching('/.kern-sandbox/agent').filter((x) => x.cmd.startsWith('/.kern-sandbox/agent '))
  for (const { pid } of agents) {
    for (let p = pid, i = 0; p > 1 && i < 32; i++) {
      try {
        p = ppid(p)
        if (fs.readFileSync(`/proc/${p}/cmdline`, 'latin1').split('\0').includes(name)) return pid
      } catch {
        break
      }
    }
  }
  return null
}

const coded = (code) => (e) => e instanceof SandboxError && e.code === code

async function machine(t, opts = {}) {
  const sbx = await openSandbox(t, opts)
  return openMachine(t, sbx)
}

test('a flood is bounded by maxOutputBytes and never blocks the machine', async (t) => {
  const m = await machine(t)
  const flood = await m.spawn(['sh', '-c', 'yes flood'], { maxOutputBytes: 1 << 20 })
  for (let i = 0; i < 5; i++) assert.equal((await m.exec(['echo', String(i)])).stdout, `${i}\n`)
  await flood.kill()
  const r = await flood.wait()
  assert.equal(r.stdout.length, 1 << 20)
  assert.equal(r.truncated, true)
  const capped = await m.exec('head -c 50000000 /dev/zero', { maxOutputBytes: 4096 })
  assert.equal(capped.stdout.length, 4096)
  assert.equal(capped.exitCode, 0)
})

test('a process that ignores SIGTERM survives kill("SIGTERM"), not SIGKILL or a deadline', async (t) => {
  const m = await machine(t)
  let out = ''
  const p = await m.spawn(['sh', '-c', "trap '' TERM; echo ready; while :; do sleep 0.1; done"], {
    onStdout: (c) => (out += c),
  })
  const keep = setInterval(() => {}, 1000) // output callbacks never hold Node's loop
  t.after(() => clearInterval(keep))
  await waitFor(() => out.includes('ready'), 10_000)
  assert.equal(await p.kill('SIGTERM'), true)
  await new Promise((r) => setTimeout(r, 300))
  assert.equal(p.exitCode, null, 'still running after SIGTERM')
  assert.equal(await p.kill(), true)
  assert.equal((await p.wait()).exitCode, 137)
  const r = await m.exec(['sh', '-c', "trap '' TERM INT; sleep 60"], { timeoutS: 0.5 })
  assert.equal(r.fault && r.fault.type, 'timeout')
})

test('wrong arguments are clear SandboxErrors and disturb nothing', async (t) => {
  const m = await machine(t)
  const cat = await m.spawn(['cat'], { stdin: true })
  await cat.end()
  await assert.rejects(cat.write('late'), (e) => e instanceof SandboxError)
  await cat.wait()
  await assert.rejects(m.exposePort(0), coded('ERR_INVALID_OPTION'))
  await assert.rejects(m.exposePort(65536), coded('ERR_INVALID_OPTION'))
  await assert.rejects(m.exposePort(1.5), coded('ERR_INVALID_OPTION'))
  const tty = await m.spawn(['sleep', '30'], { pty: { cols: 80, rows: 24 } })
  await assert.rejects(tty.resize({ cols: 0, rows: 24 }), coded('ERR_INVALID_OPTION'))
  await assert.rejects(tty.resize({ cols: 80, rows: -1 }), coded('ERR_INVALID_OPTION'))
  await assert.rejects(m.spawn(['sleep', '1'], { pty: { cols: 0, rows: 1 } }), coded('ERR_INVALID_OPTION'))
  await assert.rejects(tty.kill('SIGNOPE'), coded('ERR_INVALID_OPTION'))
  await tty.kill()
  await assert.rejects(m.exec('true', { env: { 'A=B': '1' } }), coded('ERR_INVALID_OPTION'))
  await assert.rejects(m.exec('true', { env: { A: 1 } }), coded('ERR_INVALID_OPTION'))
  await assert.rejects(m.exec('true', { user: '--root' }), coded('ERR_INVALID_OPTION'))
  await assert.rejects(m.readFile(''), coded('ERR_INVALID_OPTION'))
  await assert.rejects(m.readFile('/tmp/a\0b'), coded('ERR_INVALID_OPTION'))
  await assert.rejects(m.list('/tmp', { depth: 0 }), coded('ERR_INVALID_OPTION'))
  assert.equal((await m.exec('echo fine')).stdout, 'fine\n')
})

test('a machine whose box dies: alive turns false, pending calls reject naming the cause', async (t) => {
  const m = await machine(t)
  const p = await m.spawn(['sleep', '60'])
  const pending = m.exec(['sleep', '60'])
  // The agent is the box's PID 1: killed from the host (as an OOM kill would), the box ends.
  const agent = agentOf(m.name)
  assert.ok(agent, 'the agent runs on the host, below kern')
  process.kill(agent, 'SIGKILL')
  await assert.rejects(pending, (e) => coded('ERR_MACHINE_GONE')(e) && /gone/.test(e.message))
  await waitFor(() => !m.alive, 10_000)
  await assert.rejects(p.wait(), coded('ERR_MACHINE_GONE'))
  await assert.rejects(m.exec('true'), coded('ERR_MACHINE_GONE'))
  await m.close()
})

test('64 processes spawned at once all run and are all reaped', async (t) => {
  const m = await machine(t)
  const ps = await Promise.all(Array.from({ length: 64 }, (_, i) => m.spawn(['sh', '-c', `echo ${i}`])))
  const rs = await Promise.all(ps.map((p) => p.wait()))
  assert.deepEqual(
    rs.map((r) => r.stdout),
    rs.map((_, i) => `${i}\n`),
  )
  assert.ok(rs.every((r) => r.exitCode === 0))
  assert.deepEqual(await m.processes(), [])
  const zombies = await m.exec(
    'for s in /proc/[0-9]*/stat; do cut -d" " -f3 "$s" 2>/dev/null; done | grep -c Z || true',
  )
  assert.equal(zombies.stdout.trim(), '0')
})

test('user: a user of the image runs with its HOME and USER', async (t) => {
  const m = await machine(t)
  const r = await m.exec('echo $HOME $USER', { user: 'root' })
  assert.equal(r.stdout, '/root root\n')
  await assert.rejects(m.exec('true', { user: 'no-such-user' }), (e) => e instanceof SandboxError)
})
