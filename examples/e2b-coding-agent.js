// A coding agent's loop written for E2B, run locally: the only change from E2B is the import.
//
//   - const { Sandbox } = require('@e2b/code-interpreter')
//   + const { Sandbox } = require('kern-sandbox/e2b')
//
// The "model" here is a fixed script of steps (so it runs offline): write a small web app and its
// tests, run the tests, fix the bug they find, start the app as a background dev server, and reach
// it from the host through getHost(), as an agent would show a user a preview.
//
//   node examples/e2b-coding-agent.js
'use strict'
const { Sandbox, CommandExitError } = require('kern-sandbox/e2b')

const APP = `import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

def total(prices):
    return sum(prices[1:])  # the bug the tests find

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"total": total([3, 4, 5])}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

if __name__ == "__main__":
    HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
`

const TESTS = `import unittest
from app import total

class TotalTest(unittest.TestCase):
    def test_total(self):
        self.assertEqual(total([3, 4, 5]), 12)

if __name__ == "__main__":
    unittest.main()
`

/** The tests' outcome, as an agent reads it: a failing run is a CommandExitError, not a crash. */
async function runTests(sbx) {
  try {
    await sbx.commands.run('python3 -m unittest -q test_app', { cwd: '/home/user/project' })
    return 'tests pass'
  } catch (e) {
    if (!(e instanceof CommandExitError)) throw e
    return `tests fail (exit ${e.exitCode}): ${e.stderr.split('\n').find((l) => l.startsWith('AssertionError'))}`
  }
}

async function main() {
  const sbx = await Sandbox.create({ timeoutMs: 120_000 })
  try {
    // 1. Write the project.
    await sbx.files.write([
      { path: '/home/user/project/app.py', data: APP },
      { path: '/home/user/project/test_app.py', data: TESTS },
    ])
    const names = (await sbx.files.list('/home/user/project')).map((e) => e.name)
    console.log(`files -> ${names.join(', ')}`)

    // 2. Run the tests; read the failure; fix the code; run them again.
    console.log(`run 1 -> ${await runTests(sbx)}`)
    const src = await sbx.files.read('/home/user/project/app.py')
    await sbx.files.write('/home/user/project/app.py', src.replace('sum(prices[1:])', 'sum(prices)'))
    console.log(`run 2 -> ${await runTests(sbx)}`)

    // 3. Start the dev server in the background and wait until it answers.
    const server = await sbx.commands.run('python3 app.py 8000', {
      background: true,
      cwd: '/home/user/project',
      timeoutMs: 0,
    })
    const url = `http://${sbx.getHost(8000)}/`
    let body = null
    for (let i = 0; i < 100 && body === null; i++) {
      body = await fetch(url)
        .then((r) => r.text())
        .catch(() => new Promise((resolve) => setTimeout(() => resolve(null), 100)))
    }
    console.log(`preview ${url} -> ${body}`)

    // 4. Inside the sandbox, a command and a notebook cell reach the same server.
    const curl = await sbx.commands.run(
      `python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8000/').read().decode())"`,
    )
    console.log(`in-sandbox request -> ${curl.stdout.trim()}`)
    const cell = await sbx.runCode(
      'import json, urllib.request\njson.load(urllib.request.urlopen("http://127.0.0.1:8000/"))["total"] * 2',
    )
    console.log(`cell -> ${cell.text}`)

    // 5. Find the server among the running processes, stop it, and see how it ended.
    const listed = (await sbx.commands.list()).find((p) => p.pid === server.pid)
    console.log(`listed -> pid ${listed.pid}: ${listed.args.at(-1)} in ${listed.cwd}`)
    await server.kill()
    const end = await server.wait().catch((e) => e)
    console.log(`server stopped -> exit ${end.exitCode}`)
  } finally {
    await sbx.kill()
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
