'use strict'
// The server's knobs: upstream kern-mcp's environment variables, each also a command-line flag
// (a flag wins over its variable). Bad values are refused at start, with the knob named, rather
// than discovered on the first tool call.

/** Each knob: its flag, its variable, what it takes, its default, and one line for --help. */
const KNOBS = [
  {
    key: 'image',
    flag: '--image',
    env: 'KERN_MCP_IMAGE',
    kind: 'string',
    def: 'python:3.12-slim',
    arg: 'IMAGE',
    help: 'OCI image every box runs from',
  },
  {
    key: 'setup',
    flag: '--setup',
    env: 'KERN_MCP_SETUP',
    kind: 'string',
    def: null,
    arg: 'CMD',
    help: 'shell command run once, with network, before the first call (e.g. "pip install numpy")',
  },
  {
    key: 'memoryMb',
    flag: '--memory-mb',
    env: 'KERN_MCP_MEMORY_MB',
    kind: 'positive',
    def: 1024,
    arg: 'MB',
    help: 'RAM cap of each box, in MiB',
  },
  {
    key: 'timeoutS',
    flag: '--timeout',
    env: 'KERN_MCP_TIMEOUT',
    kind: 'positive',
    def: 60,
    arg: 'SECONDS',
    help: 'default deadline of a run_code call (a call may pass its own timeout_s)',
  },
  {
    key: 'workspace',
    flag: '--workspace',
    env: 'KERN_MCP_WORKSPACE',
    kind: 'string',
    def: null,
    arg: 'DIR',
    help: 'host directory kept as the workspace (default: a temp dir removed at exit)',
  },
  {
    key: 'profiles',
    flag: '--profiles',
    env: 'KERN_MCP_PROFILES',
    kind: 'list',
    def: null,
    arg: 'LIST',
    help: 'comma-separated kern.toml profiles, e.g. vcpu:heavy,vdisk:scratch',
  },
  {
    key: 'kernel',
    flag: '--kernel',
    env: 'KERN_MCP_KERNEL',
    kind: 'switch',
    def: true,
    arg: '1|0',
    help: 'warm kernel: variables persist between run_code calls (0: a fresh box per call)',
  },
  {
    key: 'kernBin',
    flag: '--kern-bin',
    env: 'KERN_BIN',
    kind: 'string',
    def: null,
    arg: 'PATH',
    help: 'the kern binary (default: kern on PATH)',
  },
]

const TRUE = new Set(['1', 'true', 'yes', 'on'])
const FALSE = new Set(['0', 'false', 'no', 'off', ''])

class ConfigError extends Error {}

function parseValue(knob, raw, where) {
  const text = String(raw).trim()
  switch (knob.kind) {
    case 'string':
      return text === '' ? null : text
    case 'positive': {
      const n = Number(text)
      if (!Number.isFinite(n) || n <= 0)
        throw new ConfigError(`${where} must be a positive number, got ${JSON.stringify(raw)}`)
      return n
    }
    case 'list': {
      const items = text
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
      return items.length ? items : null
    }
    case 'switch': {
      const v = text.toLowerCase()
      if (TRUE.has(v)) return true
      if (FALSE.has(v)) return false
      throw new ConfigError(`${where} must be 1 or 0, got ${JSON.stringify(raw)}`)
    }
  }
  throw new Error(`unknown knob kind ${knob.kind}`)
}

/** The configuration from `argv` (without node and the script) over `env`. Returns
 * `{ help: true }` for --help, else every knob's value; throws ConfigError on a bad one. */
function loadConfig(argv = [], env = process.env) {
  const config = {}
  for (const knob of KNOBS) {
    const raw = env[knob.env]
    config[knob.key] = raw === undefined ? knob.def : (parseValue(knob, raw, knob.env) ?? knob.def)
  }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (arg === '--help' || arg === '-h') return { help: true }
    const eq = arg.indexOf('=')
    const flag = eq > 0 ? arg.slice(0, eq) : arg
    const knob = KNOBS.find((k) => k.flag === flag)
    if (!knob) throw new ConfigError(`unknown option ${JSON.stringify(arg)} (see --help)`)
    let value
    if (eq > 0) value = arg.slice(eq + 1)
    else if (knob.kind === 'switch' && (i + 1 >= argv.length || argv[i + 1].startsWith('--'))) value = '1'
    else if (i + 1 < argv.length) value = argv[++i]
    else throw new ConfigError(`${flag} needs a value (${knob.arg})`)
    config[knob.key] = parseValue(knob, value, flag) ?? knob.def
  }
  return config
}

/** --help: usage, then each flag with its variable and default. */
function helpText(version) {
  const rows = KNOBS.map((k) => {
    const left = `  ${k.flag} ${k.arg}`
    const def = k.def === null ? '' : ` [default: ${k.kind === 'switch' ? (k.def ? '1' : '0') : k.def}]`
    return `${left.padEnd(26)}${k.help}${def}\n${' '.repeat(26)}env: ${k.env}`
  })
  return [
    `kern-sandbox-mcp ${version}: a local code interpreter (kern sandbox) as a stdio MCP server.`,
    '',
    'Usage: kern-sandbox-mcp [options]    (speaks MCP on stdin/stdout; logs go to stderr)',
    '',
    'Options (each also read from its environment variable; a flag wins):',
    ...rows,
    '  --help                  this text',
    '',
    'Tools: run_code, write_file, read_file, list_files, reset. Workspace files are also resources.',
    'Every box runs with the network off; only the setup command has network.',
    '',
  ].join('\n')
}

module.exports = { KNOBS, ConfigError, loadConfig, helpText }
