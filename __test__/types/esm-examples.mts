// The ESM entry's types (index.d.mts through the "import" condition): named imports, the default
// import (the whole module object, as at run time), and top-level await.
import kern, { runCode, Sandbox, SandboxError, version } from 'kern-sandbox'
import type { ExecutionResult, SandboxOptions } from 'kern-sandbox'

const r: ExecutionResult = await runCode('print(sum(range(100)))')
const same: ExecutionResult = await kern.runCode('print(1)', { language: 'python' })
const opts: SandboxOptions = { image: 'python:3.12-slim', securityProfile: 'untrusted' }
await using sbx = await new kern.Sandbox(opts).open()
const viaNamed: Sandbox = sbx
const isErr: boolean = new Error('x') instanceof kern.SandboxError || new Error('y') instanceof SandboxError
const v: string = version === kern.version ? version : ''
export { r, same, viaNamed, isErr, v }
