'use strict'
// kern-sandbox/e2b's sandbox.git: E2B's Git module as git commands in the sandbox's machine. All
// offline: remotes are bare repositories under /tmp (file:// URLs) and, for credentials, a small
// HTTP server on the machine's loopback that wants Basic auth.

const test = require('node:test')
const assert = require('node:assert/strict')
require('./helpers')
const {
  Sandbox,
  CommandExitError,
  InvalidArgumentError,
  GitAuthError,
  GitUpstreamError,
  AuthenticationError,
  SandboxError,
} = require('kern-sandbox/e2b')
const { waitFor } = require('./helpers')

let sbx
let git
test.before(async () => {
  sbx = await Sandbox.create()
  git = sbx.git
  await git.configureUser('Test User', 'test@example.com')
})
test.after(async () => {
  await sbx.kill()
})

const sh = async (cmd) => (await sbx.commands.run(cmd)).stdout

/** A repository `dir` with one commit of `a.txt` on branch main. */
async function repoWithCommit(dir) {
  await git.init(dir, { initialBranch: 'main' })
  await sbx.files.write(`${dir}/a.txt`, 'one\n')
  await git.add(dir)
  await git.commit(dir, 'first')
}

test('init, configureUser, add, commit: a repository with the commit, by the configured user', async () => {
  assert.equal(await git.getConfig('user.name'), 'Test User')
  assert.equal(await git.getConfig('user.email'), 'test@example.com')
  const r = await git.init('basic', { initialBranch: 'trunk' })
  assert.equal(r.exitCode, 0)
  assert.match(r.stdout, /Initialized empty Git repository in \/home\/user\/basic\/\.git\//)
  const empty = await git.status('basic')
  assert.equal(empty.currentBranch, 'trunk', 'a branch with no commit yet is still named')
  assert.equal(empty.isClean, true)
  await sbx.files.write('basic/a.txt', 'one\n')
  await git.add('basic')
  const c = await git.commit('basic', 'first commit')
  assert.match(c.stdout, /\[trunk \(root-commit\) [0-9a-f]+\] first commit/)
  assert.equal(await sh('git -C basic log -1 --format=%an%n%ae%n%s'), 'Test User\ntest@example.com\nfirst commit\n')
  await git.commit('basic', 'empty one', { allowEmpty: true, authorName: 'Other', authorEmail: 'o@example.com' })
  assert.equal(await sh('git -C basic log -1 --format=%an/%ae/%s'), 'Other/o@example.com/empty one\n')
  await assert.rejects(git.commit('basic', 'nothing to commit'), CommandExitError)
})

test('status: staged, unstaged, untracked, deleted and renamed files, parsed as E2B does', async () => {
  await repoWithCommit('st')
  await sbx.files.write('st/b.txt', 'b\n')
  await sh('cd st && git add b.txt && git mv a.txt c.txt && echo more >> c.txt && echo new > "u v.txt"')
  const s = await git.status('st')
  const by = Object.fromEntries(s.fileStatus.map((f) => [f.name, f]))
  assert.deepEqual(by['b.txt'], {
    name: 'b.txt',
    status: 'added',
    indexStatus: 'A',
    workingTreeStatus: ' ',
    staged: true,
  })
  assert.equal(by['c.txt'].status, 'renamed')
  assert.equal(by['c.txt'].renamedFrom, 'a.txt')
  assert.equal(by['c.txt'].workingTreeStatus, 'M', 'renamed, then changed again')
  assert.deepEqual(by['u v.txt'], {
    name: 'u v.txt',
    status: 'untracked',
    indexStatus: '?',
    workingTreeStatus: '?',
    staged: false,
  })
  assert.equal(s.currentBranch, 'main')
  assert.equal(s.detached, false)
  assert.equal(s.totalCount, 3)
  assert.equal(s.stagedCount, 2)
  assert.equal(s.unstagedCount, 1)
  assert.equal(s.untrackedCount, 1)
  assert.equal(s.hasStaged && s.hasUntracked && s.hasChanges && !s.isClean && !s.hasConflicts, true)
  await git.commit('st', 'second')
  await sh('cd st && echo changed > b.txt && rm c.txt')
  const after = await git.status('st')
  const names = Object.fromEntries(after.fileStatus.map((f) => [f.name, [f.status, f.staged]]))
  assert.deepEqual(names, {
    'b.txt': ['modified', false],
    'c.txt': ['deleted', false],
    'u v.txt': ['untracked', false],
  })
  await sh('git -C st checkout --detach -q HEAD')
  const detached = await git.status('st')
  assert.equal(detached.detached, true)
  assert.equal(detached.currentBranch, undefined)
})

test('branches, createBranch, checkoutBranch, deleteBranch', async () => {
  await repoWithCommit('br')
  assert.deepEqual(await git.branches('br'), { branches: ['main'], currentBranch: 'main' })
  await git.createBranch('br', 'feature/x')
  assert.deepEqual(await git.branches('br'), { branches: ['feature/x', 'main'], currentBranch: 'feature/x' })
  await git.checkoutBranch('br', 'main')
  assert.equal((await git.status('br')).currentBranch, 'main')
  await git.createBranch('br', 'wip')
  await sbx.files.write('br/w.txt', 'w\n')
  await git.add('br', { files: ['w.txt'] })
  await git.commit('br', 'wip work')
  await git.checkoutBranch('br', 'main')
  await assert.rejects(git.deleteBranch('br', 'wip'), (e) => {
    assert.ok(e instanceof CommandExitError)
    assert.match(e.stderr, /not fully merged/)
    return true
  })
  await git.deleteBranch('br', 'wip', { force: true })
  await git.deleteBranch('br', 'feature/x')
  assert.deepEqual((await git.branches('br')).branches, ['main'])
})

test('a bad ref: a name git would refuse is InvalidArgumentError, a missing one CommandExitError', async () => {
  await repoWithCommit('refs')
  for (const bad of ['-D', '--orphan=x', 'a..b', 'a b', 'x.lock', 'a~1', 'a:b', 'end/', '@', '', 'a\nb']) {
    await assert.rejects(git.createBranch('refs', bad), InvalidArgumentError, JSON.stringify(bad))
  }
  await assert.rejects(git.checkoutBranch('refs', 'no-such-branch'), (e) => {
    assert.ok(e instanceof CommandExitError)
    assert.notEqual(e.exitCode, 0)
    assert.match(e.stderr, /no-such-branch/)
    return true
  })
  // A file of that name is not restored in its place: only branches are checked out.
  await sbx.files.write('refs/a.txt', 'edited\n')
  await assert.rejects(git.checkoutBranch('refs', 'a.txt'), CommandExitError)
  assert.equal(await sbx.files.read('refs/a.txt'), 'edited\n')
  await assert.rejects(git.reset('refs', { target: 'no-such-ref', mode: 'hard' }), CommandExitError)
  await assert.rejects(git.reset('refs', { mode: 'sideways' }), /Reset mode must be one of soft, mixed, hard/)
  await assert.rejects(git.status('/tmp'), CommandExitError, 'not a repository')
})

test('arguments reach git as they are: no shell, no options smuggled in a URL or name', async () => {
  const dir = `it's $(touch injected) \`id\``
  await git.init(dir, { initialBranch: 'main' })
  assert.equal(await sh('ls -d /home/user/it*'), `/home/user/${dir}\n`)
  await sbx.files.write(`${dir}/f.txt`, 'x\n')
  await git.add(dir, { files: ['f.txt'] })
  await git.commit(dir, "message with 'quotes' and $(touch /tmp/injected)")
  assert.equal(
    await sbx.commands.run('git log -1 --format=%s', { cwd: `/home/user/${dir}` }).then((r) => r.stdout),
    "message with 'quotes' and $(touch /tmp/injected)\n",
  )
  await assert.rejects(git.clone('--upload-pack=touch /tmp/injected', { path: 'x' }), InvalidArgumentError)
  await assert.rejects(git.remoteAdd(dir, '--mirror', 'file:///tmp/x'), InvalidArgumentError)
  await assert.rejects(git.reset(dir, { target: '--hard' }), InvalidArgumentError)
  assert.equal(await sh('test -e injected || test -e /tmp/injected && echo yes || echo no'), 'no\n')
})

test('remoteAdd and remoteGet: undefined for no such remote, overwrite replaces the URL', async () => {
  await repoWithCommit('rem')
  assert.equal(await git.remoteGet('rem', 'origin'), undefined)
  await git.remoteAdd('rem', 'origin', 'file:///tmp/one.git')
  assert.equal(await git.remoteGet('rem', 'origin'), 'file:///tmp/one.git')
  await assert.rejects(git.remoteAdd('rem', 'origin', 'file:///tmp/two.git'), CommandExitError)
  await git.remoteAdd('rem', 'origin', 'file:///tmp/two.git', { overwrite: true })
  assert.equal(await git.remoteGet('rem', 'origin'), 'file:///tmp/two.git')
  await git.init('/tmp/three.git', { bare: true })
  await sh('git -C rem push -q /tmp/three.git main')
  await git.remoteAdd('rem', 'origin', 'file:///tmp/three.git', { overwrite: true, fetch: true })
  assert.equal(await git.remoteGet('rem', 'origin'), 'file:///tmp/three.git')
  assert.equal(await sh('git -C rem rev-parse origin/main'), await sh('git -C rem rev-parse main'), 'fetched')
  await git.remoteAdd('rem', 'other', 'file:///tmp/three.git', { fetch: true })
  assert.equal(await sh('git -C rem rev-parse other/main'), await sh('git -C rem rev-parse main'))
  await assert.rejects(git.remoteAdd('rem', '', 'x'), /Both remote name and URL are required/)
  await assert.rejects(git.remoteGet('rem', ''), /Remote name is required/)
  await assert.rejects(git.remoteGet('/tmp', 'origin'), CommandExitError, 'not a repository')
})

test('clone a local bare repository; push and pull between two clones; ahead/behind', async () => {
  await git.init('/tmp/shared.git', { bare: true, initialBranch: 'main' })
  await repoWithCommit('seed')
  await git.remoteAdd('seed', 'origin', 'file:///tmp/shared.git')
  await assert.rejects(git.push('seed'), (e) => {
    assert.ok(e instanceof GitUpstreamError && e instanceof SandboxError)
    assert.match(e.message, /^Git push failed because no upstream branch is configured/)
    assert.ok(e.cause instanceof CommandExitError, 'the failed git is its cause')
    return true
  })
  await git.push('seed', { remote: 'origin', branch: 'main' })
  assert.equal((await git.status('seed')).upstream, 'origin/main', 'setUpstream defaults to true')

  const r = await git.clone('file:///tmp/shared.git', { path: 'one' })
  assert.equal(r.exitCode, 0)
  await git.clone('file:///tmp/shared.git', { path: '/home/user/two', branch: 'main', depth: 1 })
  assert.equal(await sbx.files.read('two/a.txt'), 'one\n')
  assert.equal(await git.remoteGet('one', 'origin'), 'file:///tmp/shared.git')

  await sbx.files.write('one/a.txt', 'one\ntwo\n')
  await git.add('one')
  await git.commit('one', 'from one')
  const ahead = await git.status('one')
  assert.deepEqual([ahead.currentBranch, ahead.upstream, ahead.ahead, ahead.behind], ['main', 'origin/main', 1, 0])
  await git.push('one')
  assert.equal((await git.status('one')).ahead, 0)

  await sh('git -C two fetch -q')
  const behind = await git.status('two')
  assert.deepEqual([behind.ahead, behind.behind], [0, 1])
  await git.pull('two')
  assert.equal(await sbx.files.read('two/a.txt'), 'one\ntwo\n')
  assert.equal((await git.status('two')).behind, 0)
  await git.pull('two', { remote: 'origin', branch: 'main' })
})

test('pull without an upstream is GitUpstreamError; with remote and branch it pulls', async () => {
  await git.init('/tmp/up.git', { bare: true, initialBranch: 'main' })
  await repoWithCommit('up1')
  await git.remoteAdd('up1', 'origin', 'file:///tmp/up.git')
  await git.push('up1', { remote: 'origin', branch: 'main', setUpstream: false })
  assert.equal((await git.status('up1')).upstream, undefined, 'setUpstream: false tracks nothing')
  await assert.rejects(git.pull('up1'), (e) => {
    assert.ok(e instanceof GitUpstreamError)
    assert.match(e.message, /^Git pull failed because no upstream branch is configured/)
    return true
  })
  await git.pull('up1', { remote: 'origin', branch: 'main' })
  await assert.rejects(
    git.pull('up1', { password: 'p' }),
    /Username is required when using a password or token for git pull/,
  )
})

test('reset and restore', async () => {
  await repoWithCommit('rs')
  await sbx.files.write('rs/a.txt', 'two\n')
  await git.add('rs')
  await git.commit('rs', 'second')
  await git.reset('rs', { mode: 'soft', target: 'HEAD~1' })
  let s = await git.status('rs')
  assert.deepEqual(
    s.fileStatus.map((f) => [f.name, f.indexStatus, f.staged]),
    [['a.txt', 'M', true]],
  )
  await git.reset('rs') // mixed: unstaged, the file keeps its change
  s = await git.status('rs')
  assert.deepEqual(
    s.fileStatus.map((f) => [f.name, f.workingTreeStatus, f.staged]),
    [['a.txt', 'M', false]],
  )
  await git.add('rs', { files: ['a.txt'] })
  await git.restore('rs', { paths: ['a.txt'], staged: true })
  assert.equal((await git.status('rs')).stagedCount, 0, 'staged alone unstages only')
  assert.equal(await sbx.files.read('rs/a.txt'), 'two\n')
  await git.restore('rs', { paths: ['.'] })
  assert.equal(await sbx.files.read('rs/a.txt'), 'one\n')
  assert.equal((await git.status('rs')).isClean, true)
  await sbx.files.write('rs/a.txt', 'three\n')
  await git.reset('rs', { mode: 'hard' })
  assert.equal(await sbx.files.read('rs/a.txt'), 'one\n')
  await sbx.files.write('rs/a.txt', 'four\n')
  await git.add('rs')
  await git.commit('rs', 'fourth')
  await git.restore('rs', { paths: ['a.txt'], source: 'HEAD~1' })
  assert.equal(await sbx.files.read('rs/a.txt'), 'one\n')
  assert.deepEqual(
    (await git.status('rs')).fileStatus.map((f) => [f.name, f.status, f.staged]),
    [['a.txt', 'modified', false]],
  )
  await assert.rejects(git.restore('rs', { paths: [] }), /At least one path is required/)
  await assert.rejects(git.restore('rs', { paths: ['a.txt'], staged: false, worktree: false }), InvalidArgumentError)
})

test('setConfig and getConfig: global by default, local with a path, undefined when unset', async () => {
  await repoWithCommit('cfg')
  await git.setConfig('pull.rebase', 'false')
  assert.equal(await git.getConfig('pull.rebase'), 'false')
  assert.match(await sbx.files.read('/home/user/.gitconfig'), /rebase = false/)
  await git.setConfig('core.editor', '-n vim', { scope: 'local', path: 'cfg' })
  assert.equal(await git.getConfig('core.editor', { scope: 'local', path: 'cfg' }), '-n vim')
  assert.equal(await git.getConfig('core.editor'), undefined, 'not in the global scope')
  assert.equal(await git.getConfig('no.such.key'), undefined)
  await assert.rejects(git.setConfig('a.b', 'c', { scope: 'local' }), /A repository path is required/)
  await assert.rejects(git.getConfig('a.b', { scope: 'everywhere' }), /scope must be one of: global, local, system/)
  await assert.rejects(git.setConfig('', 'x'), /Git config key is required/)
  await assert.rejects(git.configureUser('', 'e'), /Both name and email are required/)
})

// An HTTP git server on the machine's loopback (dumb protocol, served by Python) that answers only
// Basic alice:s3cret: what a private repository over HTTPS does, offline.
const SERVER = `
import functools, http.server, sys
WANT = 'Basic YWxpY2U6czNjcmV0'  # alice's, base64: no plain password in this file
class H(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        if self.headers.get('Authorization') != WANT:
            self.send_response(401)
            self.send_header('WWW-Authenticate', 'Basic realm="git"')
            self.send_header('Content-Length', '0')
            self.end_headers()
            return
        super().do_GET()
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), functools.partial(H, directory='/tmp/srv')).serve_forever()
`

test('credentials: GitAuthError without or with wrong ones; with the right ones a clone stores them nowhere', async (t) => {
  await repoWithCommit('/tmp/srv-src')
  await sh('git clone -q --bare /tmp/srv-src /tmp/srv/private.git && git -C /tmp/srv/private.git update-server-info')
  await sbx.files.write('/tmp/git-server.py', SERVER)
  const port = 20000 + Math.floor(Math.random() * 20000)
  const server = await sbx.commands.run(`exec python3 /tmp/git-server.py ${port}`, { background: true, timeoutMs: 0 })
  t.after(() => server.kill())
  const url = `http://127.0.0.1:${port}/private.git`
  const up = await waitFor(
    () =>
      sbx.commands.run(`python3 -c "import socket; socket.create_connection(('127.0.0.1', ${port}))"`).then(
        () => true,
        () => false,
      ),
    15_000,
  )
  assert.ok(up, 'the git server listens')

  await assert.rejects(git.clone(url, { path: 'p0' }), (e) => {
    assert.ok(e instanceof GitAuthError && e instanceof AuthenticationError)
    assert.equal(e.message, 'Git clone requires credentials for private repositories.')
    return true
  })
  await assert.rejects(git.clone(url, { path: 'p1', username: 'alice', password: 'wrong' }), GitAuthError)
  await assert.rejects(git.clone(url, { path: 'p1', username: 'alice' }), /requires a password\/token/)
  await assert.rejects(git.clone(url, { password: 's3cret' }), /Username is required/)
  await assert.rejects(
    git.clone('file:///tmp/srv/private.git', { path: 'p1', username: 'a', password: 'b' }),
    /Only http\(s\) Git URLs support username\/password credentials/,
  )

  // Every command git runs for it, and its environment, are free of the password.
  const seen = []
  const run = sbx.commands.run
  sbx.commands.run = function (cmd, opts) {
    seen.push(JSON.stringify([cmd, opts?.envs]))
    return run.call(this, cmd, opts)
  }
  try {
    await git.clone(url, { path: 'p2', username: 'alice', password: 's3cret' })
  } finally {
    delete sbx.commands.run
  }
  assert.ok(seen.some((c) => c.includes('credential-store')) && seen.some((c) => c.includes('clone')))
  assert.deepEqual(
    seen.filter((c) => c.includes('s3cret')),
    [],
  )
  assert.equal(await sbx.files.read('p2/a.txt'), 'one\n')
  assert.equal(await git.remoteGet('p2', 'origin'), url, 'no credentials in the remote URL')
  assert.equal(await sh('grep -rl s3cret /tmp /home/user 2>/dev/null || true'), '', 'none left in a file')
  await assert.rejects(sbx.commands.run('git -C p2 fetch', { envs: { GIT_TERMINAL_PROMPT: '0' } }), CommandExitError)
  await git.pull('p2', { username: 'alice', password: 's3cret' })

  // dangerouslyStoreCredentials: kept in the clone's .git/credentials, and later fetches use them.
  await git.clone(url, { path: 'p3', username: 'alice', password: 's3cret', dangerouslyStoreCredentials: true })
  assert.equal(await git.remoteGet('p3', 'origin'), url)
  assert.equal((await sbx.commands.run('git -C p3 fetch')).exitCode, 0)
  assert.match(await sh('cat p3/.git/credentials'), /alice:s3cret@127\.0\.0\.1/)

  // dangerouslyAuthenticate: the user's ~/.git-credentials and the global `store` helper.
  await git.dangerouslyAuthenticate({
    username: 'alice',
    password: 's3cret',
    host: `127.0.0.1:${port}`,
    protocol: 'http',
  })
  assert.equal(await git.getConfig('credential.helper'), 'store')
  assert.match(
    await sbx.files.read('/home/user/.git-credentials'),
    new RegExp(`http://alice:s3cret@127\\.0\\.0\\.1(%3a|:)${port}`),
  )
  await git.clone(url, { path: 'p4' })
  assert.equal(await sbx.files.read('p4/a.txt'), 'one\n')
  await assert.rejects(git.dangerouslyAuthenticate({ username: 'u' }), /Both username and password are required/)
  await assert.rejects(git.dangerouslyAuthenticate({ username: 'u', password: 'p\nhost=evil' }), InvalidArgumentError)
})
