//! The `KERN_STARTED_FD` channel, the cap warnings and the `--require-limits` refusal.

mod common;

use common::*;

const MEMORY_WARNING: &str = "kern: warning: --memory is not enforced on this host - the kernel \
doesn't delegate the cgroup v2 `memory` controller (Microsoft's default WSL2 kernel, or Raspberry Pi \
OS without `cgroup_enable=memory`). The box still runs and stays isolated (namespaces + seccomp), but \
its RAM is UNCAPPED, including the 512M default. Fix on WSL: add `kernelCommandLine = \
cgroup_enable=memory cgroup_memory=1` under `[wsl2]` in `%UserProfile%\\.wslconfig`, then `wsl \
--shutdown`. Same limit as Docker/Podman here. `kern doctor` reports it every time; this line prints \
once.\n";

const REFUSAL: &str = "error: sandbox: requested resource cap(s) could not be enforced here and \
--require-limits (KERN_REQUIRE_LIMITS) is set: refusing to start. Ways out: run inside a systemd user \
scope, or on a host that delegates the cgroup v2 memory/pids controllers (`kern doctor` shows the \
state; on WSL2 or a Raspberry Pi add `cgroup_enable=memory` to the kernel command line); or, to \
accept uncapped operation, drop --require-limits and pass --allow-uncapped in its place (the two are \
mutually exclusive, not additive).\nhint: needs unprivileged user namespaces and a valid --rootfs \
directory\n";

/// Run a box with the started channel wired up; `undelegated` pins the host behaviour of this
/// project's machines so the memory byte is deterministic.
fn started(
    env: &Env,
    flags: &[&str],
    cmd: &[&str],
    undelegated: bool,
) -> (Vec<u8>, std::process::Output) {
    let name = unique("st");
    let mut args = vec!["box", name.as_str(), "--no-uid-range"];
    args.extend_from_slice(flags);
    args.push("--");
    args.extend_from_slice(cmd);
    let mut c = env.cmd(&args);
    if undelegated {
        c.env("KERN_STANDIN_WARN_CAPS", "1");
    }
    run_with_started_fd(&mut c)
}

#[test]
fn started_bytes_follow_kern() {
    let env = Env::new();
    let (bytes, out) = started(
        &env,
        &["--image", IMAGE],
        &["python3", "-c", "print(1)"],
        false,
    );
    assert_eq!(
        (bytes.as_slice(), out.status.code()),
        (&[1u8, 0][..], Some(0))
    );
    assert_eq!(text(&out.stdout), "1\n");

    let (bytes, out) = started(
        &env,
        &["--image", IMAGE, "--memory", "512m"],
        &["sh", "-c", "exit 3"],
        true,
    );
    assert_eq!(
        (bytes.as_slice(), out.status.code()),
        (&[1u8, 2][..], Some(3))
    );
    assert_eq!(text(&out.stderr), MEMORY_WARNING);

    // The box started even when its command could not: the exit is the box's own 127.
    let (bytes, out) = started(&env, &["--image", IMAGE], &["nosuchcmd"], false);
    assert_eq!(
        (bytes.as_slice(), out.status.code()),
        (&[1u8, 0][..], Some(127))
    );

    // A seccomp kill is still a started box.
    let (bytes, out) = started(&env, &["--image", IMAGE], &["unshare", "-U", "true"], false);
    assert_eq!(
        (bytes.as_slice(), out.status.code()),
        (&[1u8, 0][..], Some(159))
    );
}

#[test]
fn nothing_is_written_when_the_box_never_started() {
    let env = Env::new();
    for flags in [
        &["--image", "nosuchimage:1.0"][..],
        &["--image", "nosuchimage:1.0", "--memory", "512m"][..],
        &["--image", IMAGE, "--bogus"][..],
    ] {
        let (bytes, out) = started(&env, flags, &["true"], true);
        assert_eq!(out.status.code(), Some(1), "{flags:?}");
        assert!(bytes.is_empty(), "{flags:?} wrote {bytes:?}");
    }
}

#[test]
fn the_workload_never_sees_the_started_fd() {
    let env = Env::new();
    let (bytes, out) = started(
        &env,
        &["--image", IMAGE],
        &[
            "sh",
            "-c",
            "ls /proc/self/fd | tr '\\n' ' '; env | grep -c KERN_ || true",
        ],
        false,
    );
    assert_eq!(bytes, [1, 0]);
    assert_eq!(text(&out.stdout), "0 1 2 3 0\n");
}

#[test]
fn legacy_switch_writes_nothing() {
    let env = Env::new();
    let mut c = env.cmd(&[
        "box",
        &unique("legacy"),
        "--image",
        IMAGE,
        "--",
        "sh",
        "-c",
        "exit 5",
    ]);
    c.env("KERN_STANDIN_LEGACY_STARTED", "1");
    let (bytes, out) = run_with_started_fd(&mut c);
    assert!(bytes.is_empty());
    assert_eq!(out.status.code(), Some(5));
}

#[test]
fn cap_warnings_and_require_limits_match_kern() {
    let env = Env::new();
    let (_, out) = started(&env, &["--image", IMAGE], &["true"], true);
    assert_eq!(
        text(&out.stderr),
        MEMORY_WARNING.replace("--memory is not enforced", "resource caps are not enforced")
    );
    // --allow-uncapped silences both variants.
    let (_, out) = started(
        &env,
        &["--image", IMAGE, "--memory", "64m", "--allow-uncapped"],
        &["true"],
        true,
    );
    assert_eq!(text(&out.stderr), "");

    let (bytes, out) = started(
        &env,
        &["--image", IMAGE, "--require-limits"],
        &["true"],
        true,
    );
    assert_eq!((bytes.len(), out.status.code()), (0, Some(1)));
    assert_eq!(
        text(&out.stderr),
        MEMORY_WARNING.replace("--memory is", "resource caps are") + REFUSAL
    );

    let (bytes, out) = started(
        &env,
        &[
            "--image",
            IMAGE,
            "--require-limits",
            "--memory",
            "512m",
            "--pids-limit",
            "256",
        ],
        &["true"],
        true,
    );
    assert_eq!((bytes.len(), out.status.code()), (0, Some(1)));
    assert_eq!(text(&out.stderr), format!("{MEMORY_WARNING}{REFUSAL}"));
}
