//! `box`: the checks, messages and exit contract of a foreground `kern box`, in kern's order.
//!
//! The order is observable (which error wins, whether the memory warning precedes an image error),
//! so it follows kern's `box_run`: name, started fd, name clash, `-v`, env, egress, profiles, the
//! cap warning, the image, the security profile, capabilities, limit policy, then the box.

use std::path::PathBuf;

use crate::cli::BoxArgs;
use crate::error::Error;
use crate::image;
use crate::limits::{self, env_flag};
use crate::sandbox::{self, CapPolicy, Sandbox, Volume};
use crate::shim::ExecSpec;
use crate::state::{self, Record, Registration};

/// Set to behave like a kern that predates the started channel: the fd is left alone and never
/// written, so the binding's fallback path runs.
pub const LEGACY_STARTED_ENV: &str = "KERN_STANDIN_LEGACY_STARTED";
/// Comma-separated `vcpu:NAME`-style tokens that count as defined. Unset: every token is accepted
/// (the stand-in has no kern.toml and applies no profile); set: others fail as kern's lookup does.
pub const PROFILES_ENV: &str = "KERN_STANDIN_PROFILES";

const EGRESS_PROXY: &str = "http://127.0.0.1:3128";

/// Runs the box and exits the process with its code; returns only on a failure to start.
pub fn run(a: BoxArgs) -> Result<(), Error> {
    validate_name(&a.name).map_err(Error::InvalidBox)?;
    let started_fd = StartedFd::from_env();
    if state::list().iter().any(|b| b.name == a.name) {
        return Err(already_running(&a.name));
    }
    let volumes = parse_volumes(&a.volumes)?;
    let mut user_env = parse_env_files(&a.env_files)?;
    user_env.extend(parse_envs(&a.env)?);
    if !a.egress_allow.is_empty() {
        if a.share_net {
            return Err(Error::Sandbox(
                "--egress-allow filters the box's OWN isolated network, so it can't combine with \
                 --net (host network) or --pod (shared pod network)"
                    .into(),
            ));
        }
        // The stand-in runs no filtering proxy: the box keeps its isolated netns and gets kern's
        // proxy settings, so it has no outbound at all (fail-closed, like kern when its proxy fails).
        eprintln!(
            "kern: note: --egress-allow gives the box outbound to the listed domains only (over an \
             HTTP CONNECT/forward proxy; the box's isolated netns has no other route). It resolves \
             and pins the dialed host, refuses non-public resolved IPs (SSRF), and tunnels only \
             ports 80/443. The one hole it can't close is domain fronting on a SHARED CDN (SNI != \
             CONNECT host); see docs/EGRESS.md. For a fully hostile workload prefer a microVM with \
             a real firewall."
        );
        for k in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
            user_env.push((k.into(), EGRESS_PROXY.into()));
        }
    }
    check_profiles(&a.profiles)?;
    let cpus = a.cpus.map(|c| {
        let host = limits::host_cpus() as f64;
        if c > host {
            eprintln!(
                "kern: --cpus {c} exceeds the {host:.0} available CPUs - clamping to {host:.0}"
            );
            host
        } else {
            c
        }
    });
    let require_limits = a.require_limits || env_flag("KERN_REQUIRE_LIMITS");
    let allow_uncapped = a.allow_uncapped || env_flag("KERN_ALLOW_UNCAPPED");
    limits::warn_if_undelegated(a.memory.is_some(), allow_uncapped);
    let started_fd = started_fd.and_then(StartedFd::cloexec);
    let mut registration = Registration::claim(Record::new(&a.name, &[])).map_err(|e| match e {
        Error::AlreadyRunning(_) => Error::AlreadyRunning(format!(
            "a box named '{}' is already starting or running",
            a.name
        )),
        other => other,
    })?;

    let image = a
        .image
        .as_deref()
        .ok_or_else(|| Error::Sandbox("need --rootfs or --image".into()))?;
    let config = image::resolve(image, a.pull)?;
    let scratch = state::Scratch::create(&a.name)?;
    let command = if a.command.is_empty() {
        config.cmd.clone()
    } else {
        a.command.clone()
    };
    let mut env = base_env(&a.name);
    env.extend(config.env);
    env.extend(user_env);

    let mut cap_drop = a.cap_drop.clone();
    let mut read_only = a.read_only;
    if a.untrusted {
        if !cap_drop.iter().any(|d| d.eq_ignore_ascii_case("ALL")) {
            cap_drop.insert(0, "ALL".into());
        }
        read_only = true;
        let caps_line = if a.cap_add.is_empty() {
            "cap-drop=ALL".to_string()
        } else {
            format!("cap-drop=ALL, cap-add={}", a.cap_add.join(","))
        };
        // kern's wording, including its (allowlist) seccomp posture: see the crate docs.
        eprintln!(
            "kern: security-profile=untrusted: seccomp=allowlist, {caps_line}, read-only=on \
             (Landlock and --require-limits untouched)"
        );
    }
    let caps = CapPolicy::resolve(&a.cap_add, &cap_drop)?;
    if require_limits && allow_uncapped {
        return Err(Error::Usage(
            "--require-limits and --allow-uncapped are mutually exclusive (one refuses an \
             unenforceable cap, the other accepts it); this also holds when either is set through \
             KERN_REQUIRE_LIMITS or KERN_ALLOW_UNCAPPED",
        ));
    }
    registration.set_command(&command);

    // Caps: the supervisor joins the capped cgroup so the box inherits it.
    let delegated = limits::delegated_dir();
    let cgroup = delegated
        .as_deref()
        .and_then(|dir| limits::apply(dir, a.memory, a.pids_limit, cpus));
    if cgroup.is_none() {
        if require_limits {
            return Err(Error::Setup(limits::REQUIRE_LIMITS_REFUSAL.into()));
        }
        if delegated.is_some() && !allow_uncapped && !env_flag("KERN_QUIET") {
            limits::warn_not_placed();
        }
    }
    let memory_signal = match a.memory {
        None => 0,
        Some(req) if cgroup.as_ref().is_some_and(|g| g.memory_within(req)) => 1,
        Some(_) => 2,
    };
    if a.uid_range {
        eprintln!(
            "kern: --uid-range requested but unavailable (need newuidmap/newgidmap + an \
             /etc/subuid+/etc/subgid allocation) - using single-uid map"
        );
    }

    let sandbox = Sandbox {
        hostname: a.name.clone(),
        exec: ExecSpec {
            workdir: a.workdir.clone(),
            apparmor: a.apparmor.clone(),
            env,
            argv: command,
        },
        read_only,
        volumes,
        share_net: a.share_net,
        caps,
        timeout: a.timeout,
    };
    let code = sandbox::run(&sandbox, &mut registration)?;
    // kern maps a uid range for --image boxes by default and says so when it could not and the box
    // failed; true of the stand-in too, which only ever maps the caller's single uid.
    if !a.uid_range && !a.no_uid_range && code != 0 {
        eprintln!(
            "kern: note: this box ran with a single-uid map because a uid range was unavailable \
             (needs newuidmap/newgidmap and an /etc/subuid+/etc/subgid allocation). An image that \
             chowns or drops privilege in its entrypoint fails that way, with an error of its own \
             that does not mention it. Install `uidmap` (Debian/Ubuntu) or `shadow-uidmap` \
             (Alpine), or pass --no-uid-range to say the single-uid map is what you want."
        );
    }
    // Teardown first, then the started bytes, then exit: the order kern's foreground path uses.
    drop(registration);
    drop(scratch);
    drop(cgroup);
    if let Some(fd) = started_fd {
        fd.signal(memory_signal);
    }
    std::process::exit(code)
}

fn already_running(name: &str) -> Error {
    Error::AlreadyRunning(format!("a box named '{name}' is already running"))
}

/// kern's box-name rule.
fn validate_name(s: &str) -> Result<(), &'static str> {
    if s.is_empty() {
        return Err("box name is empty");
    }
    if s.len() > 64 {
        return Err("box name is too long (max 64 characters)");
    }
    let first = s.as_bytes()[0];
    if !(first.is_ascii_alphanumeric() || first == b'_') {
        return Err("box name must start with a letter, digit or '_'");
    }
    if !s
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
    {
        return Err("box name allows only letters, digits, '_', '.' and '-'");
    }
    Ok(())
}

/// What kern's box starts from before the image's and the caller's variables are layered on.
fn base_env(hostname: &str) -> Vec<(String, String)> {
    vec![
        (
            "PATH".into(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
        ),
        ("HOME".into(), "/root".into()),
        ("TERM".into(), "xterm".into()),
        ("HOSTNAME".into(), hostname.into()),
    ]
}

fn check_profiles(tokens: &[String]) -> Result<(), Error> {
    let Ok(defined) = std::env::var(PROFILES_ENV) else {
        return Ok(());
    };
    for t in tokens {
        if !defined.split(',').map(str::trim).any(|d| d == t) {
            let (kind, name) = t.split_once(':').unwrap_or((t.as_str(), ""));
            return Err(Error::Config(format!(
                "no [[{kind}]] profile named '{name}' in kern.toml"
            )));
        }
    }
    Ok(())
}

/// kern's `-e K=V` rule.
fn parse_envs(specs: &[String]) -> Result<Vec<(String, String)>, Error> {
    specs
        .iter()
        .map(|s| match s.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(Error::Sandbox(format!("bad --env '{s}' (expected K=V)"))),
        })
        .collect()
}

/// kern's `--env-file`: `K=V` per line, blank and `#` lines skipped, line and key trimmed, the value
/// kept as written (no quote processing).
fn parse_env_files(paths: &[String]) -> Result<Vec<(String, String)>, Error> {
    let mut out = Vec::new();
    for p in paths {
        let bytes = std::fs::read(p)
            .map_err(|e| Error::Sandbox(format!("--env-file source '{p}': {e}")))?;
        let body = String::from_utf8(bytes)
            .map_err(|_| Error::Sandbox(format!("--env-file '{p}' is not valid UTF-8")))?;
        for (n, raw) in body.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            match line.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => out.push((k.trim().into(), v.into())),
                _ => {
                    return Err(Error::Sandbox(format!(
                        "bad line {} in --env-file '{p}' (expected K=V): {line}",
                        n + 1
                    )))
                }
            }
        }
    }
    Ok(out)
}

/// kern's `-v SRC:DST[:ro|:rw]` rules. A bare name is a named volume, kept under the state dir.
fn parse_volumes(specs: &[String]) -> Result<Vec<Volume>, Error> {
    specs.iter().map(|s| parse_volume(s)).collect()
}

fn parse_volume(s: &str) -> Result<Volume, Error> {
    let parts: Vec<&str> = s.split(':').collect();
    let (source, target, read_only) = match parts.as_slice() {
        [src, dst] => (*src, *dst, false),
        [src, dst, "ro"] => (*src, *dst, true),
        [src, dst, "rw"] => (*src, *dst, false),
        _ => {
            return Err(Error::Sandbox(format!(
                "bad -v '{s}' (expected src:dst[:ro])"
            )))
        }
    };
    if !target.starts_with('/') {
        return Err(Error::Sandbox(format!("-v '{s}': target must be absolute")));
    }
    if target.split('/').any(|c| c == "." || c == "..") {
        return Err(Error::Sandbox(format!(
            "-v '{s}': target must not contain '.' or '..'"
        )));
    }
    let comps: Vec<&str> = target.split('/').filter(|c| !c.is_empty()).collect();
    if comps.is_empty() || matches!(comps.as_slice(), ["proc"] | ["sys"] | ["dev"]) {
        return Err(Error::Sandbox(format!(
            "-v '{s}': cannot mount over /{} (a box essential mount)",
            comps.join("/")
        )));
    }
    let is_path = source.starts_with('/')
        || matches!(source, "." | "..")
        || source.starts_with("./")
        || source.starts_with("../");
    let source = if source.is_empty() || source.contains("://") {
        return Err(Error::Sandbox(format!(
            "-v '{s}': source must be a volume name or a path (absolute, or ./ or ../)"
        )));
    } else if is_path {
        std::fs::canonicalize(source)
            .map_err(|e| Error::Sandbox(format!("-v '{s}': source {source}: {e}")))?
    } else {
        named_volume(source)?
    };
    Ok(Volume {
        source,
        target: format!("/{}", comps.join("/")),
        read_only,
    })
}

fn named_volume(name: &str) -> Result<PathBuf, Error> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && !name.contains("..")
        && !name.starts_with(['-', '.'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if !valid {
        return Err(Error::Volume(format!(
            "invalid volume name '{name}' (letters/digits/_/./- only, no leading '-' or '.', ≤64)"
        )));
    }
    let data = state::dir().join("volumes").join(name).join("data");
    std::fs::create_dir_all(&data)
        .map_err(|e| Error::Volume(format!("cannot create volume '{name}': {e}")))?;
    Ok(data)
}

/// The caller's `KERN_STARTED_FD`, validated as kern validates it (> 2, open).
struct StartedFd(i32);

impl StartedFd {
    fn from_env() -> Option<StartedFd> {
        if env_flag(LEGACY_STARTED_ENV) {
            return None;
        }
        let fd: i32 = std::env::var("KERN_STARTED_FD").ok()?.trim().parse().ok()?;
        // SAFETY: F_GETFD only probes whether the fd is open.
        (fd > 2 && unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0).then_some(StartedFd(fd))
    }

    /// CLOEXEC, so neither bwrap nor the workload ever holds it; a fd that cannot be protected is
    /// dropped (the caller then reads EOF and falls back), as kern does.
    fn cloexec(self) -> Option<StartedFd> {
        // SAFETY: fcntl on an int fd; no memory is passed.
        let flags = unsafe { libc::fcntl(self.0, libc::F_GETFD) };
        // SAFETY: as above; FD_CLOEXEC is the only flag touched.
        (flags >= 0 && unsafe { libc::fcntl(self.0, libc::F_SETFD, flags | libc::FD_CLOEXEC) } >= 0)
            .then_some(self)
    }

    /// `[1, memory_cap_signal]` in one write, retried on EINTR.
    fn signal(self, memory_signal: u8) {
        let buf = [1u8, memory_signal];
        loop {
            // SAFETY: `buf` is a live local array of `buf.len()` bytes.
            let n = unsafe { libc::write(self.0, buf.as_ptr().cast(), buf.len()) };
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        // SAFETY: we own the fd (kern handed it to us) and close it once, here.
        unsafe { libc::close(self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn box_names_follow_kern() {
        assert!(validate_name("web-1.a_b").is_ok());
        assert_eq!(
            validate_name("bad/name"),
            Err("box name allows only letters, digits, '_', '.' and '-'")
        );
        assert!(validate_name("-x").is_err());
        assert!(validate_name(&"a".repeat(65)).is_err());
    }

    #[test]
    fn volume_rules_follow_kern() {
        let err = |s: &str| parse_volume(s).unwrap_err().to_string();
        assert_eq!(
            err("/tmp"),
            "sandbox: bad -v '/tmp' (expected src:dst[:ro])"
        );
        assert_eq!(
            err("/tmp:data"),
            "sandbox: -v '/tmp:data': target must be absolute"
        );
        assert_eq!(
            err("/tmp:/data/../etc"),
            "sandbox: -v '/tmp:/data/../etc': target must not contain '.' or '..'"
        );
        assert_eq!(
            err("/tmp://proc"),
            "sandbox: -v '/tmp://proc': cannot mount over /proc (a box essential mount)"
        );
        assert!(err("/nonexistent-kern-standin:/d").contains("No such file or directory"));
        let v = parse_volume("/tmp:/data:ro").unwrap();
        assert!(v.read_only);
        assert_eq!(v.target, "/data");
    }

    #[test]
    fn env_file_keeps_values_verbatim() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("env");
        std::fs::write(&p, "# c\n\n A = b=c \nQ=\"x\"\n").unwrap();
        let got = parse_env_files(&[p.to_string_lossy().into_owned()]).unwrap();
        assert_eq!(
            got,
            [("A".into(), " b=c".into()), ("Q".into(), "\"x\"".into())]
        );
        std::fs::write(&p, "oops\n").unwrap();
        let e = parse_env_files(&[p.to_string_lossy().into_owned()]).unwrap_err();
        assert!(e.to_string().contains("bad line 1 in --env-file"));
    }
}
