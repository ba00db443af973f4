'use strict'
// What sandbox.git reads back from git: `git status --porcelain=1 -b -z` and `git branch` output
// as E2B's GitStatus and GitBranches, and the stderr of a failed git as E2B's error classes.

const { CommandExitError, GitAuthError, GitUpstreamError } = require('./errors.js')

/** Index/worktree letter pairs git uses for an unmerged path (`git status` "Unmerged" table). */
const UNMERGED = new Set(['DD', 'AU', 'UD', 'UA', 'DU', 'AA', 'UU'])

/** E2B's one-word label for a porcelain XY pair, most significant first. */
function label(x, y) {
  if (UNMERGED.has(x + y)) return 'conflict'
  const both = x + y
  for (const [letter, name] of [
    ['R', 'renamed'],
    ['C', 'copied'],
    ['D', 'deleted'],
    ['A', 'added'],
    ['M', 'modified'],
    ['T', 'typechange'],
    ['?', 'untracked'],
  ]) {
    if (both.includes(letter)) return name
  }
  return 'unknown'
}

/** `## <branch>[...<upstream>][ [ahead N, behind M]]` → branch fields. */
function branchLine(line) {
  const out = { currentBranch: undefined, upstream: undefined, ahead: 0, behind: 0, detached: false }
  let head = line.slice(3)
  const bracket = head.lastIndexOf(' [')
  if (bracket !== -1 && head.endsWith(']')) {
    const tracking = head.slice(bracket + 2, -1)
    head = head.slice(0, bracket)
    out.ahead = Number(/ahead (\d+)/.exec(tracking)?.[1] ?? 0)
    out.behind = Number(/behind (\d+)/.exec(tracking)?.[1] ?? 0)
  }
  if (head.startsWith('HEAD (no branch)') || head.startsWith('HEAD (detached')) {
    out.detached = true
    return out
  }
  // A repository with no commit yet names its branch this way (older git: "Initial commit on").
  head = head.replace(/^(No commits yet on|Initial commit on) /, '')
  const dots = head.indexOf('...')
  out.currentBranch = (dots === -1 ? head : head.slice(0, dots)) || undefined
  if (dots !== -1) out.upstream = head.slice(dots + 3) || undefined
  return out
}

/** `git status --porcelain=1 -b -z` output → E2B's GitStatus. With -z no path is quoted, and a
 * rename is `XY new\0old\0`. */
function parseStatus(stdout) {
  const fields = stdout.split('\0')
  let branch = { currentBranch: undefined, upstream: undefined, ahead: 0, behind: 0, detached: false }
  const fileStatus = []
  for (let i = 0; i < fields.length; i++) {
    const f = fields[i]
    if (f.length === 0) continue
    if (f.startsWith('## ')) {
      branch = branchLine(f)
      continue
    }
    if (f.length < 4) continue
    const x = f[0]
    const y = f[1]
    const entry = { name: f.slice(3), status: label(x, y), indexStatus: x, workingTreeStatus: y }
    entry.staged = x !== ' ' && x !== '?'
    if (x === 'R' || x === 'C' || y === 'R' || y === 'C') entry.renamedFrom = fields[++i]
    fileStatus.push(entry)
  }
  return summarise(branch, fileStatus)
}

function summarise(branch, fileStatus) {
  const count = (pred) => fileStatus.filter(pred).length
  const totalCount = fileStatus.length
  const stagedCount = count((e) => e.staged)
  const untrackedCount = count((e) => e.status === 'untracked')
  const conflictCount = count((e) => e.status === 'conflict')
  return {
    ...branch,
    fileStatus,
    isClean: totalCount === 0,
    hasChanges: totalCount > 0,
    hasStaged: stagedCount > 0,
    hasUntracked: untrackedCount > 0,
    hasConflicts: conflictCount > 0,
    totalCount,
    stagedCount,
    // As E2B counts it: every changed file not staged, untracked ones included.
    unstagedCount: totalCount - stagedCount,
    untrackedCount,
    conflictCount,
  }
}

/** `git branch --format=%(HEAD)%00%(refname)` output → E2B's GitBranches (local branches only;
 * a detached HEAD is no branch). */
function parseBranches(stdout) {
  const branches = []
  let currentBranch
  for (const line of stdout.split('\n')) {
    const sep = line.indexOf('\0')
    if (sep === -1) continue
    const ref = line.slice(sep + 1)
    if (!ref.startsWith('refs/heads/')) continue
    const name = ref.slice('refs/heads/'.length)
    branches.push(name)
    if (line.slice(0, sep) === '*') currentBranch = name
  }
  return { branches, currentBranch }
}

// What git (and the remote helpers under it) print when a remote wants credentials it did not get
// or refused the ones it got: the phrases E2B recognises.
const AUTH_SIGNS = [
  'authentication failed',
  'terminal prompts disabled',
  'could not read username',
  'invalid username or password',
  'access denied',
  'permission denied',
  'not authorized',
]
const UPSTREAM_SIGNS = [
  'has no upstream branch',
  'no upstream branch',
  'no upstream configured',
  'no tracking information',
  'set the remote as upstream',
  'set the upstream branch',
  'please specify which branch you want to merge with',
]

function says(err, signs) {
  if (!(err instanceof CommandExitError)) return false
  const text = `${err.stderr}\n${err.stdout}`.toLowerCase()
  return signs.some((s) => text.includes(s))
}

function authError(action, missingPassword, cause) {
  return new GitAuthError(
    missingPassword
      ? `Git ${action} requires a password/token for private repositories.`
      : `Git ${action} requires credentials for private repositories.`,
    { cause },
  )
}

const UPSTREAM_HELP = {
  push:
    'Git push failed because no upstream branch is configured. Set upstream once with { setUpstream: true } ' +
    '(and optional remote/branch), or pass remote and branch explicitly.',
  pull:
    'Git pull failed because no upstream branch is configured. Pass remote and branch explicitly, or set ' +
    'upstream once (push with { setUpstream: true } or run: git branch --set-upstream-to=origin/<branch> <branch>).',
}

function upstreamError(action, cause) {
  return new GitUpstreamError(UPSTREAM_HELP[action], cause ? { cause } : undefined)
}

/** A failed git of `action` (clone, push, pull) as E2B raises it: GitAuthError when the remote
 * wanted credentials, GitUpstreamError (push, pull) when there was no upstream, else as it was. */
function classify(err, action, missingPassword = false) {
  if (says(err, AUTH_SIGNS)) return authError(action, missingPassword, err)
  if (action !== 'clone' && says(err, UPSTREAM_SIGNS)) return upstreamError(action, err)
  return err
}

module.exports = { parseStatus, parseBranches, classify, upstreamError }
