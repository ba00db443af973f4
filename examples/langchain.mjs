// A LangChain deep agent on a kern machine, offline: langchain's FakeToolCallingModel plays the
// model and uses the deep agent's own tools (write_file, execute, read_file) on the backend. Give
// createDeepAgent a real model (e.g. "anthropic:claude-sonnet-4-5") and nothing else changes.
//
//   node examples/langchain.mjs      (needs kern, or KERN_BIN pointing at the stand-in)
import { createDeepAgent } from 'deepagents'
import { FakeToolCallingModel } from 'langchain'
import { KernSandboxBackend } from 'kern-sandbox/langchain'

const backend = await KernSandboxBackend.create({
  memoryMb: 512,
  initialFiles: { '/workspace/data.csv': 'city,temp\nOslo,4\nLima,19\nCairo,27\n' },
})
try {
  const model = new FakeToolCallingModel({
    toolCalls: [
      [
        {
          name: 'write_file',
          id: 'w',
          args: {
            file_path: '/workspace/hot.py',
            content:
              'import csv\nrows = list(csv.DictReader(open("data.csv")))\nprint(max(rows, key=lambda r: int(r["temp"]))["city"])\n',
          },
        },
      ],
      [{ name: 'execute', id: 'x', args: { command: 'python3 hot.py' } }],
      [{ name: 'read_file', id: 'r', args: { file_path: '/workspace/data.csv', offset: 1, limit: 2 } }],
    ],
  })
  const agent = createDeepAgent({ model, backend })
  const result = await agent.invoke({ messages: [{ role: 'user', content: 'Which city is hottest?' }] })
  for (const m of result.messages) {
    if (m.getType() === 'tool') {
      const text = typeof m.content === 'string' ? m.content : m.content.map((c) => c.text ?? '').join('')
      console.log(`${m.name} -> ${text.trim().replace(/\n/g, ' | ')}`)
    }
  }
} finally {
  await backend.close()
}
