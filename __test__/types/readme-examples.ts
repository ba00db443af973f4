// Compiled by types.test.js with `tsc --noEmit --strict` (never run): the 0.1.1 README's examples,
// as TypeScript users write them against "kern-sandbox" (resolved to this repo through the package's
// own `exports` map), plus the options and calls 0.2 adds. Each `@ts-expect-error` is a misuse the
// declarations must keep rejecting: tsc fails if the line stops being an error.
import kern = require('kern-sandbox')
import {
  runCode,
  withSandbox,
  Sandbox,
  SandboxError,
  MountRefused,
  ExecutionResult,
  Result,
  Kernel,
} from 'kern-sandbox'
import * as fs from 'node:fs'
import type {
  SandboxOptions,
  SandboxFault,
  SandboxFaultType,
  FileInfo,
  MountSpec,
  Language,
  PerCallOptions,
  RunCodeOptions,
  CellOptions,
  KernelOptions,
  ExecutionError,
  ChartTypes,
  PointData,
  BoxAndWhiskerData,
  PieChart,
  BarChart,
  BarData,
  LineChart,
  ScatterChart,
  SuperChart,
  UnknownChart,
} from 'kern-sandbox'
import { ChartType, ScaleType } from 'kern-sandbox'

declare const csvBytes: Buffer

async function quickstart(): Promise<void> {
  // one-shot: a throwaway box, network off, hard caps, a timeout the binding enforces
  const r = await kern.runCode('print(sum(range(100)))')
  console.log(r.stdout, r.success) // "4950\n" true
  const r2: ExecutionResult = await runCode('print(1)')
  const ok: boolean = r2.success
  void ok
}

async function session(): Promise<void> {
  await kern.withSandbox({ setup: 'pip install pandas' }, async (sbx) => {
    await sbx.writeFile('data.csv', csvBytes)
    const r = await sbx.runCode("import pandas as pd; print(pd.read_csv('data.csv').describe())")
    console.log(r.stdout) // network off, capped, isolated
    const chart: Buffer = await sbx.readFile('out.png')
    void chart
  })
  // withSandbox without options, and the value it returns
  const n: number = await withSandbox(async (sbx) => (await sbx.listFiles()).length)
  void n
}

async function javascriptInTheBox(): Promise<void> {
  const r = await kern.runCode('console.log([1,2,3].map(x => x * x))', {
    image: 'node:20-slim',
    language: 'node',
  })
  const lang: Language = 'bash'
  ;(void r, lang)
}

async function theResult(): Promise<void> {
  const r = await kern.runCode('while True: pass', { timeoutS: 5 })
  r.success // false
  r.fault?.type // "timeout"
  const fault: SandboxFault | null = r.fault
  if (fault) {
    const t: SandboxFaultType = fault.type
    const msg: string = fault.message
    ;(void t, msg)
  }
  const files: FileInfo[] = r.files
  for (const f of files) {
    const change: 'created' | 'modified' = f.change
    ;(void f.path, f.size, change)
  }
  const fields: [string, string, number, number, boolean] = [r.stdout, r.stderr, r.exitCode, r.durationMs, r.truncated]
  void fields
  // @ts-expect-error fault may be null: strict code must check it
  r.fault.type
  // @ts-expect-error success is read-only
  r.success = true
}

function options(): Sandbox {
  const mounts: Record<string, MountSpec> = { '/srv/data': '/data', '/srv/models': ['/models', 'ro'] }
  return new Sandbox({
    image: 'python:3.12-slim', // default "python:3.12-slim"
    setup: 'pip install pandas', // one-time, network-on
    workspace: '/tmp/ws', // host dir to persist; omit for a temp dir deleted on close()
    memoryMb: 512, // default 512
    cpus: null, // default null (uncapped)
    pids: 256, // default 256
    timeoutS: 30, // default 30, MANDATORY per-call deadline
    network: false, // default false (RELAXES ISOLATION)
    mounts, // { hostSrc: boxTarget } or { src: [target, "ro"] }
    profiles: ['vcpu:heavy', 'vgpio:leds', 'vdisk:scratch'],
    env: { KEY: 'value' },
    maxOutputBytes: 64 * 1024 * 1024,
    enforceLimits: true,
    depsReadonly: false,
    onStdout: (chunk: Buffer) => process.stdout.write(chunk), // live stdout streaming
    onStderr: (chunk) => void chunk.length, // live stderr streaming
  })
}

function egress(): Sandbox {
  return new Sandbox({ egressAllow: ['pkgs.example.org', 'files.example.net'] })
}

async function charts(): Promise<void> {
  await kern.withSandbox({ setup: 'pip install matplotlib' }, async (sbx) => {
    await sbx.runCode(
      "import matplotlib; matplotlib.use('Agg')\n" +
        "import matplotlib.pyplot as plt; plt.plot([1,4,9]); plt.savefig('chart.png')",
    )
    const png = await sbx.readFile('chart.png') // Buffer, ready to return to the model / user
    void png
  })
}

async function checkpoints(sbx: Sandbox): Promise<void> {
  sbx.snapshot('/tmp/ws.tar.gz')
  sbx.restore('/tmp/ws.tar.gz')
  const all: FileInfo[] = await sbx.listFiles()
  const sub: FileInfo[] = await sbx.listFiles('out')
  ;(void all, sub)
}

async function errors(): Promise<void> {
  try {
    new Sandbox({ mounts: { '/etc': '/etc' } })
  } catch (e) {
    if (e instanceof MountRefused) {
      const code: string | undefined = e.code
      void code
    } else if (e instanceof SandboxError) {
      console.error(e.message, e.code)
    }
  }
  const v: string = kern.version
  void v
}

function misuse(sbx: Sandbox): void {
  // @ts-expect-error run() takes an argv array, never a shell string
  void sbx.run('ls -la')
  // @ts-expect-error unknown language
  void sbx.runCode('x', { language: 'ruby' })
  // @ts-expect-error fault types are a closed set
  const t: SandboxFaultType = 'segfault'
  void t
  // @ts-expect-error mount mode is "ro" or "rw"
  const m: MountSpec = ['/data', 'rx']
  void m
}

// ---- 0.2: per-call options, cancellation, hardening, resource management -------------------

async function perCall(sbx: Sandbox): Promise<void> {
  const ac = new AbortController()
  const opts: RunCodeOptions = {
    language: 'python',
    timeoutS: 5,
    onStdout: (chunk) => void chunk.toString('utf8'),
    onStderr: null, // turns the session's onStderr off for this call
    signal: ac.signal,
  }
  await sbx.runCode('print(1)', opts)
  const callOpts: PerCallOptions = { timeoutS: 1, signal: AbortSignal.timeout(500) }
  await sbx.run(['python3', '-c', 'print(2)'], callOpts)
  await sbx.run(['true'])
  await sbx.run(['true'], { onStdout: null, onStderr: async (c: Buffer) => void c })
  // top-level runCode takes a signal too
  await runCode('print(3)', { signal: ac.signal, language: 'python', timeoutS: 2 })
  // @ts-expect-error a signal is an AbortSignal, not an AbortController
  await sbx.run(['true'], { signal: ac })
}

async function readLimits(sbx: Sandbox): Promise<void> {
  const small: Buffer = await sbx.readFile('out.json', { maxBytes: 1 << 20 })
  sbx.restore('/tmp/ws.tar.gz', { maxBytes: 1024 ** 3 })
  const ws: string | null = sbx.workspacePath
  ;(void small, ws)
  // @ts-expect-error workspacePath is read-only
  sbx.workspacePath = '/tmp'
}

async function checkpointsOffTheLoop(sbx: Sandbox): Promise<void> {
  const done: Promise<void> = sbx.snapshotAsync('/tmp/ws.tar.gz', { signal: AbortSignal.timeout(10_000) })
  await done
  await sbx.restoreAsync('/tmp/ws.tar.gz', { maxBytes: 1024 ** 3 })
  // @ts-expect-error snapshot() stays synchronous, as in 0.1.1: nothing to await
  const p: Promise<void> = sbx.snapshot('/tmp/ws.tar.gz')
  void p
}

function hardening(): SandboxOptions {
  const o: SandboxOptions = {
    trackFiles: false,
    capDrop: ['ALL'],
    securityProfile: 'untrusted',
    requireLimits: true,
    apparmor: 'kern-box',
    onStdout: null,
  }
  // null means "the default", as in the later upstream SDK
  const defaults: SandboxOptions = { securityProfile: null, apparmor: null, memoryMb: null, cpus: null, pids: null }
  void defaults
  // @ts-expect-error "untrusted" is the only security profile
  const bad: SandboxOptions = { securityProfile: 'trusted' }
  void bad
  return o
}

async function explicitResourceManagement(): Promise<string> {
  await using sbx = await new Sandbox({ trackFiles: false }).open()
  const r = await sbx.runCode("print('hi')")
  if (r.fault?.type === 'oom') return 'out of memory'
  return r.stdout
}

async function disposeByHand(): Promise<void> {
  const sbx = new Sandbox()
  const opened: Sandbox = await sbx.open()
  await opened[Symbol.asyncDispose]()
  await sbx.close()
}

export {
  quickstart,
  session,
  javascriptInTheBox,
  theResult,
  options,
  egress,
  charts,
  checkpoints,
  errors,
  misuse,
  perCall,
  readLimits,
  hardening,
  explicitResourceManagement,
  disposeByHand,
}

// docs/kernels.md "Rich results" and "Warm kernels".
async function richResults(): Promise<void> {
  await kern.withSandbox(async (sbx) => {
    const r = await sbx.runCode(
      'import matplotlib.pyplot as plt\n' +
        'import pandas as pd\n' +
        "df = pd.DataFrame({'x': [1, 2, 3], 'y': [1, 4, 9]})\n" +
        "df.plot(x='x', y='y')\n" +
        'df.describe()',
    )
    const table = r.results.find((x) => x.isMainResult)?.html // the describe() table
    const chart = r.results.find((x) => x.png)?.png // a PNG Buffer of the plot
    if (chart) await fs.promises.writeFile('chart.png', chart)
    const t: string | undefined = table
    const res: Result | undefined = r.results[0]
    const kinds: string[] = res ? res.formats() : []
    const err: ExecutionError | null = r.error
    await sbx.runCode('1', { onResult: (x: Result) => console.log(x.text, x.executionCount) })
    // @ts-expect-error onResult takes a Result, not a Buffer
    await sbx.runCode('1', { onResult: (x: Buffer) => x })
    ;(void t, kinds, err)
  })
}

async function warmKernel(): Promise<void> {
  await kern.withSandbox(async (sbx) => {
    const k = await sbx.kernel({ timeoutS: 30 })
    await k.runCode('import numpy as np; a = np.arange(1_000_000)')
    const r = await k.runCode('a.sum()', { onStdout: (c) => process.stdout.write(c) })
    console.log(r.results[0].text, r.executionCount) // "499999500000" 2
    await k.close() // or `await using k = await sbx.kernel()`
    const opts: KernelOptions = { timeoutS: 5 }
    const cell: CellOptions = { signal: AbortSignal.timeout(1000), onResult: null }
    const k2: Kernel = await sbx.kernel(opts)
    const alive: boolean = k2.alive
    await k2.runCode('1', cell)
    await k2[Symbol.asyncDispose]()
    // @ts-expect-error a kernel cell takes no language: it is Python
    await k2.runCode('1', { language: 'bash' })
    void alive
  })
}
// docs/charts.md: narrowing on `type`, E2B's field names, the enums as values.
async function chartsAsData(): Promise<void> {
  const { ChartType } = kern
  const r = await kern.runCode(
    'import matplotlib.pyplot as plt\n' +
      "plt.bar(['north', 'south'], [120, 80], label='2024')\n" +
      "plt.title('Sales'); plt.ylabel('Revenue (kEUR)')",
  )
  const chart = r.results.find((x) => x.chart)?.chart
  if (chart?.type === ChartType.BAR) {
    console.log(chart.title, chart.y_unit) // "Sales" "kEUR"
    for (const bar of chart.elements) console.log(bar.label, bar.value, bar.group) // "north" 120 "2024" ...
  }
  const c: ChartTypes | undefined = r.results[0]?.chart
  if (c && (c.type === ChartType.LINE || c.type === ChartType.SCATTER)) {
    const first: [number | string, number | string] | undefined = c.elements[0]?.points[0]
    const scale: ScaleType = c.x_scale
    const isDate: boolean = scale === ScaleType.DATETIME
    const cut: boolean = c.elements.some((e: PointData) => e.truncated === true)
    const ticks: string[] = c.x_tick_labels
    ;(void first, isDate, cut, ticks)
  } else if (c?.type === ChartType.BOX_AND_WHISKER) {
    const box: BoxAndWhiskerData | undefined = c.elements[0]
    const q: number | undefined = box?.third_quartile
    void q
  } else if (c?.type === ChartType.SUPERCHART) {
    const inner: ChartType[] = c.elements.map((x) => x.type)
    void inner
  } else if (c?.type === ChartType.PIE) {
    const pie: PieChart = c
    const angle: number | undefined = pie.elements[0]?.angle
    // @ts-expect-error a pie has no axes
    void pie.x_label
    void angle
  }
  const bars: BarChart | LineChart | ScatterChart | SuperChart | UnknownChart | undefined = undefined
  const data: BarData | undefined = undefined
  ;(void bars, data)
}

;(void richResults, warmKernel, chartsAsData)
