'use strict'
// The causes doctor can name for a box that cannot start, and the fix for each where this process
// runs: a sysctl on a host, a flag of `docker run`/`podman run`, a field of a pod's
// securityContext. docs/deploy.md explains each flag; the codes are stable (index.d.ts lists them).

const path = require('node:path')

/** The seccomp profile this package ships: Docker's default plus what kern needs. */
const SECCOMP_PROFILE = path.resolve(__dirname, '..', '..', 'deploy', 'seccomp.json')

const PROFILE_IS =
  `this package's profile, here ${SECCOMP_PROFILE}: Docker's default plus the five calls kern makes, ` +
  'unshare, mount, umount2, pivot_root and sethostname'
const USERNS_SYSCTL =
  'sudo sysctl -w kernel.unprivileged_userns_clone=1 user.max_user_namespaces=15000 ' +
  '(and the same lines in /etc/sysctl.d/99-kern.conf to keep them)'
const APPARMOR_SYSCTL =
  'sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or keep it and give kern an AppArmor ' +
  'profile that allows user namespaces (docs/deploy.md#apparmor has it: /etc/apparmor.d/kern, then ' +
  '`sudo apparmor_parser -r /etc/apparmor.d/kern`)'
const onNode = (what) => `this is the host's (the node's) setting, not the container's: on the host, ${what}`

/** code → environment → fix. `container` is any engine doctor cannot name; `host` a bare host. */
const FIXES = {
  userns_disabled: {
    host: USERNS_SYSCTL,
    docker: onNode(USERNS_SYSCTL),
    podman: onNode(USERNS_SYSCTL),
    kubernetes: onNode(USERNS_SYSCTL),
    container: onNode(USERNS_SYSCTL),
  },
  userns_restricted: {
    host: APPARMOR_SYSCTL,
    docker: onNode(APPARMOR_SYSCTL),
    podman: onNode(APPARMOR_SYSCTL),
    kubernetes: onNode(APPARMOR_SYSCTL),
    container: onNode(APPARMOR_SYSCTL),
  },
  seccomp_blocked: {
    host:
      'whatever started this process installed a seccomp filter (a systemd SystemCallFilter=, a CI runner, a ' +
      'supervisor): let it allow unshare, mount, umount2, pivot_root and sethostname, or start kern ' +
      'outside it',
    docker: `docker run --security-opt seccomp=kern-sandbox/deploy/seccomp.json (${PROFILE_IS})`,
    podman: `podman run --security-opt seccomp=kern-sandbox/deploy/seccomp.json (${PROFILE_IS})`,
    kubernetes:
      'copy deploy/seccomp.json to each node as /var/lib/kubelet/seccomp/kern-sandbox.json and set ' +
      'securityContext.seccompProfile: { type: Localhost, localhostProfile: kern-sandbox.json }',
    container: `run the container with the seccomp profile kern-sandbox/deploy/seccomp.json (${PROFILE_IS})`,
  },
  proc_masked: {
    host: "something mounted over paths in /proc (a container engine's masks?): run kern where /proc is not masked",
    docker: 'docker run --security-opt systempaths=unconfined (unmasks /proc so kern can mount a fresh procfs)',
    podman: 'podman run --security-opt unmask=ALL (unmasks /proc so kern can mount a fresh procfs)',
    kubernetes:
      'securityContext.procMount: Unmasked in the container, with hostUsers: false in the pod spec ' +
      '(Kubernetes 1.33+; the cluster needs user namespaces)',
    container: 'run the container with /proc unmasked (Docker: --security-opt systempaths=unconfined)',
  },
  apparmor_blocked: {
    host: 'the AppArmor profile confining this process denies mounts: run kern unconfined or under a profile that allows mount, pivot_root and userns',
    docker: 'docker run --security-opt apparmor=unconfined (docker-default denies mount), or a profile of your own',
    podman:
      'podman run --security-opt apparmor=unconfined (the default profile denies mount), or a profile of your own',
    kubernetes: 'securityContext.appArmorProfile: { type: Unconfined } (or type: Localhost with a profile of your own)',
    container: 'run the container without AppArmor confinement (Docker: --security-opt apparmor=unconfined)',
  },
}

/** The fix for `code` where this process runs (`environment` from host.js). */
function fixFor(code, environment) {
  const byEnv = FIXES[code]
  return byEnv[environment] ?? byEnv.container
}

module.exports = { FIXES, fixFor, SECCOMP_PROFILE }
