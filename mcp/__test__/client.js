'use strict'
// Drives the server as a client does: the SDK's own Client over StdioClientTransport, against
// `bin/kern-sandbox-mcp.js` as a child process, on the suite's kern (the stand-in unless KERN_BIN
// names a real kern; see __test__/helpers.js).

const path = require('node:path')
const { Client } = require('@modelcontextprotocol/sdk/client/index.js')
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js')
const helpers = require('../../__test__/helpers.js')

const pkgDir = path.resolve(__dirname, '..')
const bin = path.join(pkgDir, 'bin', 'kern-sandbox-mcp.js')

/** Starts the server with `env` over ours (KERN_MCP_* of the caller's environment dropped) and
 * `args`; resolves to { client, stderr(), close() }. */
async function connect({ env = {}, args = [], command = process.execPath, commandArgs = [bin], cwd } = {}) {
  const base = {}
  // The caller's knobs and the loader override stay out: the server sees only what the test sets.
  for (const [k, v] of Object.entries(process.env))
    if (!k.startsWith('KERN_MCP_') && k !== 'NAPI_RS_NATIVE_LIBRARY_PATH') base[k] = v
  const transport = new StdioClientTransport({
    command,
    args: [...commandArgs, ...args],
    env: { ...base, KERN_BIN: helpers.kernBin, ...env },
    stderr: 'pipe',
    cwd,
  })
  let stderr = ''
  transport.stderr.on('data', (c) => (stderr += c))
  const client = new Client({ name: 'kern-sandbox-mcp-test', version: '0.0.0' })
  await client.connect(transport)
  return { client, transport, stderr: () => stderr, close: () => client.close() }
}

/** All text blocks of a tool result, joined. */
function textOf(result) {
  return result.content
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n')
}

/** Calls run_code; `opts` are the SDK's request options (onprogress, signal, timeout). */
function run(client, code, args = {}, opts = {}) {
  return client.callTool({ name: 'run_code', arguments: { code, ...args } }, undefined, { timeout: 120_000, ...opts })
}

module.exports = { connect, textOf, run, bin, pkgDir, helpers }
