// The README quickstart, run for real: against kern when it is installed ($KERN_BIN or PATH),
// otherwise against the project's kern stand-in (build it with `npm run build:standin`).
//
//   node examples/quickstart.js
'use strict'
const fs = require('fs')
const path = require('path')

function pickKern() {
  if (process.env.KERN_BIN) return `kern at $KERN_BIN (${process.env.KERN_BIN})`
  for (const dir of (process.env.PATH || '').split(path.delimiter).filter(Boolean)) {
    try {
      fs.accessSync(path.join(dir, 'kern'), fs.constants.X_OK)
      return `kern on PATH (${path.join(dir, 'kern')})`
    } catch {}
  }
  const standin = path.join(__dirname, '..', 'target', 'release', 'kern-standin')
  if (!fs.existsSync(standin)) {
    console.error('kern is not installed and the stand-in is not built: run `npm run build:standin`')
    process.exit(1)
  }
  process.env.KERN_BIN = standin
  return `the kern stand-in (${standin}); kern itself is not installed`
}

async function main() {
  console.log(`running against ${pickKern()}`)
  const kern = require('..')

  const r = await kern.runCode('print(sum(range(100)))')
  console.log('python:', JSON.stringify(r.stdout), 'success:', r.success)

  const js = await kern.runCode('console.log([1,2,3].map(x => x * x))', {
    image: 'node:20-slim',
    language: 'node',
  })
  console.log('node:', js.stdout.trim())

  await kern.withSandbox(async (sbx) => {
    await sbx.writeFile('data.csv', 'a,b\n1,2\n3,4\n')
    const step = await sbx.runCode(
      "rows = open('data.csv').read().split()[1:]\n" +
        "open('sum.txt', 'w').write(str(sum(int(x) for r in rows for x in r.split(','))))",
    )
    console.log('files this step:', step.files)
    console.log('sum.txt:', (await sbx.readFile('sum.txt')).toString())
  })

  // A matplotlib figure comes back as a PNG and as data a model can read (E2B's chart shape).
  const plot = await kern.runCode(
    'import matplotlib.pyplot as plt\n' +
      "plt.bar(['north', 'south'], [120, 80], label='2024')\n" +
      "plt.title('Sales'); plt.ylabel('Revenue (kEUR)')",
  )
  const fig = plot.results.find((x) => x.chart)
  if (fig) {
    const { type, title, y_unit: unit, elements } = fig.chart
    console.log(
      `chart: ${type} "${title}" in ${unit}:`,
      elements.map((b) => `${b.label}=${b.value}`).join(', '),
      `(+ a ${fig.png.length}-byte PNG)`,
    )
  } else {
    console.log('chart: none (is matplotlib installed in the image?)', plot.stderr.trim().split('\n').pop())
  }

  // A warm kernel: one resident interpreter, state kept across cells.
  await kern.withSandbox(async (sbx) => {
    const k = await sbx.kernel()
    await k.runCode('total = sum(range(1_000_000))')
    const cell = await k.runCode('total // 1000')
    console.log('warm kernel:', cell.results[0].text, 'at cell', cell.executionCount)
    await k.close()
  })

  const t = await kern.runCode('while True: pass', { timeoutS: 2 })
  console.log('runaway loop:', t.success, t.fault)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
