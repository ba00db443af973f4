'use strict'
// kern-sandbox: the JS surface over the native core (lib/native.js loads it). Processes, files and
// archives are handled natively; lib/ holds what JS does best, a file per concern: errors,
// options, results, call plumbing (callbacks, AbortSignal), Sandbox, Kernel and Machine. Here: the entry's
// exports, withSandbox and the one-shot runCode. The public API is documented once, in index.d.ts.

const pkg = require('./package.json')
require('./lib/native.js')
const { SandboxError, MountRefused } = require('./lib/errors.js')
const { checkCallback, optionsBag, checkSignal } = require('./lib/options.js')
const { Result, ExecutionResult } = require('./lib/results.js')
const { ChartType, ScaleType } = require('./lib/charts.js')
const { Sandbox } = require('./lib/sandbox.js')
const { Kernel } = require('./lib/kernel.js')
const { Machine } = require('./lib/machine.js')
const { LANGUAGE_NAMES, resolveLanguage } = require('./lib/languages.js')
const { doctor } = require('./lib/doctor/index.js')

async function withSandbox(opts, fn) {
  if (typeof opts === 'function') {
    fn = opts
    opts = {}
  }
  if (typeof fn !== 'function') throw new TypeError('withSandbox needs a function (sandbox) => Promise')
  const sbx = new Sandbox(opts)
  await sbx.open()
  try {
    return await fn(sbx)
  } finally {
    await sbx.close()
  }
}

async function runCode(code, opts = {}) {
  const { language = 'python', signal, onResult, ...rest } = optionsBag('runCode', opts)
  if (checkSignal(signal) && signal.aborted) throw signal.reason
  checkCallback('onResult', onResult)
  // One call, one box: a box started ahead would never be used.
  return withSandbox({ prewarm: 0, ...rest }, (s) => s.runCode(code, { language, signal, onResult }))
}

module.exports = {
  Sandbox,
  Kernel,
  Machine,
  Result,
  withSandbox,
  runCode,
  ExecutionResult,
  SandboxError,
  MountRefused,
  ChartType,
  ScaleType,
  LANGUAGE_NAMES,
  resolveLanguage,
  doctor,
  version: pkg.version,
}
