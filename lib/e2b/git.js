'use strict'
// sandbox.git: E2B's Git module. Each method is one or a few `git` commands run through
// sandbox.commands (so as the sandbox's user, in its home, with E2B's CommandResult and
// CommandExitError), each argument single-quoted for the shell and every ref, remote or URL
// checked so that none can be read by git as an option.
//
// Credentials never go on a command line or in an environment: a username/password for one clone,
// push or pull is written through stdin to a 0600 git-credential-store file under /tmp, named to
// git by `-c credential.helper=store --file=…` for that one command and removed after it.
// `dangerouslyAuthenticate` stores them, as E2B does, in the user's ~/.git-credentials (plain
// text); `dangerouslyStoreCredentials` on clone stores them in the clone's own .git/credentials.

const { randomBytes } = require('node:crypto')
const { shellQuote: quote } = require('../adapters.js')
const { InvalidArgumentError, CommandExitError } = require('./errors.js')
const { parseStatus, parseBranches, classify, upstreamError } = require('./gitparse.js')

/** No git here may stop to ask for a password on a terminal nobody watches. */
const GIT_ENV = { GIT_TERMINAL_PROMPT: '0' }
const RESET_MODES = ['soft', 'mixed', 'hard', 'merge', 'keep']
const SCOPES = ['global', 'local', 'system']
// What git's check-ref-format refuses anywhere in a ref name.
// (Control characters, refused too, are checked by word().)
const REF_BAD = /[ ~^:?*[\\]|\.\.|@\{|\/\/|\/\.|\.lock(\/|$)|^\.|[/.]$/

function hasControl(v) {
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i)
    if (c < 0x20 || c === 0x7f) return true
  }
  return false
}

function text(v, what) {
  if (typeof v !== 'string' || v === '' || v.includes('\0')) {
    throw new InvalidArgumentError(`${what} must be a non-empty string with no NUL byte, got ${JSON.stringify(v)}`)
  }
  return v
}

/** A value git must not read as an option: a URL, remote name or revision. */
function word(v, what) {
  text(v, what)
  if (v.startsWith('-') || hasControl(v)) {
    throw new InvalidArgumentError(`${what} ${JSON.stringify(v)} must not start with '-' or contain control characters`)
  }
  return v
}

/** A branch name git would accept (`git check-ref-format --branch`). */
function branchName(v, what = 'branch') {
  word(v, what)
  if (v === '@' || REF_BAD.test(v))
    throw new InvalidArgumentError(`${what} ${JSON.stringify(v)} is not a valid branch name`)
  return v
}

function paths(list, what) {
  if (!Array.isArray(list)) throw new InvalidArgumentError(`${what} must be an array of paths`)
  return list.map((p, i) => text(p, `${what}[${i}]`))
}

/** One line of git's credential protocol: no newline may start another. */
function credential(v, what) {
  text(v, what)
  if (/[\r\n]/.test(v)) throw new InvalidArgumentError(`${what} must not contain a line break`)
  return v
}

/** The credential-protocol description of `url` (http or https only, as E2B requires). */
function httpTarget(url) {
  let u
  try {
    u = new URL(url)
  } catch {
    throw new InvalidArgumentError(`Invalid Git URL: ${url}`)
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') {
    throw new InvalidArgumentError('Only http(s) Git URLs support username/password credentials.')
  }
  return { protocol: u.protocol.slice(0, -1), host: u.host, path: decoded(u.pathname.replace(/^\//, '')) }
}

/** A URL path as git's credential protocol gives it: percent-decoded (as it is when it cannot be). */
function decoded(p) {
  try {
    return decodeURIComponent(p)
  } catch {
    return p
  }
}

function credentialInput({ protocol, host, path }, username, password) {
  const lines = [`protocol=${protocol}`, `host=${host}`]
  if (path) lines.push(`path=${path}`)
  return `${lines.join('\n')}\nusername=${username}\npassword=${password}\n\n`
}

/** The directory `git clone url` makes when given none. */
function cloneDir(url) {
  const last = url
    .replace(/[/\\]+$/, '')
    .split(/[/:\\]/)
    .pop()
  const dir = last && last.replace(/\.git$/, '')
  if (!dir) throw new InvalidArgumentError(`pass opts.path: no directory name can be taken from ${JSON.stringify(url)}`)
  return dir
}

/** The sandbox.commands options of a git request (E2B's GitRequestOpts). */
function runOpts(opts) {
  const { envs, user, cwd, timeoutMs } = opts ?? {}
  const merged = envs == null ? GIT_ENV : typeof envs === 'object' ? { ...GIT_ENV, ...envs } : envs
  return { envs: merged, user, cwd, timeoutMs }
}

function scopeOf(opts) {
  const scope = opts?.scope ?? 'global'
  if (!SCOPES.includes(scope)) throw new InvalidArgumentError('Git config scope must be one of: global, local, system.')
  if (scope !== 'local') return { flag: `--${scope}`, repo: undefined }
  if (!opts.path) throw new InvalidArgumentError('A repository path is required when using scope "local".')
  return { flag: '--local', repo: text(opts.path, 'path') }
}

/** Checks clone/push/pull credentials as E2B does; true when both are given. */
function checkCredentials(username, password, action) {
  if (password && !username) {
    throw new InvalidArgumentError(`Username is required when using a password or token for git ${action}.`)
  }
  if (username != null) credential(username, 'username')
  if (password != null) credential(password, 'password')
  return Boolean(username && password)
}

class Git {
  #commands

  /** `commands`: the sandbox's Commands, which every git runs through. */
  constructor(commands) {
    this.#commands = commands
  }

  /** Runs `git [-C repo] [pre...] args...`; CommandExitError when git fails. */
  async #git(args, repo, opts, pre = []) {
    const argv = ['git', ...(repo != null ? ['-C', text(repo, 'path')] : []), ...pre, ...args]
    return this.#commands.run(argv.map(quote).join(' '), runOpts(opts))
  }

  /** Runs `argv` with `input` on its stdin (how secrets reach git here). */
  async #feed(argv, input, opts) {
    const h = await this.#commands.run(`umask 077 && ${argv.map(quote).join(' ')}`, {
      ...runOpts(opts),
      background: true,
      stdin: true,
    })
    try {
      await h.sendStdin(input)
      await h.closeStdin()
    } catch (e) {
      await h.kill().catch(() => {})
      throw e
    }
    return h.wait()
  }

  /** Runs `fn(pre)` with `pre` the git options that answer a credential request for `url` with
   * username/password, from a file that exists only meanwhile. */
  async #withCredentials(url, username, password, opts, fn) {
    const input = credentialInput(httpTarget(url), username, password)
    const file = `/tmp/.kern-e2b-git-credentials-${randomBytes(12).toString('hex')}`
    try {
      await this.#feed(['git', 'credential-store', `--file=${file}`, 'store'], input, opts)
      // The empty value drops any helper configured already: only this file answers.
      return await fn(['-c', 'credential.helper=', '-c', `credential.helper=store --file=${quote(file)}`])
    } finally {
      await this.#commands.run(`rm -f ${quote(file)}`, runOpts(opts)).catch(() => {})
    }
  }

  /** Clones `url` (into `opts.path`, else the directory git names after the URL). */
  async clone(url, opts = {}) {
    opts = opts ?? {}
    word(url, 'url')
    const { username, password, branch, depth, path, dangerouslyStoreCredentials } = opts
    const withCreds = checkCredentials(username, password, 'clone')
    const args = ['clone']
    if (branch != null) args.push('--branch', branchName(branch), '--single-branch')
    if (depth != null) {
      if (!Number.isSafeInteger(depth) || depth < 1)
        throw new InvalidArgumentError(`depth must be a positive integer, got ${String(depth)}`)
      args.push('--depth', String(depth))
    }
    args.push('--', url)
    if (path != null) args.push(text(path, 'path'))
    try {
      if (!withCreds) return await this.#git(args, undefined, opts)
      const result = await this.#withCredentials(url, username, password, opts, (pre) =>
        this.#git(args, undefined, opts, pre),
      )
      if (dangerouslyStoreCredentials) await this.#storeInRepo(path ?? cloneDir(url), url, username, password, opts)
      return result
    } catch (e) {
      throw classify(e, 'clone', Boolean(username) && !password)
    }
  }

  /** Keeps a clone's credentials in its own .git/credentials, its `credential.helper`. */
  async #storeInRepo(repo, url, username, password, opts) {
    const gitDir = (await this.#git(['rev-parse', '--absolute-git-dir'], repo, opts)).stdout.trim()
    const file = `${gitDir}/credentials`
    await this.#feed(
      ['git', 'credential-store', `--file=${file}`, 'store'],
      credentialInput(httpTarget(url), username, password),
      opts,
    )
    await this.#git(['config', '--local', 'credential.helper', `store --file=${quote(file)}`], repo, opts)
  }

  /** `git init` at `path` (made if missing). */
  async init(path, opts = {}) {
    opts = opts ?? {}
    text(path, 'path')
    const args = ['init']
    if (opts.initialBranch != null) args.push(`--initial-branch=${branchName(opts.initialBranch, 'initialBranch')}`)
    if (opts.bare) args.push('--bare')
    return this.#git([...args, '--', path], undefined, opts)
  }

  /** Adds remote `name` → `url`; with `overwrite` an existing one gets the new URL; with `fetch`
   * it is fetched. */
  async remoteAdd(path, name, url, opts = {}) {
    opts = opts ?? {}
    if (!name || !url) throw new InvalidArgumentError('Both remote name and URL are required to add a git remote.')
    word(name, 'remote name')
    word(url, 'url')
    if (opts.overwrite && (await this.remoteGet(path, name, opts)) !== undefined) {
      const r = await this.#git(['remote', 'set-url', '--', name, url], path, opts)
      return opts.fetch ? this.#git(['fetch', '--', name], path, opts) : r
    }
    return this.#git(['remote', 'add', ...(opts.fetch ? ['-f'] : []), '--', name, url], path, opts)
  }

  /** The URL of remote `name`; undefined when the repository has no such remote. */
  async remoteGet(path, name, opts = {}) {
    if (!name) throw new InvalidArgumentError('Remote name is required.')
    word(name, 'remote name')
    try {
      const url = (await this.#git(['remote', 'get-url', '--', name], path, opts)).stdout.trim()
      return url || undefined
    } catch (e) {
      // git exits 2 for "No such remote"; any other failure (not a repository...) is reported.
      if (e instanceof CommandExitError && e.exitCode === 2) return undefined
      throw e
    }
  }

  /** The repository's status, parsed (E2B's GitStatus). */
  async status(path, opts = {}) {
    const r = await this.#git(['status', '--porcelain=1', '--branch', '-z'], path, opts)
    return parseStatus(r.stdout)
  }

  /** The local branches and which one is checked out. */
  async branches(path, opts = {}) {
    const r = await this.#git(['branch', '--list', '--format=%(HEAD)%00%(refname)'], path, opts)
    return parseBranches(r.stdout)
  }

  /** Creates branch `branch` at HEAD and checks it out. */
  async createBranch(path, branch, opts = {}) {
    return this.#git(['checkout', '-b', branchName(branch)], path, opts)
  }

  /** Checks out `branch` (a remote's branch of that name becomes a local tracking one). */
  async checkoutBranch(path, branch, opts = {}) {
    // The `--` makes git read it as a branch, never as a file to restore.
    return this.#git(['checkout', branchName(branch), '--'], path, opts)
  }

  /** Deletes `branch` (`-d`; `-D` with `force`). */
  async deleteBranch(path, branch, opts = {}) {
    opts = opts ?? {}
    return this.#git(['branch', opts.force ? '-D' : '-d', '--', branchName(branch)], path, opts)
  }

  /** Stages `files`, or with none every change (`-A`; `.` when `all` is false). */
  async add(path, opts = {}) {
    opts = opts ?? {}
    const files = opts.files == null ? [] : paths(opts.files, 'files')
    const args = files.length > 0 ? ['--', ...files] : [opts.all === false ? '.' : '-A']
    return this.#git(['add', ...args], path, opts)
  }

  /** Commits what is staged with `message` (author from the options, else git's config). */
  async commit(path, message, opts = {}) {
    opts = opts ?? {}
    if (typeof message !== 'string' || message.includes('\0'))
      throw new InvalidArgumentError('message must be a string with no NUL byte')
    const pre = []
    if (opts.authorName) pre.push('-c', `user.name=${credential(opts.authorName, 'authorName')}`)
    if (opts.authorEmail) pre.push('-c', `user.email=${credential(opts.authorEmail, 'authorEmail')}`)
    const args = ['commit', '-m', message]
    if (opts.allowEmpty) args.push('--allow-empty')
    return this.#git(args, path, opts, pre)
  }

  /** `git reset [--mode] [target] [-- paths]`. */
  async reset(path, opts = {}) {
    opts = opts ?? {}
    const { mode, target } = opts
    if (mode != null && !RESET_MODES.includes(mode))
      throw new InvalidArgumentError(`Reset mode must be one of ${RESET_MODES.join(', ')}.`)
    const args = ['reset']
    if (mode) args.push(`--${mode}`)
    if (target != null) args.push(word(target, 'target'))
    const files = opts.paths == null ? [] : paths(opts.paths, 'paths')
    if (files.length > 0) args.push('--', ...files)
    return this.#git(args, path, opts)
  }

  /** `git restore`: the working tree by default; `staged` unstages (only, unless `worktree`). */
  async restore(path, opts) {
    if (!opts || !Array.isArray(opts.paths) || opts.paths.length === 0)
      throw new InvalidArgumentError('At least one path is required.')
    const files = paths(opts.paths, 'paths')
    let { staged, worktree } = opts
    if (staged === undefined && worktree === undefined) worktree = true
    else if (worktree === undefined) worktree = !staged
    else if (staged === undefined) staged = false
    if (!staged && !worktree) throw new InvalidArgumentError('At least one of staged or worktree must be true.')
    const args = ['restore']
    if (worktree) args.push('--worktree')
    if (staged) args.push('--staged')
    if (opts.source != null) args.push(`--source=${word(opts.source, 'source')}`)
    return this.#git([...args, '--', ...files], path, opts)
  }

  /** The one remote credentials go to: `remote`, else the repository's only one. */
  async #remoteFor(path, remote, opts) {
    if (remote) return word(remote, 'remote')
    const names = (await this.#git(['remote'], path, opts)).stdout.split('\n').filter(Boolean)
    if (names.length === 1) return names[0]
    throw new InvalidArgumentError(
      'Remote is required when using username/password and the repository has multiple remotes.',
    )
  }

  /** Runs push or pull (`args(remote)` its arguments), with one-command credentials if given. */
  async #exchange(action, path, opts, args) {
    const { username, password } = opts
    const withCreds = checkCredentials(username, password, action)
    try {
      if (!withCreds) return await this.#git(args(opts.remote), path, opts)
      const remote = await this.#remoteFor(path, opts.remote, opts)
      const url = (await this.#git(['remote', 'get-url', '--', remote], path, opts)).stdout.trim()
      return await this.#withCredentials(url, username, password, opts, (pre) =>
        this.#git(args(remote), path, opts, pre),
      )
    } catch (e) {
      throw classify(e, action, Boolean(username) && !password)
    }
  }

  /** Pushes; to `remote`/`branch` when given (then `setUpstream`, default true, tracks it). */
  async push(path, opts = {}) {
    opts = opts ?? {}
    const { branch, setUpstream = true } = opts
    if (opts.remote != null) word(opts.remote, 'remote')
    if (branch != null) word(branch, 'branch')
    return this.#exchange('push', path, opts, (remote) => [
      'push',
      ...(setUpstream && remote ? ['--set-upstream'] : []),
      ...(remote ? [remote] : []),
      ...(branch ? [branch] : []),
    ])
  }

  /** Pulls from the upstream, or from `remote`/`branch` when given. */
  async pull(path, opts = {}) {
    opts = opts ?? {}
    const { branch } = opts
    if (opts.remote != null) word(opts.remote, 'remote')
    if (branch != null) word(branch, 'branch')
    checkCredentials(opts.username, opts.password, 'pull') // its argument errors come first, as in E2B
    if (!opts.remote && !branch && !(await this.#hasUpstream(path, opts))) throw upstreamError('pull')
    return this.#exchange('pull', path, opts, (remote) => [
      'pull',
      ...(remote ? [remote] : []),
      ...(branch ? [branch] : []),
    ])
  }

  async #hasUpstream(path, opts) {
    try {
      const r = await this.#git(['rev-parse', '--abbrev-ref', '--symbolic-full-name', '@{upstream}'], path, opts)
      return r.stdout.trim() !== ''
    } catch (e) {
      if (e instanceof CommandExitError) return false
      throw e
    }
  }

  /** Sets `key` to `value` in the scope's config (global by default; local needs `path`). */
  async setConfig(key, value, opts = {}) {
    if (!key) throw new InvalidArgumentError('Git config key is required.')
    text(key, 'key')
    if (typeof value !== 'string' || value.includes('\0'))
      throw new InvalidArgumentError(`value must be a string with no NUL byte, got ${typeof value}`)
    const { flag, repo } = scopeOf(opts)
    return this.#git(['config', flag, '--', key, value], repo, opts)
  }

  /** The value of `key` in the scope's config; undefined when it is not set there. */
  async getConfig(key, opts = {}) {
    if (!key) throw new InvalidArgumentError('Git config key is required.')
    text(key, 'key')
    const { flag, repo } = scopeOf(opts)
    try {
      const v = (await this.#git(['config', flag, '--get', '--', key], repo, opts)).stdout.trim()
      return v || undefined
    } catch (e) {
      // git config exits 1 for a key that is not set.
      if (e instanceof CommandExitError && e.exitCode === 1) return undefined
      throw e
    }
  }

  /** Stores username/password for `protocol://host` (https://github.com by default) in the user's
   * ~/.git-credentials, plain text, and makes `store` the global credential helper. */
  async dangerouslyAuthenticate(opts) {
    const { username, password } = opts ?? {}
    if (!username || !password)
      throw new InvalidArgumentError('Both username and password are required to authenticate git.')
    const protocol = credential((opts.protocol ?? 'https').trim(), 'protocol')
    const host = credential((opts.host ?? 'github.com').trim(), 'host')
    const input = credentialInput(
      { protocol, host },
      credential(username, 'username'),
      credential(password, 'password'),
    )
    await this.#git(['config', '--global', 'credential.helper', 'store'], undefined, opts)
    return this.#feed(['git', 'credential', 'approve'], input, opts)
  }

  /** Sets user.name and user.email (global scope by default). */
  async configureUser(name, email, opts = {}) {
    if (!name || !email) throw new InvalidArgumentError('Both name and email are required.')
    const scoped = { ...opts, scope: opts?.scope ?? 'global' }
    await this.setConfig('user.name', name, scoped)
    return this.setConfig('user.email', email, scoped)
  }
}

module.exports = { Git }
