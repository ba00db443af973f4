'use strict'
// kern as doctor sees it: where it is (the native core's rule: $KERN_BIN, else `kern` on $PATH),
// and what its own `--version`, `doctor`, `info` and `images --json` print. kern's doctor has the
// facts about user namespaces, AppArmor and cgroup v2; its output is read, never repeated.

const fs = require('node:fs')
const cp = require('node:child_process')
const { onPath } = require('../host/facts.js')

/** `{ path }` of the kern binary the package would run, or `{ error }` saying why there is none. */
function locate(env = process.env) {
  if (env.KERN_BIN) {
    try {
      fs.accessSync(env.KERN_BIN, fs.constants.X_OK)
      if (fs.statSync(env.KERN_BIN).isFile()) return { path: env.KERN_BIN, from: 'KERN_BIN' }
    } catch {
      // falls through to the error
    }
    return { error: `$KERN_BIN='${env.KERN_BIN}' is not an executable file`, from: 'KERN_BIN' }
  }
  const found = onPath('kern', env)
  return { path: found, from: 'PATH', ...(found ? {} : { error: 'no `kern` on $PATH and $KERN_BIN is not set' }) }
}

/** Runs `kern args...` with a deadline; resolves `{ code, stdout, stderr }` (code null when it
 * could not start or passed the deadline). Never rejects. */
function run(bin, args, timeoutMs) {
  return new Promise((resolve) => {
    cp.execFile(bin, args, { timeout: timeoutMs, killSignal: 'SIGKILL', encoding: 'utf8' }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : null) : 0
      resolve({ code, stdout: stdout ?? '', stderr: stderr ?? '', timedOut: Boolean(err && err.killed) })
    })
  })
}

/** kern's doctor lines: `{ mark: 'ok'|'warn'|'fail', text, hint }`, and its verdict line. kern
 * marks a line ✔ (fine), ! (a warning) or with another sign (a failure); a deeper-indented line
 * after one is its hint. */
function parseDoctor(out) {
  const findings = []
  let verdict = null
  for (const raw of out.split('\n')) {
    const line = raw.replace(/\s+$/, '')
    const m = /^ {2}(\S) (.+)$/.exec(line)
    if (m) {
      findings.push({
        mark: m[1] === '✔' || m[1] === '✓' ? 'ok' : m[1] === '!' ? 'warn' : 'fail',
        text: m[2],
        hint: null,
      })
    } else if (/^ {4,}\S/.test(line) && findings.length && !/^\s+try it:/.test(line)) {
      const last = findings[findings.length - 1]
      last.hint = last.hint ? `${last.hint} ${line.trim()}` : line.trim()
    } else if (/^(ready|not ready)\b/i.test(line)) {
      verdict = line
    }
  }
  return { findings, verdict }
}

/** `kern info`'s `key   value` lines as an object ('runtime dir' → '/run/user/0/kern'). */
function parseInfo(out) {
  const info = {}
  for (const line of out.split('\n')) {
    const m = /^([a-z][a-z ]*?)\s{2,}(\S.*)$/.exec(line)
    if (m) info[m[1]] = m[2]
  }
  return info
}

/** The image names `kern images --json` lists, or null when it printed no such list. */
function parseImages(out) {
  try {
    const list = JSON.parse(out)
    if (!Array.isArray(list)) return null
    return list.filter((i) => i && typeof i.image === 'string' && !i.dangling).map((i) => i.image)
  } catch {
    return null
  }
}

module.exports = { locate, run, parseDoctor, parseInfo, parseImages }
