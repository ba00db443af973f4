'use strict'
// Workspace files as MCP resources (resources/list, resources/read), so a client can show what
// the code wrote. URIs are kern://workspace/<path>, the path percent-encoded per segment.

const { ResourceTemplate } = require('@modelcontextprotocol/sdk/server/mcp.js')
const { McpError, ErrorCode } = require('@modelcontextprotocol/sdk/types.js')
const { classify, readCapped, listCapped } = require('./files.js')

const PREFIX = 'kern://workspace/'

function uriOf(path) {
  return PREFIX + path.split('/').map(encodeURIComponent).join('/')
}

function pathOf(encoded) {
  try {
    return encoded.split('/').map(decodeURIComponent).join('/')
  } catch {
    throw new McpError(ErrorCode.InvalidParams, 'malformed workspace resource URI')
  }
}

/** Registers the workspace template on `server`; `interpreter.session()` gives the sandbox. */
function registerWorkspaceResources(server, interpreter) {
  const template = new ResourceTemplate(`${PREFIX}{+path}`, {
    list: async () => {
      const sbx = await interpreter.session()
      const { files } = await listCapped(sbx)
      return { resources: files.map((f) => ({ uri: uriOf(f.path), name: f.path, size: f.size })) }
    },
  })
  server.registerResource(
    'workspace',
    template,
    {
      title: 'Sandbox workspace files',
      description: 'Files in the sandbox workspace (what run_code sees at /workspace)',
    },
    async (uri, { path }) => {
      const rel = pathOf(Array.isArray(path) ? path.join('/') : path)
      const sbx = await interpreter.session()
      let bytes
      try {
        bytes = await readCapped(sbx, rel)
      } catch (e) {
        // A missing file, an escape or an oversized file is the request's problem: say which.
        throw new McpError(ErrorCode.InvalidParams, e.message)
      }
      const got = classify(bytes)
      const href = uri.href
      if (got.kind === 'text') return { contents: [{ uri: href, mimeType: 'text/plain', text: got.text }] }
      return {
        contents: [
          {
            uri: href,
            mimeType: got.kind === 'image' ? got.mime : 'application/octet-stream',
            blob: bytes.toString('base64'),
          },
        ],
      }
    },
  )
}

module.exports = { registerWorkspaceResources, uriOf }
