'use strict'
// Facts about the host this process runs on, read from /proc and /sys: cheap (a few file reads, no
// process started), so both doctor() and the diagnosis of a failed box start use them. Each
// function returns data; lib/doctor/checks.js turns it into findings.

const fs = require('node:fs')
const path = require('node:path')

function read(p) {
  try {
    return fs.readFileSync(p, 'utf8')
  } catch {
    return null
  }
}

/** Where this process runs, as far as the fixes differ: 'kubernetes', 'podman', 'docker',
 * 'container' (another engine) or 'host'. A pod is named first: its container also looks like
 * Docker's or podman's. /.dockerenv alone is not enough: VMs and hosts built from a Docker image
 * keep it; a Docker container also has its root on overlayfs or a docker cgroup. */
function environment(env = process.env) {
  if (env.KUBERNETES_SERVICE_HOST || fs.existsSync('/var/run/secrets/kubernetes.io')) return 'kubernetes'
  if (fs.existsSync('/run/.containerenv')) return 'podman'
  if (fs.existsSync('/.dockerenv') && (rootOnOverlay() || /docker/.test(read('/proc/self/cgroup') ?? '')))
    return 'docker'
  if (env.container || read('/proc/1/environ')?.includes('container=')) return 'container'
  return 'host'
}

function rootOnOverlay() {
  const root = (read('/proc/self/mountinfo') ?? '').split('\n').findLast((l) => l.split(' ')[4] === '/')
  return Boolean(root && / - overlay /.test(root))
}

/** The seccomp mode of this process (0 none, 1 strict, 2 filter) and its filter count. */
function seccomp() {
  const status = read('/proc/self/status') ?? ''
  const mode = /^Seccomp:\s*(\d+)/m.exec(status)
  const filters = /^Seccomp_filters:\s*(\d+)/m.exec(status)
  return { mode: mode ? Number(mode[1]) : null, filters: filters ? Number(filters[1]) : null }
}

/** Mounts over paths inside /proc: Docker's and podman's masks (a tmpfs or /dev/null over
 * /proc/kcore, /proc/keys, ..., read-only binds of /proc/sys, /proc/bus, ...). While any is there
 * the kernel refuses a fresh procfs in a new user namespace (mount_too_revealing), which kern
 * mounts in every box. */
function procMasks() {
  const info = read('/proc/self/mountinfo') ?? ''
  const masked = []
  for (const line of info.split('\n')) {
    const mountPoint = line.split(' ')[4]
    if (mountPoint && mountPoint.startsWith('/proc/')) masked.push(unescape(mountPoint))
  }
  return masked
}

/** mountinfo escapes space, tab, newline and backslash as octal. */
function unescape(s) {
  return s.replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8)))
}

/** The unprivileged user namespace sysctls; null where the kernel has no such knob. */
function usernsSysctls() {
  const num = (p) => {
    const v = read(p)
    return v === null ? null : Number(v.trim())
  }
  return {
    unprivilegedUsernsClone: num('/proc/sys/kernel/unprivileged_userns_clone'),
    maxUserNamespaces: num('/proc/sys/user/max_user_namespaces'),
    apparmorRestrict: num('/proc/sys/kernel/apparmor_restrict_unprivileged_userns'),
  }
}

/** The AppArmor profile confining this process ('docker-default (enforce)', ...), or null when
 * none (unconfined, or no AppArmor). */
function apparmorProfile() {
  const label = (read('/proc/self/attr/apparmor/current') ?? read('/proc/self/attr/current') ?? '').trim()
  return !label || label === 'unconfined' ? null : label.replace(/\0/g, '')
}

/** cgroup v2 as this process sees it: whether the unified hierarchy is the only one, the
 * controllers its own cgroup has, and whether it may create child cgroups there. */
function cgroup() {
  const unifiedOnly = fs.existsSync('/sys/fs/cgroup/cgroup.controllers')
  const own = /^0::(.*)$/m.exec(read('/proc/self/cgroup') ?? '')
  if (!unifiedOnly || !own) return { v2: false, path: null, controllers: [], writable: false }
  const dir = path.join('/sys/fs/cgroup', own[1])
  const controllers = (read(path.join(dir, 'cgroup.controllers')) ?? '').trim().split(/\s+/).filter(Boolean)
  let writable = false
  try {
    fs.accessSync(dir, fs.constants.W_OK)
    writable = true
  } catch {
    // not delegated to us
  }
  return { v2: true, path: own[1], controllers, writable }
}

const OVERLAYFS_MAGIC = 0x794c7630

/** The filesystem type of `p`, or of its nearest existing parent: 'overlayfs', 'tmpfs', ... */
function fsType(p) {
  if (typeof fs.statfsSync !== 'function') return { path: p, overlay: null } // Node < 18.15
  for (let dir = p; ; dir = path.dirname(dir)) {
    try {
      const { type } = fs.statfsSync(dir)
      return { path: dir, overlay: type === OVERLAYFS_MAGIC }
    } catch {
      if (dir === path.dirname(dir)) return { path: dir, overlay: false }
    }
  }
}

/** $XDG_RUNTIME_DIR: unset, or the directory and whether it is usable (ours, 0700, writable). */
function runtimeDir(env = process.env) {
  const dir = env.XDG_RUNTIME_DIR
  if (!dir) return { set: false }
  try {
    const st = fs.statSync(dir)
    fs.accessSync(dir, fs.constants.W_OK | fs.constants.X_OK)
    return { set: true, dir, usable: st.isDirectory() && st.uid === process.getuid() }
  } catch (e) {
    return { set: true, dir, usable: false, error: e.code }
  }
}

/** The first executable `name` on $PATH, or null. */
function onPath(name, env = process.env) {
  for (const dir of (env.PATH ?? '').split(':')) {
    if (!dir) continue
    const p = path.join(dir, name)
    try {
      fs.accessSync(p, fs.constants.X_OK)
      if (fs.statSync(p).isFile()) return p
    } catch {
      // not here
    }
  }
  return null
}

module.exports = {
  environment,
  seccomp,
  procMasks,
  usernsSysctls,
  apparmorProfile,
  cgroup,
  fsType,
  runtimeDir,
  onPath,
}
