// An AI SDK agent loop on a kern machine, offline: ai's MockLanguageModelV4 plays the model and
// calls a shell tool (through `experimental_sandbox`) and the code interpreter. Swap the mock for
// a real model (e.g. `openai('gpt-5')`) and nothing else changes.
//
//   node examples/ai-sdk.mjs      (needs kern, or KERN_BIN pointing at the stand-in)
import { Sandbox } from 'kern-sandbox'
import { createSandboxSession, codeInterpreterTool } from 'kern-sandbox/ai'
import { generateText, isStepCount, jsonSchema, tool } from 'ai'
import { MockLanguageModelV4 } from 'ai/test'

// A tool written against the AI SDK's sandbox interface: it works on any provider's session.
const shell = tool({
  description: 'Run a shell command in the sandbox.',
  inputSchema: jsonSchema({ type: 'object', properties: { command: { type: 'string' } }, required: ['command'] }),
  execute: async ({ command }, { experimental_sandbox, abortSignal }) =>
    experimental_sandbox.run({ command, abortSignal }),
})

// What a model would do here, scripted: write data, look at it, analyse it, answer.
const script = [
  ['shell', { command: 'printf "month,sales\\njan,12\\nfeb,19\\nmar,31\\n" > sales.csv && wc -l sales.csv' }],
  [
    'python',
    {
      code: [
        'import pandas as pd, matplotlib',
        'matplotlib.use("Agg")',
        'import matplotlib.pyplot as plt',
        'df = pd.read_csv("sales.csv")',
        'plt.bar(df.month, df.sales); plt.title("Sales"); plt.show()',
        'df.sales.sum()',
      ].join('\n'),
    },
  ],
]
let step = 0
const usage = {
  inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 0, text: 0, reasoning: 0 },
}
const model = new MockLanguageModelV4({
  doGenerate: async () => {
    const next = script[step++]
    if (!next)
      return {
        content: [{ type: 'text', text: 'Sales total 62; chart attached.' }],
        finishReason: { unified: 'stop', raw: 'stop' },
        usage,
        warnings: [],
      }
    const [toolName, input] = next
    return {
      content: [{ type: 'tool-call', toolCallId: `c${step}`, toolName, input: JSON.stringify(input) }],
      finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
      usage,
      warnings: [],
    }
  },
})

const sbx = await new Sandbox().open()
try {
  const machine = await sbx.machine()
  const sandbox = createSandboxSession(machine)
  const result = await generateText({
    model,
    instructions: `You work in this sandbox:\n${sandbox.description}`,
    prompt: 'Total the sales and chart them.',
    experimental_sandbox: sandbox,
    tools: { shell, python: codeInterpreterTool(machine, { languages: ['python'] }) },
    stopWhen: isStepCount(5),
  })
  for (const s of result.steps) {
    for (const r of s.toolResults) {
      const o = r.output
      if (r.toolName === 'shell') console.log(`shell -> exit ${o.exitCode}: ${o.stdout.trim()}`)
      else
        console.log(
          `python -> ${o.results.map((x) => (x.png ? `[${x.chart?.type} chart, ${x.png.length} base64 bytes]` : x.text)).join(', ')}`,
        )
    }
  }
  console.log(`model: ${result.text}`)
} finally {
  await sbx.close()
}
