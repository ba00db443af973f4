//! Memory/pids caps through cgroup v2, and kern's messages when they cannot be enforced.
//!
//! Like kern's direct path: a child cgroup of the supervisor's own, carrying `memory.max` (the request
//! or kern's 512 MiB default) and `pids.max` (the request or 512), with the supervisor moved in before
//! the box is spawned so the box inherits it. That only works where the host hands the `memory` and
//! `pids` controllers to us; elsewhere (this project's machines: hybrid cgroups, cgroup2 without
//! controllers) the box runs uncapped with kern's warning, and `--require-limits` refuses.

use std::fs;
use std::path::{Path, PathBuf};

/// Forces the "host does not delegate" behaviour regardless of the host, and also prints kern's
/// once-per-host "resource caps are not enforced" notice (which the stand-in otherwise treats as
/// already shown, since kern's marker file belongs to real kern).
pub const WARN_CAPS_ENV: &str = "KERN_STANDIN_WARN_CAPS";

const DEFAULT_MEMORY_MAX: u64 = 512 << 20;
const DEFAULT_PIDS_MAX: u64 = 512;

/// kern's reading of a boolean env switch: set and non-empty.
pub fn env_flag(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty())
}

/// The cgroup v2 directory this process lives in, if its tree offers both `memory` and `pids`.
pub fn delegated_dir() -> Option<PathBuf> {
    if env_flag(WARN_CAPS_ENV) {
        return None;
    }
    let mount = cgroup2_mount()?;
    let own = fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?.trim();
    if rel.split('/').any(|c| c == "..") {
        return None;
    }
    let dir = mount.join(rel.trim_start_matches('/'));
    let controllers = fs::read_to_string(dir.join("cgroup.controllers")).ok()?;
    let has = |c: &str| controllers.split_whitespace().any(|x| x == c);
    (has("memory") && has("pids")).then_some(dir)
}

fn cgroup2_mount() -> Option<PathBuf> {
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        // `... mountpoint opts ... - fstype source superopts`
        let (pre, post) = l.split_once(" - ")?;
        if post.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        pre.split(' ').nth(4).map(PathBuf::from)
    })
}

/// kern's pre-start notice when the `memory` controller is not available to it.
pub fn warn_if_undelegated(asked_memory: bool, allow_uncapped: bool) {
    if allow_uncapped || delegated_dir().is_some() {
        return;
    }
    let what = if asked_memory {
        "--memory is"
    } else if env_flag(WARN_CAPS_ENV) {
        "resource caps are"
    } else {
        return;
    };
    eprintln!(
        "kern: warning: {what} not enforced on this host - the kernel doesn't delegate the cgroup v2 \
         `memory` controller (Microsoft's default WSL2 kernel, or Raspberry Pi OS without \
         `cgroup_enable=memory`). The box still runs and stays isolated (namespaces + seccomp), but \
         its RAM is UNCAPPED, including the 512M default. Fix on WSL: add `kernelCommandLine = \
         cgroup_enable=memory cgroup_memory=1` under `[wsl2]` in `%UserProfile%\\.wslconfig`, then \
         `wsl --shutdown`. Same limit as Docker/Podman here. `kern doctor` reports it every time; \
         this line prints once."
    );
}

pub const REQUIRE_LIMITS_REFUSAL: &str =
    "requested resource cap(s) could not be enforced here and --require-limits \
     (KERN_REQUIRE_LIMITS) is set: refusing to start. Ways out: run inside a systemd user scope, or \
     on a host that delegates the cgroup v2 memory/pids controllers (`kern doctor` shows the state; \
     on WSL2 or a Raspberry Pi add `cgroup_enable=memory` to the kernel command line); or, to accept \
     uncapped operation, drop --require-limits and pass --allow-uncapped in its place (the two are \
     mutually exclusive, not additive).";

/// kern's notice when the controller exists but no capped cgroup could be made for the box.
pub fn warn_not_placed() {
    eprintln!(
        "kern: warning: resource caps could not be enforced here (memory + pids, INCLUDING their \
         defaults) - the box runs UNCAPPED, with no OOM / fork-bomb backstop. kern could not place \
         it in a delegated cgroup: no systemd user manager was reachable (its marker is \
         `$XDG_RUNTIME_DIR/systemd` - check that `XDG_RUNTIME_DIR` points at your real runtime dir, \
         e.g. `/run/user/$(id -u)`), or this host has none. `kern doctor` shows the delegation \
         state; `--require-limits` refuses to start uncapped, `--allow-uncapped` silences this."
    );
}

/// The box's capped cgroup; dropping it moves the supervisor back and removes the directory.
pub struct CgroupGuard {
    dir: PathBuf,
    origin: PathBuf,
    memory_max: u64,
}

impl CgroupGuard {
    /// Whether the memory ceiling in force is at or below what was asked.
    pub fn memory_within(&self, requested: u64) -> bool {
        self.memory_max <= requested
    }
}

impl Drop for CgroupGuard {
    fn drop(&mut self) {
        let _ = fs::write(
            self.origin.join("cgroup.procs"),
            std::process::id().to_string(),
        );
        let _ = fs::remove_dir(&self.dir);
    }
}

/// Create the box's capped cgroup under `parent` and move this process into it.
pub fn apply(
    parent: &Path,
    memory: Option<u64>,
    pids: Option<u64>,
    cpus: Option<f64>,
) -> Option<CgroupGuard> {
    let enabled = fs::read_to_string(parent.join("cgroup.subtree_control")).unwrap_or_default();
    let on = |c: &str| enabled.split_whitespace().any(|x| x == c);
    if !(on("memory") && on("pids")) {
        // Fails (EBUSY) when `parent` holds processes and is not the root: the no-internal-process
        // rule. That is the common undelegated case and simply means "no caps here".
        fs::write(parent.join("cgroup.subtree_control"), "+memory +pids").ok()?;
    }
    let _ = fs::write(parent.join("cgroup.subtree_control"), "+cpu"); // best-effort, like kern
    let dir = parent.join(format!("kern-standin-{}", std::process::id()));
    fs::create_dir(&dir).ok()?;
    let guard = CgroupGuard {
        dir,
        origin: parent.to_path_buf(),
        memory_max: memory.unwrap_or(DEFAULT_MEMORY_MAX),
    };
    let bound = |file: &str, value: String| {
        fs::write(guard.dir.join(file), value).is_ok()
            && fs::read_to_string(guard.dir.join(file)).is_ok_and(|v| !v.trim().starts_with("max"))
    };
    let mem_ok = bound("memory.max", guard.memory_max.to_string());
    let pids_ok = bound("pids.max", pids.unwrap_or(DEFAULT_PIDS_MAX).to_string());
    let _ = fs::write(guard.dir.join("memory.swap.max"), "0");
    // The whole box dies on OOM, not one process of it.
    let _ = fs::write(guard.dir.join("memory.oom.group"), "1");
    if let Some(c) = cpus {
        const PERIOD_US: u64 = 100_000;
        let quota = (c * PERIOD_US as f64).round().max(1.0) as u64;
        let _ = fs::write(guard.dir.join("cpu.max"), format!("{quota} {PERIOD_US}"));
    }
    let joined = mem_ok
        && pids_ok
        && fs::write(
            guard.dir.join("cgroup.procs"),
            std::process::id().to_string(),
        )
        .is_ok();
    joined.then_some(guard)
}

/// The host's CPU count as kern counts it, for `--cpus` clamping.
pub fn host_cpus() -> usize {
    fs::read_to_string("/proc/cpuinfo")
        .map(|t| t.lines().filter(|l| l.starts_with("processor")).count())
        .unwrap_or(1)
        .max(1)
}
