// ESM entry of kern-sandbox/langchain: the backend built on deepagents' ES build (the one an ES
// app's createDeepAgent uses), not on its CommonJS build.
import * as deepagents from 'deepagents'
import { createRequire } from 'node:module'

const { make } = createRequire(import.meta.url)('./index.js')
const entry = make(deepagents)

export const { KernSandboxBackend } = entry
export default entry
