// ESM entry of kern-sandbox/mastra: the classes built on @mastra/core's ES build (the one an ES
// app's Workspace and tools use), not on its CommonJS build.
import * as mastra from '@mastra/core/workspace'
import { createRequire } from 'node:module'

const { make } = createRequire(import.meta.url)('./index.js')
const entry = make(mastra)

export const { KernSandbox, KernFilesystem, KernProcessManager, KernProcessHandle } = entry
export default entry
