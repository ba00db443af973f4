// Type definitions for the ESM entry (index.mjs). index.mjs re-exports the very objects of the
// CommonJS entry, so these are the CommonJS declarations (index.d.ts), plus the default export:
// the whole module object, as `import kern from "kern-sandbox"` gives at run time.
export * from './index.js'
import * as kern from './index.js'
export default kern
