// kern-sandbox/e2b through the "require" condition: code written for @e2b/code-interpreter, with
// only the import changed, type-checks against lib/e2b/entry.d.ts.
import {
  Sandbox,
  CommandExitError,
  GitAuthError,
  GitUpstreamError,
  type GitStatus,
  type GitBranches,
  TimeoutError,
  NotFoundError,
  InvalidArgumentError,
  SandboxError,
  ChartType,
  type Execution,
  type Result,
  type Context,
  type EntryInfo,
  type OutputMessage,
  type ChartTypes,
  type CommandHandle,
  type CommandResult,
  type ProcessInfo,
  type WatchHandle,
  type FilesystemEvent,
  type SandboxMetrics,
  type SandboxInfo,
  FileType,
  FilesystemEventType,
  FileNotFoundError,
} from 'kern-sandbox/e2b'

export function lineLabels(r: Result): string[] {
  const chart: ChartTypes | undefined = r.chart
  return chart && chart.type === ChartType.LINE ? chart.elements.map((e) => e.label) : []
}

export async function agentTool(code: string): Promise<string> {
  const sbx = await Sandbox.create({ timeoutMs: 120_000, envs: { MODE: 'test' }, metadata: { user: 'u1' } })
  try {
    const out: string[] = []
    const exec: Execution = await sbx.runCode(code, {
      language: 'python',
      timeoutMs: 10_000,
      onStdout: (m: OutputMessage) => out.push(m.line),
      onStderr: (m) => out.push(m.error ? m.line : ''),
      onResult: (r: Result) => void r.formats(),
      onError: (e) => out.push(e.traceback),
      envs: { ONE: '1' },
    })
    if (exec.error) return `${exec.error.name}: ${exec.error.value}`
    const charts = exec.results.filter((r) => r.png !== undefined).map((r) => Buffer.from(r.png!, 'base64'))
    const table = exec.results.find((r) => r.isMainResult)?.data
    await sbx.files.write('/home/user/data.csv', 'a,b\n1,2\n')
    await sbx.files.write([{ path: 'x.txt', data: new Uint8Array([1]) }])
    const text: string = await sbx.files.read('data.csv')
    const bytes: Uint8Array = await sbx.files.read('data.csv', { format: 'bytes' })
    const entries: EntryInfo[] = await sbx.files.list('/home/user')
    const made: boolean = await sbx.files.makeDir('out')
    const ctx: Context = await sbx.createCodeContext({ language: 'js', cwd: '/home/user/out' })
    await sbx.runCode('1', { context: ctx })
    await sbx.restartCodeContext(ctx)
    await sbx.removeCodeContext(ctx.id)
    const all: Context[] = await sbx.listCodeContexts()
    try {
      const r = await sbx.commands.run('ls', { cwd: '/home/user', envs: { A: '1' }, onStdout: (d: string) => void d })
      out.push(r.stdout, String(r.exitCode))
    } catch (e) {
      if (e instanceof CommandExitError) out.push(e.stderr, String(e.exitCode))
      else if (e instanceof TimeoutError || e instanceof NotFoundError || e instanceof InvalidArgumentError) throw e
      else if (e instanceof SandboxError) throw e
    }
    await sbx.setTimeout(60_000)
    const running: boolean = await sbx.isRunning()
    const info = await sbx.getInfo()
    return [
      exec.text ?? '',
      text,
      bytes.length,
      entries.length,
      made,
      all.length,
      charts.length,
      table,
      running,
      info.sandboxId,
      JSON.stringify(exec.toJSON()),
    ].join()
  } finally {
    await sbx.kill()
  }
}

export const withTemplate = (): Promise<Sandbox> =>
  Sandbox.create('code-interpreter-v1', { allowInternetAccess: false, kern: { memoryMb: 1024 } })

// The core `e2b` SDK's API on the same Sandbox: background commands, stdin, PTYs, files anywhere,
// watchDir, getHost and metrics.
export async function devServer(): Promise<string> {
  const sbx = await Sandbox.create()
  const server: CommandHandle = await sbx.commands.run('python3 -m http.server 8000', {
    background: true,
    cwd: '/home/user',
    timeoutMs: 0,
    onStdout: (d: string) => void d,
  })
  const url = `http://${sbx.getHost(8000)}`
  const procs: ProcessInfo[] = await sbx.commands.list()
  const cat = await sbx.commands.run('cat', { background: true, stdin: true })
  await cat.sendStdin('hi')
  await sbx.commands.closeStdin(cat.pid)
  const r: CommandResult = await cat.wait()
  const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d: Uint8Array) => void d })
  await sbx.pty.sendInput(term.pid, new TextEncoder().encode('ls\n'))
  await sbx.pty.resize(term.pid, { cols: 100, rows: 40 })
  await sbx.pty.kill(term.pid)
  const w: WatchHandle = await sbx.files.watchDir(
    '/tmp',
    (e: FilesystemEvent) => {
      if (e.type === FilesystemEventType.CREATE) void e.name
    },
    { recursive: true, onExit: (err) => void err },
  )
  const entries: EntryInfo[] = await sbx.files.list('/tmp', { depth: 2 })
  const links = entries.filter((e) => e.type === FileType.SYMLINK).map((e) => e.symlinkTarget)
  await sbx.files.write([{ path: '/tmp/a', data: 'a' }], { metadata: { k: 'v' } })
  await w.stop()
  const [m]: SandboxMetrics[] = await sbx.getMetrics()
  const infos: SandboxInfo[] = await Sandbox.list().nextItems()
  try {
    await sbx.files.read('/nope')
  } catch (e) {
    if (e instanceof FileNotFoundError) void e.message
  }
  await server.kill()
  const killed: boolean = await sbx.kill()
  return `${url} ${procs.length} ${r.stdout} ${links.length} ${m.cpuUsedPct} ${infos.length} ${killed}`
}

// E2B's git module, as a coding agent uses it: a repository, a commit, a branch, a push.
export async function gitFlow(): Promise<string> {
  const sbx = await Sandbox.create()
  await sbx.git.init('/tmp/origin.git', { bare: true, initialBranch: 'main' })
  await sbx.git.clone('file:///tmp/origin.git', { path: 'repo', depth: 1 })
  await sbx.git.configureUser('Agent', 'agent@example.com')
  await sbx.files.write('repo/fix.py', 'print(1)\n')
  await sbx.git.add('repo', { files: ['fix.py'] })
  const c: CommandResult = await sbx.git.commit('repo', 'fix', { authorName: 'A', allowEmpty: false })
  const s: GitStatus = await sbx.git.status('repo')
  const b: GitBranches = await sbx.git.branches('repo')
  await sbx.git.createBranch('repo', 'feature')
  await sbx.git.restore('repo', { paths: ['.'], staged: true })
  await sbx.git.reset('repo', { mode: 'hard', target: 'HEAD' })
  const url: string | undefined = await sbx.git.remoteGet('repo', 'origin')
  const name: string | undefined = await sbx.git.getConfig('user.name', { scope: 'global' })
  try {
    await sbx.git.push('repo', { remote: 'origin', branch: 'feature', setUpstream: true })
    await sbx.git.pull('repo')
  } catch (e) {
    if (e instanceof GitUpstreamError || e instanceof GitAuthError) void e.message
  }
  await sbx.git.dangerouslyAuthenticate({ username: 'u', password: 'p', host: 'git.example.com' })
  await sbx.kill()
  const first = s.fileStatus[0]
  return `${c.exitCode} ${s.ahead} ${first ? first.status : ''} ${b.currentBranch} ${url} ${name}`
}
