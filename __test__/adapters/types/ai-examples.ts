// kern-sandbox/ai against ai 7's own types (CommonJS resolution).
import { Sandbox } from 'kern-sandbox'
import { createSandboxSession, codeInterpreterTool, type KernSandboxSession } from 'kern-sandbox/ai'
import { generateText, isStepCount, tool, jsonSchema, type Experimental_SandboxSession, type Tool } from 'ai'
import { MockLanguageModelV4 } from 'ai/test'

export async function example(): Promise<string> {
  const sbx = await new Sandbox().open()
  const machine = await sbx.machine()
  const session: KernSandboxSession = createSandboxSession(machine, { env: { CI: '1' }, maxOutputBytes: 65536 })
  const asAi: Experimental_SandboxSession = session
  const interpreter = codeInterpreterTool(machine, { languages: ['python'] })
  const asTool: Tool = interpreter
  const kernelTool = codeInterpreterTool(await sbx.kernel())
  const shell = tool({
    inputSchema: jsonSchema<{ command: string }>({ type: 'object', properties: { command: { type: 'string' } } }),
    execute: async ({ command }, { experimental_sandbox }) => experimental_sandbox!.run({ command }),
  })
  const result = await generateText({
    model: new MockLanguageModelV4(),
    prompt: 'hi',
    instructions: asAi.description,
    experimental_sandbox: session,
    tools: { python: interpreter, js: kernelTool, shell },
    stopWhen: isStepCount(5),
  })
  const text: string | null = await session.readTextFile({ path: 'a.txt', startLine: 1, endLine: 2 })
  const stat = await session.stat({ path: '.' })
  const kind: 'file' | 'directory' | 'other' | undefined = stat?.type
  const p = await session.spawn({ command: 'cat', stdin: true })
  const writer: WritableStream<Uint8Array> = p.stdin
  const exit: { exitCode: number } = await p.wait()
  const url: string = (await session.exposePort(8000)).url
  void [asTool, text, kind, writer, exit, url]
  await sbx.close()
  return result.text
}
