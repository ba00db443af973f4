// An OpenAI Agents SandboxAgent on a kern machine, offline: agents-core's ScriptedModel plays the
// model and uses the default sandbox tools (apply_patch, exec_command). Give the agent a real
// model (e.g. `model: 'gpt-5'` with OPENAI_API_KEY set) and nothing else changes.
//
//   node examples/openai-agents.mjs      (needs kern, or KERN_BIN pointing at the stand-in)
import { run, setTracingDisabled } from '@openai/agents-core'
import { SandboxAgent, Manifest } from '@openai/agents-core/sandbox'
import { ScriptedModel, assistantMessage, functionCall } from '@openai/agents-core/testing'
import { KernSandboxClient } from 'kern-sandbox/openai-agents'

setTracingDisabled(true)

const model = new ScriptedModel([
  [
    {
      type: 'apply_patch_call',
      callId: 'write',
      status: 'completed',
      operation: {
        type: 'create_file',
        path: 'fib.py',
        diff: '+a, b = 0, 1\n+for _ in range(10): a, b = b, a + b\n+print(a)\n',
      },
    },
  ],
  [functionCall('exec_command', { cmd: 'python3 fib.py && cat notes.md' }, { callId: 'run' })],
  [assistantMessage('fib(10) is 55.')],
])

const agent = new SandboxAgent({
  name: 'coder',
  instructions: 'Write and run code in the sandbox.',
  model,
  defaultManifest: new Manifest({ entries: { 'notes.md': { type: 'file', content: 'from the manifest\n' } } }),
})

const client = new KernSandboxClient({ memoryMb: 512 })
const result = await run(agent, 'What is fib(10)?', { sandbox: { client } })
for (const item of result.newItems) {
  if (item.type === 'tool_call_output_item') console.log(`${item.rawItem.callId} -> ${String(item.output).trim()}`)
}
console.log(`agent: ${result.finalOutput}`)
