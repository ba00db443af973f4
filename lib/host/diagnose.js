'use strict'
// Naming the cause of a box that did not start: kern's own error line says which step failed
// (`mount(proc) failed: Operation not permitted`, an unshare refused, ...), the host's facts
// (lib/host/facts.js) say why that step fails here. Both doctor() and a session's first
// startup_failed fault use it; it reads a few files and starts no process.

const host = require('./facts.js')
const { fixFor } = require('./fixes.js')

/** kern's words for a step the kernel refused: an errno, or its own "unavailable" for a user
 * namespace it could not create. */
const REFUSED =
  /operation not permitted|permission denied|EPERM|EACCES|os error (1|13)\b|unavailable|no space left|ENOSPC/i
const NAMESPACE_STEP = /unshare|clone|user namespace|userns|uid_map|gid_map|setgroups/i
const MOUNT_STEP = /\b(mount|umount2?|pivot_root|sethostname|setns)\b/i

/** What doctor and a fault say about a cause, given the facts that decided it. */
const CAUSES = {
  userns_disabled: () => 'unprivileged user namespaces are turned off on this kernel',
  userns_restricted: () =>
    "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1, Ubuntu 23.10+'s default)",
  seccomp_blocked: (f) =>
    `a seccomp filter on this process (${f.seccomp.filters ?? '?'} filter(s), e.g. a container engine's default ` +
    'profile) refuses the namespace and mount calls kern needs without CAP_SYS_ADMIN',
  proc_masked: (f) =>
    `/proc is masked here (${f.procMasks.slice(0, 3).join(', ')}${f.procMasks.length > 3 ? ', ...' : ''} ` +
    'are mounted over), so the kernel refuses the fresh procfs kern mounts in every box',
  apparmor_blocked: (f) => `the AppArmor profile ${f.apparmor} confining this process denies kern's mounts`,
}

/** The host facts a diagnosis needs; read on demand. */
function facts() {
  return {
    environment: host.environment(),
    seccomp: host.seccomp(),
    procMasks: host.procMasks(),
    userns: host.usernsSysctls(),
    apparmor: host.apparmorProfile(),
  }
}

/** The cause code of kern's startup error `text` on a host with facts `f`, or null. */
function causeOf(text, f) {
  if (!REFUSED.test(text)) return null
  if (/mount\(proc\)|mount proc|procfs/i.test(text) && f.procMasks.length) return 'proc_masked'
  if (NAMESPACE_STEP.test(text)) {
    if (f.userns.unprivilegedUsernsClone === 0 || f.userns.maxUserNamespaces === 0) return 'userns_disabled'
    if (f.userns.apparmorRestrict === 1 && process.getuid() !== 0) return 'userns_restricted'
    if (f.seccomp.mode === 2) return 'seccomp_blocked'
    if (f.apparmor) return 'apparmor_blocked'
    return null
  }
  if (MOUNT_STEP.test(text)) {
    if (f.seccomp.mode === 2) return 'seccomp_blocked'
    if (f.apparmor) return 'apparmor_blocked'
  }
  return null
}

/** `{ code, cause, fix }` for kern's startup error `text`, or null when the facts name no cause. */
function diagnose(text, f = facts()) {
  const code = causeOf(String(text), f)
  if (!code) return null
  return { code, cause: CAUSES[code](f), fix: fixFor(code, f.environment) }
}

module.exports = { diagnose, facts, causeOf, CAUSES }
