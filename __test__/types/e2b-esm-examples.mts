// kern-sandbox/e2b through the "import" condition: named and default imports, top-level await,
// `await using`.
import e2b, { Sandbox, type Execution } from 'kern-sandbox/e2b'

await using sbx = await Sandbox.create()
const ex: Execution = await sbx.runCode('x = 1\nx + 1')
const same: boolean = e2b.Sandbox === Sandbox && ex.text === '2'
const other = await e2b.Sandbox.connect(sbx.sandboxId)
export { same, other }
