'use strict'
// Pausing a machine (Machine#pause/resume: its box frozen, calls refused meanwhile) and its
// lifetime (lifetimeS, onTimeout, setTimeout, endsAt), on whichever kern the suite drives.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const http = require('node:http')
const { kern, openSandbox, openMachine, waitFor, procsMatching, rand } = require('./helpers.js')

const { SandboxError } = kern

const coded = (code, re) => (e) => e instanceof SandboxError && e.code === code && (!re || re.test(e.message))
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** GET `url`: the status code, or 'no answer' if none came within `ms`. */
function get(url, ms) {
  return new Promise((resolve) => {
    const req = http.get(url, { timeout: ms }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode))
    })
    req.on('timeout', () => {
      req.destroy()
      resolve('no answer')
    })
    req.on('error', (e) => resolve(`error ${e.code}`))
  })
}

/** CPU ticks (utime + stime) of host process `pid`, or null once it is gone. */
function cpuTicks(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1')
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return Number(f[11]) + Number(f[12])
  } catch {
    return null
  }
}

const COUNTER = (file) => `
import os, sys, time
i = 0
while True:
    i += 1
    with open(${JSON.stringify(file)} + '.tmp', 'w') as f:
        f.write('%d %d' % (os.getpid(), i))
    os.replace(${JSON.stringify(file)} + '.tmp', ${JSON.stringify(file)})
    time.sleep(0.02)
`

test('pause freezes the box (counter stops, no CPU, port answers nothing); resume continues it as it was', async (t) => {
  const sbx = await openSandbox(t)
  const m = await openMachine(t, sbx)
  const marker = `kst-pause-${rand()}`
  const countFile = path.join(sbx.workspacePath, 'count')
  const readCount = () => {
    try {
      const [pid, n] = fs.readFileSync(countFile, 'utf8').split(' ').map(Number)
      return { pid, n }
    } catch {
      return null
    }
  }
  const server = await m.spawn(['python3', '-m', 'http.server', '8000', '--bind', '127.0.0.1', '-d', '/tmp'])
  const counter = await m.spawn(['python3', '-c', COUNTER(`${m.workdir}/count`), marker])
  const { url } = await m.exposePort(8000)
  assert.equal(await waitFor(async () => (await get(url, 2000)) === 200, 30_000), true, 'the server answers')
  assert.ok(await waitFor(() => (readCount() || { n: 0 }).n > 5, 30_000), 'the counter counts')
  const [host] = procsMatching(marker)
  assert.ok(host, 'the counter is found on the host')

  assert.equal(m.paused, false)
  await m.pause()
  assert.equal(m.paused, true)
  await m.pause() // idempotent
  const frozen = readCount()
  const ticks = cpuTicks(host.pid)
  await sleep(1000)
  assert.deepEqual(readCount(), frozen, 'the counter stopped')
  assert.equal(cpuTicks(host.pid), ticks, 'no CPU while paused')
  assert.equal(await get(url, 1000), 'no answer', 'the exposed port answers nothing while paused')

  await assert.rejects(m.exec('true'), coded('ERR_MACHINE_PAUSED', /resume\(\) it first/))
  await assert.rejects(m.spawn(['true']), coded('ERR_MACHINE_PAUSED'))
  await assert.rejects(m.readFile('/etc/hostname'), coded('ERR_MACHINE_PAUSED'))
  await assert.rejects(m.writeFile('x', 'y'), coded('ERR_MACHINE_PAUSED'))
  await assert.rejects(m.exposePort(9000), coded('ERR_MACHINE_PAUSED'))
  await assert.rejects(m.metrics(), coded('ERR_MACHINE_PAUSED'))
  await assert.rejects(counter.kill('SIGTERM'), coded('ERR_MACHINE_PAUSED'))
  assert.deepEqual(
    (await m.processes()).map((p) => p.pid).sort(),
    [server.pid, counter.pid].sort(),
    'processes() is read on the host and still works',
  )

  await m.resume()
  assert.equal(m.paused, false)
  await m.resume() // idempotent
  assert.ok(
    await waitFor(() => (readCount() || { n: 0 }).n > frozen.n, 30_000),
    'the counter continues from where it stopped',
  )
  const after = readCount()
  assert.equal(after.pid, frozen.pid, 'the same process (same pid in the box)')
  assert.ok(
    procsMatching(marker).some((p) => p.pid === host.pid),
    'the same process on the host',
  )
  assert.equal(await get(url, 5000), 200, 'the server answers again')
  assert.equal(counter.exitCode, null)
  assert.equal((await m.exec('echo back')).stdout, 'back\n')
})

test('a shell on a terminal does not see its foreground job stopped', async (t) => {
  const sbx = await openSandbox(t)
  const m = await openMachine(t, sbx)
  const marker = `${Math.floor(Math.random() * 900) + 100}`
  let screen = ''
  const sh = await m.spawn(['bash', '--norc', '-i'], { pty: { cols: 100, rows: 30 }, onData: (d) => (screen += d) })
  await sh.write(`sleep 3.${marker}; echo fin-$((6*7))\n`)
  assert.ok(await waitFor(() => procsMatching(`3.${marker}`).length > 0, 20_000), 'the job runs')
  // Several cycles: a stop that reached the job before its shell would show as "Stopped".
  for (let i = 0; i < 5; i++) {
    await m.pause()
    await sleep(100)
    await m.resume()
    await sleep(50)
  }
  assert.ok(await waitFor(() => screen.includes('fin-42'), 30_000), `the job finished: ${JSON.stringify(screen)}`)
  assert.doesNotMatch(screen, /Stopped/)
  await sh.write('exit\n')
  await sh.wait()
})

test('a kernel in a paused machine refuses cells and keeps its state for after resume', async (t) => {
  const sbx = await openSandbox(t)
  const m = await openMachine(t, sbx)
  const k = await m.kernel({ language: 'python' })
  t.after(() => k.close())
  await k.runCode('x = 41')
  await m.pause()
  await assert.rejects(k.runCode('x'), coded('ERR_MACHINE_PAUSED'))
  await assert.rejects(m.kernel(), coded('ERR_MACHINE_PAUSED'))
  await m.resume()
  const r = await k.runCode('print(x + 1)')
  assert.equal(r.stdout, '42\n')
})

test('close() of a paused machine thaws it and leaves no process behind', async (t) => {
  const sbx = await openSandbox(t)
  const m = await sbx.machine()
  const marker = `kst-paused-close-${rand()}`
  await m.spawn(['sh', '-c', `sleep 1000; echo ${marker}`])
  await m.spawn(['python3', '-c', 'import time; time.sleep(1000)', marker])
  assert.ok(await waitFor(() => procsMatching(marker).length === 2, 20_000))
  await m.pause()
  await m.close()
  assert.equal(m.alive, false)
  assert.deepEqual(await waitFor(() => procsMatching(marker).length === 0, 10_000), true, 'nothing is left')
  await assert.rejects(m.pause(), coded('ERR_MACHINE_GONE'))
  await assert.rejects(m.resume(), coded('ERR_MACHINE_GONE'))
  await assert.rejects(m.setTimeout(10), coded('ERR_MACHINE_GONE'))
})

test('lifetimeS closes the machine; endsAt says when', async (t) => {
  const sbx = await openSandbox(t)
  const m = await openMachine(t, sbx, { lifetimeS: 1 })
  assert.ok(m.endsAt instanceof Date)
  assert.ok(m.endsAt.getTime() > Date.now() - 1000 && m.endsAt.getTime() <= Date.now() + 1500)
  assert.equal(await waitFor(() => !m.alive, 30_000), true, 'closed by its lifetime')
  await assert.rejects(m.exec('true'), coded('ERR_MACHINE_GONE'))
})

test("onTimeout: 'pause' pauses the machine; resume() re-arms the whole lifetime", async (t) => {
  const sbx = await openSandbox(t)
  const m = await openMachine(t, sbx, { lifetimeS: 1, onTimeout: 'pause' })
  await m.exec('echo 1 > /tmp/kept')
  assert.equal(await waitFor(() => m.paused, 30_000), true, 'paused by its lifetime')
  assert.equal(m.alive, true)
  assert.equal(m.endsAt, null, 'no end while paused')
  await assert.rejects(m.exec('true'), coded('ERR_MACHINE_PAUSED'))
  await m.resume()
  assert.ok(m.endsAt instanceof Date)
  assert.ok(m.endsAt.getTime() > Date.now() - 1000, 'a new lifetime from the resume')
  assert.equal((await m.exec('cat /tmp/kept')).stdout, '1\n')
  assert.equal(await waitFor(() => m.paused, 30_000), true, 'and pauses again at its end')
  await m.close()
})

test('setTimeout moves the end; a machine without a lifetime gets one', async (t) => {
  const sbx = await openSandbox(t)
  const m = await openMachine(t, sbx, { lifetimeS: 2 })
  await m.setTimeout(600)
  assert.ok(m.endsAt.getTime() > Date.now() + 500_000, 'ten minutes from now')
  await sleep(3000)
  assert.equal(m.alive, true, 'not closed at the first lifetime')
  const n = await openMachine(t, sbx)
  assert.equal(n.endsAt, null, 'no lifetime by default')
  await n.setTimeout(1)
  assert.ok(n.endsAt instanceof Date)
  assert.equal(await waitFor(() => !n.alive, 30_000), true, 'closed at the lifetime setTimeout gave it')
})

test('the lifetime clock stops while paused; setTimeout on a paused machine counts from resume', async (t) => {
  const sbx = await openSandbox(t)
  const m = await openMachine(t, sbx, { lifetimeS: 2 })
  await m.pause()
  assert.equal(m.endsAt, null)
  await sleep(3000)
  assert.equal(m.alive, true, 'still there after its lifetime: the clock was stopped')
  assert.equal(m.paused, true)
  await m.setTimeout(300)
  assert.equal(m.endsAt, null)
  await m.resume()
  const left = m.endsAt.getTime() - Date.now()
  assert.ok(left > 200_000 && left <= 300_000, `${left} ms left`)
  await m.setTimeout(1)
  assert.equal(await waitFor(() => !m.alive, 30_000), true)
})

test('bad lifetime options and setTimeout values are ERR_INVALID_OPTION naming the option', async (t) => {
  const sbx = await openSandbox(t)
  for (const lifetimeS of [0, -1, 'x', Infinity, 1e9]) {
    await assert.rejects(sbx.machine({ lifetimeS }), coded('ERR_INVALID_OPTION', /lifetimeS/))
  }
  for (const onTimeout of ['explode', 1, true]) {
    await assert.rejects(sbx.machine({ lifetimeS: 5, onTimeout }), coded('ERR_INVALID_OPTION', /onTimeout/))
  }
  const m = await openMachine(t, sbx)
  for (const s of [0, -5, 'soon', NaN]) {
    await assert.rejects(m.setTimeout(s), coded('ERR_INVALID_OPTION', /seconds/))
  }
  assert.equal(m.endsAt, null)
})
