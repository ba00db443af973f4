'use strict'
// doctor's findings, one function per check: each takes what was gathered (kern's own output, the
// host's facts, the box's outcome) and returns `{ id, status, why, fix? }`. No I/O here but the
// agent lookup, so the logic is testable from data.

const { fixFor } = require('../host/fixes.js')

const ok = (id, why) => ({ id, status: 'ok', why })
const warn = (id, why, fix) => ({ id, status: 'warn', why, ...(fix ? { fix } : {}) })
const fail = (id, why, fix) => ({ id, status: 'fail', why, ...(fix ? { fix } : {}) })

const INSTALL_KERN =
  'install kern (https://github.com/getkern/kern) and put it on PATH, or point KERN_BIN at it: export KERN_BIN=/path/to/kern'

function kernCheck(located, version) {
  if (located.error) {
    const fix =
      located.from === 'KERN_BIN'
        ? 'point KERN_BIN at the kern binary (export KERN_BIN=/path/to/kern), or unset it to use the `kern` on PATH'
        : INSTALL_KERN
    return fail('kern', located.error, fix)
  }
  if (version.code !== 0) {
    const said =
      (version.stderr || version.stdout).trim().split('\n')[0] ||
      (version.timedOut ? 'no answer in time' : 'it did not run')
    return fail(
      'kern',
      `${located.path} --version failed: ${said}`,
      `reinstall kern for this machine (${process.arch}); ${INSTALL_KERN}`,
    )
  }
  const v = version.stdout.trim().split('\n')[0]
  return ok('kern', `${v} at ${located.path} (from $${located.from})`)
}

/** docker.io/library/python:3.12-slim, localhost/python:3.12-slim and python:3.12-slim are one. */
function imageKey(ref) {
  let r = ref.replace(/^(docker\.io|index\.docker\.io|localhost)\//, '').replace(/^library\//, '')
  if (!/[:@][^/]*$/.test(r)) r += ':latest'
  return r
}

function imagesCheck(listed, image) {
  if (listed === null) {
    return warn(
      'images',
      `could not list kern's cached images (\`kern images --json\` gave no list); ${image} is pulled on first use`,
    )
  }
  if (listed.some((i) => imageKey(i) === imageKey(image))) return ok('images', `${image} (the default image) is cached`)
  return warn(
    'images',
    `${image} (the default image) is not cached: the first box pulls it from its registry, which needs the network`,
    `kern pull ${image} where a registry is reachable, or kern load -i IMAGE.tar (a docker save archive)`,
  )
}

function agentCheck(agentPath) {
  try {
    const p = agentPath()
    return ok('agent', `the machine agent is at ${p}`)
  } catch (e) {
    return warn(
      'agent',
      `no machine agent binary, so sbx.machine() cannot start: ${e.message.split(';')[0]}`,
      'reinstall kern-sandbox with its optional dependencies (the platform package holds the agent), ' +
        'or in a checkout run `npm run build`; KERN_SANDBOX_AGENT may point at one',
    )
  }
}

const USERNS_LINE = /user namespace|apparmor|max_user_namespaces/i

/** User namespaces: kern's doctor lines when it has them, else the sysctls read here. */
function usernsCheck(kernDoctor, sysctls, environment) {
  const lines = kernDoctor ? kernDoctor.findings.filter((f) => USERNS_LINE.test(f.text)) : []
  if (lines.length) {
    const bad = lines.filter((l) => l.mark !== 'ok')
    if (!bad.length) return ok('userns', `kern doctor: ${lines.map((l) => l.text).join('; ')}`)
    const code = bad.some((l) => /apparmor/i.test(l.text)) ? 'userns_restricted' : 'userns_disabled'
    const status = bad.some((l) => l.mark === 'fail') ? 'fail' : 'warn'
    return {
      id: 'userns',
      status,
      why: `kern doctor: ${bad.map((l) => l.text).join('; ')}`,
      fix: fixFor(code, environment),
    }
  }
  const { unprivilegedUsernsClone: clone, maxUserNamespaces: max, apparmorRestrict } = sysctls
  if (clone === 0)
    return fail(
      'userns',
      'kernel.unprivileged_userns_clone is 0: unprivileged user namespaces are off',
      fixFor('userns_disabled', environment),
    )
  if (max === 0)
    return fail(
      'userns',
      'user.max_user_namespaces is 0: no user namespace can be created',
      fixFor('userns_disabled', environment),
    )
  if (apparmorRestrict === 1 && process.getuid() !== 0) {
    return fail(
      'userns',
      'kernel.apparmor_restrict_unprivileged_userns is 1: AppArmor refuses unprivileged user namespaces',
      fixFor('userns_restricted', environment),
    )
  }
  return ok('userns', `unprivileged user namespaces allowed (sysctls read here: max_user_namespaces=${max ?? 'n/a'})`)
}

/** The seccomp filter on this process. A filter is only a finding when the box did not start
 * because of it: a profile that allows kern's calls is fine. */
function seccompCheck(seccomp, environment, box) {
  if (!seccomp.mode) return ok('seccomp', 'no seccomp filter on this process')
  const on = `a seccomp filter is on this process (${seccomp.filters ?? '?'} filter(s))`
  if (box.cause === 'seccomp_blocked')
    return fail(
      'seccomp',
      `${on} and it refuses kern's namespace and mount calls`,
      fixFor('seccomp_blocked', environment),
    )
  if (box.ran) return ok('seccomp', `${on}; it lets kern start a box`)
  return warn(
    'seccomp',
    `${on}; a container engine's default profile refuses some of kern's calls (Docker: unshare, mount, pivot_root; podman: sethostname)`,
    fixFor('seccomp_blocked', environment),
  )
}

function procCheck(masks, environment, box) {
  if (!masks.length) return ok('proc', '/proc is not masked: kern can mount a fresh procfs')
  const list = `${masks.slice(0, 4).join(', ')}${masks.length > 4 ? `, ... (${masks.length})` : ''}`
  if (box.ran) return ok('proc', `/proc has mounts over ${list}, and a box still started`)
  return fail(
    'proc',
    `/proc is masked (mounts over ${list}): the kernel refuses the fresh procfs kern mounts in every box`,
    fixFor('proc_masked', environment),
  )
}

function apparmorCheck(profile, environment, box) {
  if (!profile) return ok('apparmor', 'this process is not confined by an AppArmor profile')
  if (box.cause === 'apparmor_blocked')
    return fail(
      'apparmor',
      `confined by ${profile}, which denies kern's mounts`,
      fixFor('apparmor_blocked', environment),
    )
  if (box.ran) return ok('apparmor', `confined by ${profile}; it lets kern start a box`)
  return warn(
    'apparmor',
    `confined by ${profile}: a container engine's default profile denies mount`,
    fixFor('apparmor_blocked', environment),
  )
}

const CGROUP_FIX = {
  host: 'boot with the unified cgroup v2 hierarchy (systemd.unified_cgroup_hierarchy=1) and let systemd delegate memory, pids and cpu to you (Delegate=yes, the default for user@.service)',
  docker:
    "on a cgroup v2 host, run the container with --cgroupns=private (the default there); kern then caps boxes within the container's own limits",
  podman:
    "on a cgroup v2 host, run the container with --cgroupns=private (the default there); kern then caps boxes within the container's own limits",
  kubernetes:
    "pods get no delegated cgroup: the pod's resources.limits bound all its boxes together; per-box caps stay best-effort",
  container: 'on a cgroup v2 host, give the container its own cgroup namespace (Docker/podman: --cgroupns=private)',
}

/** Resource caps: kern's own cgroup line when it has one, else the delegation read here. */
function cgroupCheck(kernDoctor, cg, environment) {
  const fix = CGROUP_FIX[environment] ?? CGROUP_FIX.container
  const line = kernDoctor && kernDoctor.findings.find((f) => /cgroup/i.test(f.text) && f.mark !== 'ok')
  const notEnforced = ': boxes run, but memoryMb, pids and cpus are not enforced (requireLimits refuses to start)'
  if (line) return warn('cgroup', `kern doctor: ${line.text}${notEnforced}`, fix)
  if (!cg.v2) return warn('cgroup', `no cgroup v2 unified hierarchy here${notEnforced}`, fix)
  const missing = ['memory', 'pids', 'cpu'].filter((c) => !cg.controllers.includes(c))
  if (missing.length)
    return warn('cgroup', `cgroup ${cg.path} lacks the ${missing.join(', ')} controller(s)${notEnforced}`, fix)
  if (!cg.writable) return warn('cgroup', `cgroup ${cg.path} is not delegated to this user${notEnforced}`, fix)
  return ok('cgroup', `cgroup ${cg.path} is delegated with memory, pids and cpu`)
}

function scratchCheck(dir, type, environment) {
  if (!type.overlay) return ok('scratch', `kern's scratch (${dir}) is not on overlayfs`)
  const fix =
    environment === 'kubernetes'
      ? 'mount an emptyDir (medium: Memory, or disk) at /run/kern and set env XDG_RUNTIME_DIR=/run/kern'
      : environment === 'host'
        ? 'export XDG_RUNTIME_DIR to a directory you own on tmpfs or a disk filesystem'
        : "give kern a scratch dir off the container's overlay: --tmpfs /run/kern:rw,exec,mode=700 -e XDG_RUNTIME_DIR=/run/kern (or a volume there)"
  return warn(
    'scratch',
    `kern's scratch (${dir}) is on overlayfs, where a box's overlay upper dir cannot sit: kern falls back to /dev/shm, capped at 64 MiB in a default container`,
    fix,
  )
}

function runtimeDirCheck(rd, kernRuntime) {
  if (!rd.set) return ok('runtime-dir', `XDG_RUNTIME_DIR is unset: kern uses ${kernRuntime ?? '/run/user/<uid>/kern'}`)
  if (rd.usable) return ok('runtime-dir', `XDG_RUNTIME_DIR=${rd.dir}`)
  return fail(
    'runtime-dir',
    `XDG_RUNTIME_DIR=${rd.dir} is not a directory this user owns and can write${rd.error ? ` (${rd.error})` : ''}`,
    'point XDG_RUNTIME_DIR at a directory you own (mode 0700), or unset it',
  )
}

function bubblewrapCheck(bwrap) {
  if (bwrap) return ok('bubblewrap', `bwrap at ${bwrap} (only the project's test stand-in uses it)`)
  return warn(
    'bubblewrap',
    "no bwrap: only developers running the project's test stand-in need it",
    'apt install bubblewrap',
  )
}

/** kern's own verdict and any failure of its doctor that no check above covers. */
function kernDoctorCheck(kernDoctor) {
  if (!kernDoctor)
    return warn('kern-doctor', 'this kern has no `kern doctor`; the checks here read the host themselves')
  const other = kernDoctor.findings.filter(
    (f) => f.mark === 'fail' && !USERNS_LINE.test(f.text) && !/cgroup/i.test(f.text),
  )
  if (other.length) {
    return fail(
      'kern-doctor',
      `kern doctor: ${other.map((f) => f.text).join('; ')}`,
      other
        .map((f) => f.hint)
        .filter(Boolean)
        .join('; ') || undefined,
    )
  }
  return ok('kern-doctor', kernDoctor.verdict ?? 'kern doctor found no failure')
}

function boxCheck(box, environment, image) {
  if (box.ran) return ok('box', `a box ran \`true\` in ${image} in ${box.ms} ms`)
  if (box.cause) return fail('box', box.why, fixFor(box.cause, environment))
  return fail('box', box.why, box.fix ?? "the failed checks above name what to change; kern's message is in `why`")
}

module.exports = {
  kernCheck,
  imagesCheck,
  imageKey,
  agentCheck,
  usernsCheck,
  seccompCheck,
  procCheck,
  apparmorCheck,
  cgroupCheck,
  scratchCheck,
  runtimeDirCheck,
  bubblewrapCheck,
  kernDoctorCheck,
  boxCheck,
}
