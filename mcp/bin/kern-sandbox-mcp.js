#!/usr/bin/env node
'use strict'
// `npx kern-sandbox-mcp`: the stdio MCP server. stdout carries the protocol only; everything the
// server has to say to a person goes to stderr.

const { loadConfig, helpText, ConfigError } = require('../lib/config.js')
const { version } = require('../package.json')

async function main() {
  let config
  try {
    config = loadConfig(process.argv.slice(2), process.env)
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e
    process.stderr.write(`kern-sandbox-mcp: ${e.message}\n`)
    process.exit(2)
  }
  if (config.help) {
    process.stdout.write(helpText(version))
    return
  }
  // kern-sandbox finds kern through KERN_BIN when a Sandbox is made.
  if (config.kernBin) process.env.KERN_BIN = config.kernBin
  const { StdioServerTransport } = require('@modelcontextprotocol/sdk/server/stdio.js')
  const { createServer } = require('../lib/server.js')
  const { server, interpreter } = createServer(config)

  let closing = null
  const shutdown = () => {
    closing ??= interpreter
      .close()
      .catch((e) => process.stderr.write(`kern-sandbox-mcp: while closing: ${e.message}\n`))
      .finally(() => process.exit(0))
    return closing
  }
  process.on('SIGINT', shutdown)
  process.on('SIGTERM', shutdown)
  // A failure we did not foresee is logged, never fatal: the next request is still served.
  process.on('unhandledRejection', (e) =>
    process.stderr.write(`kern-sandbox-mcp: unhandled: ${e && e.stack ? e.stack : e}\n`),
  )
  const transport = new StdioServerTransport()
  transport.onclose = shutdown
  process.stdin.on('end', shutdown)
  await server.connect(transport)
}

main().catch((e) => {
  process.stderr.write(`kern-sandbox-mcp: ${e && e.stack ? e.stack : e}\n`)
  process.exit(1)
})
