//! kern-standin: a small kern-compatible box runtime for the test suite, used when `KERN_BIN` is
//! not set (kern itself cannot be installed on CI). It runs boxes for real, under bubblewrap, and
//! answers the binding the way kern (getkern @ bc2026a) answers it: every fact below was read in
//! kern's source and checked against a real kern binary on this project's machines.
//!
//! Reproduced, byte for byte where the binding can observe it:
//! * the CLI slice the binding uses: `box [NAME]` with `--image --ro -v --workdir --timeout --memory
//!   --cpus --pids-limit --net --egress-allow --env-file -e --cap-drop --cap-add --security-profile
//!   --require-limits --allow-uncapped --apparmor --pull --uid-range --no-uid-range`, `vcpu:`/
//!   `vgpio:`/`vdisk:` tokens and `--`; `stop NAME...|--all`; `ps [--json|-q]`; `--version`. Same
//!   parsing quirks (next-token values, value-optional `--net`, one capability per `--cap-drop`) and
//!   rejections: `error: ...` + `hint: ...`, exit 1 (kern's parser is hand-rolled; nothing exits 2);
//! * isolation: user (box uid 0), pid (the workload is PID 1, as in kern without `--init`), ipc, uts
//!   (hostname = box name) and net namespaces (`lo` only unless `--net`; `--egress-allow` stays
//!   isolated), kern's seccomp verdicts (see `seccomp`), kern's default capability drops, and the
//!   environment rebuilt from scratch as kern builds it;
//! * exit codes (the workload's; 128+N for signal N; 125/126/127 for setup/exec failures), the
//!   `--timeout` SIGTERM + 2 s + SIGKILL sequence, the foreground signal contract (first signal is
//!   forwarded to PID 1, a second exits 128+N), `stop` (a grace only if PID 1 handles SIGTERM);
//! * `KERN_STARTED_FD`: `[1, mem]` once a started box ends (mem 0 = no `--memory`, 1 = enforced,
//!   2 = not enforced), nothing for a box that never started, the fd CLOEXEC;
//! * kern's stderr lines: cap warnings, the `--require-limits` refusal, the untrusted-profile line,
//!   the egress note, the single-uid note, an offline host's unknown-image failure.
//!
//! Not reproduced (the binding does not depend on it):
//! * images: every known image IS the host's `/usr`, `/etc`, `/bin`, `/lib*`, `/sbin`, read-only even
//!   without `--ro` (writes go to `/tmp`, `/root`, new top-level dirs and `-v` binds); no `/sys`; the
//!   stand-in itself is visible at `/run/kern-standin/exec`; nothing is ever pulled;
//! * seccomp is kern's denylist posture, not its default deny-by-default allowlist;
//! * `--egress-allow` runs no proxy (the box has no outbound at all); profile tokens are not applied;
//!   cgroup caps only where the host already delegates `memory` + `pids` to our cgroup;
//! * kern's once-per-host "resource caps" notice is treated as already shown (its marker is kern's);
//! * the rest of kern (detached boxes, `exec`, `logs`, pods, `--init`, `--rootfs`, `--user`, the long
//!   `--help`, ...): refused as an unknown flag/command rather than silently ignored.
//!
//! Environment switches: `KERN_STANDIN_IMAGES` (extra image names), `KERN_STANDIN_LEGACY_STARTED`
//! (a kern without the started channel), `KERN_STANDIN_WARN_CAPS` (a host without cgroup delegation,
//! printing the once-per-host notice too), `KERN_STANDIN_ARGV_LOG` (append argv),
//! `KERN_STANDIN_PROFILES` (defined profile tokens), `KERN_STANDIN_STATE_DIR`, `KERN_STANDIN_BWRAP`,
//! `KERN_STANDIN_VERSION`; and kern's own `KERN_STARTED_FD`, `KERN_REQUIRE_LIMITS`,
//! `KERN_ALLOW_UNCAPPED`, `KERN_QUIET`.

mod boxrun;
mod cli;
mod error;
mod image;
mod limits;
mod sandbox;
mod seccomp;
mod shim;
mod state;

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::process::ExitCode;

use cli::Command;
use error::Error;

/// When set, every invocation appends its argv[1..], NUL-separated, as one `\n`-terminated line.
const ARGV_LOG_ENV: &str = "KERN_STANDIN_ARGV_LOG";
/// What `--version` reports (kern at the pinned commit says `kern 0.0.0`).
const VERSION_ENV: &str = "KERN_STANDIN_VERSION";

fn main() -> ExitCode {
    // A closed reader (`| head`) should end us with SIGPIPE, not a panic on EPIPE - as kern does.
    // SAFETY: restores a default disposition; no handler is installed.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let raw: Vec<OsString> = std::env::args_os().skip(1).collect();
    let args: Vec<String> = raw
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if args.first().map(String::as_str) == Some(shim::SHIM_VERB) {
        shim::run(&args[1..]); // inside the box; not a CLI invocation
    }
    log_argv(&raw);
    match cli::parse(&args).and_then(dispatch) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            if let Some(hint) = e.hint() {
                eprintln!("hint: {hint}");
            }
            ExitCode::FAILURE
        }
    }
}

fn dispatch(cmd: Command) -> Result<(), Error> {
    match cmd {
        Command::Version => {
            let v = std::env::var(VERSION_ENV).unwrap_or_else(|_| "0.0.0".into());
            println!("kern {v}");
            Ok(())
        }
        Command::Banner | Command::Help => {
            println!(
                "kern (kern-standin test runtime)\n\n    kern box <name> --image <img> [flags] -- <cmd>\n    \
                 kern ps [--json|-q]\n    kern stop <name>... | --all\n    kern --version"
            );
            Ok(())
        }
        Command::Box(args) => boxrun::run(*args),
        Command::Stop { names, all } => state::stop(&names, all),
        Command::Ps { json, quiet } => {
            state::ps(json, quiet);
            Ok(())
        }
    }
}

/// One `write(2)` per invocation on an `O_APPEND` file, so concurrent calls never interleave.
fn log_argv(args: &[OsString]) {
    let Some(path) = std::env::var_os(ARGV_LOG_ENV).filter(|p| !p.is_empty()) else {
        return;
    };
    let mut line: Vec<u8> = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            line.push(0);
        }
        line.extend_from_slice(a.as_bytes());
    }
    line.push(b'\n');
    let file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(&path);
    if let Ok(mut f) = file {
        let _ = f.write_all(&line);
    }
}
