'use strict'
// Errors are told apart by code, never by message: every native error here is reworded before
// the library sees it (its `[ERR_…]` tag kept), and the classes, codes and hints still hold in the
// core, the e2b entry and the MCP server.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')

const repo = path.resolve(__dirname, '..')

// Installed before anything loads the binding: every error the native side throws or rejects with
// gets a message that shares no word with the original.
let reworded = 0
function reword(e) {
  if (!(e instanceof Error)) return e
  const tag = /^\[ERR_[A-Z_]+\] /.exec(e.message)
  e.message = `${tag ? tag[0] : ''}zzz ${++reworded}`
  return e
}
function guarded(f) {
  return function (...args) {
    let r
    try {
      r = f.apply(this, args)
    } catch (e) {
      throw reword(e)
    }
    return r instanceof Promise ? r.catch((e) => Promise.reject(reword(e))) : r
  }
}
const bindingPath = require.resolve(path.join(repo, 'binding.js'))
const binding = require(bindingPath)
const patched = { ...binding }
for (const [name, v] of Object.entries(binding)) {
  if (typeof v !== 'function') continue
  if (/^Native/.test(name)) {
    for (const key of Object.getOwnPropertyNames(v.prototype)) {
      const d = Object.getOwnPropertyDescriptor(v.prototype, key)
      if (key !== 'constructor' && typeof d.value === 'function') v.prototype[key] = guarded(d.value)
    }
    patched[name] = new Proxy(v, {
      construct(target, args) {
        try {
          return new target(...args)
        } catch (e) {
          throw reword(e)
        }
      },
    })
  } else {
    patched[name] = guarded(v)
  }
}
require.cache[bindingPath].exports = patched

const { kern, tmpDir } = require('./helpers.js')
const { CLASSES } = require('../lib/errors.js')
const e2b = require('../lib/e2b/entry.js')
const { SandboxError, MountRefused, Sandbox } = kern

const NO_NODE = { PATH: '/kst-no-such-dir' }

/** Asserts `e` is a `Class` with `code` and a reworded message. */
function coded(Class, code) {
  return (e) => {
    assert.ok(e instanceof Class, `${e && e.name}: ${e && e.message} is not a ${Class.name}`)
    assert.equal(e.code, code)
    return true
  }
}

function rewordedNative(e) {
  return /^zzz \d+$/.test(e.message)
}

test('every native code has a class in the one table', () => {
  const native = require(bindingPath).errorCodes()
  assert.ok(native.includes('ERR_NOT_FOUND') && native.includes('ERR_ABORTED'))
  for (const c of native) assert.ok(Object.hasOwn(CLASSES, c), `${c} is missing from lib/errors.js`)
  for (const c of Object.keys(CLASSES)) assert.ok(native.includes(c), `${c} is not a native code`)
})

test('core: classes and codes hold with every native message reworded', async (t) => {
  const before = reworded
  assert.throws(() => new Sandbox({ image: 'not an image' }), coded(SandboxError, 'ERR_INVALID_OPTION'))
  assert.throws(
    () => new Sandbox({ mounts: { '/kst-no-such-source': '/data' } }),
    (e) => coded(MountRefused, 'ERR_MOUNT_REFUSED')(e) && rewordedNative(e),
  )
  const sbx = new Sandbox()
  await assert.rejects(sbx.runCode('1'), (e) => coded(SandboxError, 'ERR_NOT_OPEN')(e) && rewordedNative(e))
  await sbx.open()
  t.after(() => sbx.close())
  await sbx.writeFile('big.txt', 'x'.repeat(100))
  await assert.rejects(sbx.readFile('missing.txt'), coded(SandboxError, 'ERR_NOT_FOUND'))
  await assert.rejects(sbx.readFile('../outside.txt'), coded(SandboxError, 'ERR_PATH_ESCAPES'))
  await assert.rejects(sbx.readFile('big.txt', { maxBytes: 10 }), coded(SandboxError, 'ERR_TOO_LARGE'))
  assert.throws(
    () => sbx.snapshot(path.join(tmpDir(), 's.tgz'), { maxBytes: 10 }),
    coded(SandboxError, 'ERR_TOO_LARGE'),
  )
  const noNode = await new Sandbox({ env: NO_NODE }).open()
  t.after(() => noNode.close())
  await assert.rejects(
    noNode.kernel({ language: 'js' }),
    (e) => coded(SandboxError, 'ERR_NO_NODE')(e) && rewordedNative(e),
  )
  const k = await sbx.kernel()
  await k.close()
  await assert.rejects(k.runCode('1'), coded(SandboxError, 'ERR_KERNEL_GONE'))
  const ac = new AbortController()
  const running = sbx.runCode('import time; time.sleep(30)', { signal: ac.signal })
  setTimeout(() => ac.abort(new Error('stop it')), 200)
  await assert.rejects(running, /stop it/)
  const closing = sbx.run(['sleep', '30'])
  setTimeout(() => sbx.close(), 200)
  await assert.rejects(closing, coded(SandboxError, 'ERR_CLOSED'))
  assert.ok(reworded > before, 'the native messages were reworded')
})

test('e2b: its classes come from codes too', async (t) => {
  const sbx = await e2b.Sandbox.create({ envs: NO_NODE })
  t.after(() => sbx.kill())
  await assert.rejects(sbx.files.read('missing.txt'), (e) => e instanceof e2b.NotFoundError && rewordedNative(e))
  // The no-node branch reads the code: its own message says what to do.
  await assert.rejects(
    sbx.runCode('1', { language: 'js' }),
    (e) => coded(e2b.SandboxError, 'ERR_NO_NODE')(e) && /contexts run on node/.test(e.message),
  )
})

test('mcp: hints are chosen by code', async (t) => {
  const from = { paths: [path.join(repo, 'mcp')] }
  const { Client } = require(require.resolve('@modelcontextprotocol/sdk/client/index.js', from))
  const { InMemoryTransport } = require(require.resolve('@modelcontextprotocol/sdk/inMemory.js', from))
  const { createServer } = require('../mcp/lib/server.js')
  const { loadConfig } = require('../mcp/lib/config.js')
  const { server, interpreter } = createServer(loadConfig([], {}), { log: () => {} })
  const [a, b] = InMemoryTransport.createLinkedPair()
  await server.connect(a)
  const client = new Client({ name: 'error-codes-test', version: '0.0.0' })
  await client.connect(b)
  t.after(async () => {
    await client.close()
    await interpreter.close()
  })
  const text = (r) => r.content.map((c) => c.text || '').join('\n')
  const call = (name, args) => client.callTool({ name, arguments: args })
  const escape = await call('read_file', { path: '../outside.txt' })
  assert.ok(escape.isError)
  assert.match(text(escape), /zzz \d+\. Paths are relative to the workspace/)
  await call('write_file', { path: 'big.bin', content: 'x'.repeat(5 * 1024 * 1024) })
  const big = await call('read_file', { path: 'big.bin' })
  assert.match(text(big), /zzz \d+\. Read a part of it with run_code/)
})
