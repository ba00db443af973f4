//! Option intake: the `#[napi(object)]` shapes JS hands us, and their one-time conversion into a
//! validated [`Config`]. Everything downstream trusts `Config` and never re-checks a string.

use std::path::{Path, PathBuf};

use napi::bindgen_prelude::{Either, Null};
use napi_derive::napi;

use crate::errors::{Error, Result};
use crate::locate;

pub const DEFAULT_IMAGE: &str = "python:3.12-slim";
pub const DEFAULT_MEMORY_MB: u64 = 512;
pub const DEFAULT_PIDS: u64 = 256;
pub const DEFAULT_TIMEOUT_S: f64 = 30.0;
pub const DEFAULT_MAX_OUTPUT: usize = 64 * 1024 * 1024;
/// Above a year a deadline is a mistake, and tokio's timer cannot represent much more.
const MAX_TIMEOUT_S: f64 = 365.0 * 86_400.0;

/// Host paths a mount (or the workspace) may never expose, as the reference refuses them.
const REFUSED_SOURCES: &[&str] = &[
    "/",
    "/etc",
    "/root",
    "/boot",
    "/proc",
    "/sys",
    "/dev",
    "/var/run/docker.sock",
    "/run/docker.sock",
];
/// Box paths a mount may not cover: kern's own essential mounts.
const ESSENTIAL_TARGETS: &[&str] = &["/", "/proc", "/sys", "/dev"];

/// Constructor options as JS passes them. `index.js` drops `null`/`undefined` entries before the
/// call, except for the caps below, where `null` means "uncapped" and absence means the default.
#[napi(object)]
#[derive(Default)]
pub struct SandboxOptions {
    /// OCI image name; default "python:3.12-slim".
    pub image: Option<String>,
    /// Shell command run once at open() in a network-on setup box.
    pub setup: Option<String>,
    /// Host directory to use as the workspace; default a temp dir owned by the session.
    pub workspace: Option<String>,
    /// RAM cap in MiB; absent = 512, null = no `--memory`.
    pub memory_mb: Option<Either<f64, Null>>,
    /// CPU cap in cores; absent or null = uncapped.
    pub cpus: Option<Either<f64, Null>>,
    /// Task ceiling; absent = 256, null = no `--pids-limit`.
    pub pids: Option<Either<f64, Null>>,
    /// Per-call deadline in seconds; default 30.
    pub timeout_s: Option<f64>,
    /// Share the host network with every box.
    pub network: Option<bool>,
    /// Domain allowlist for run boxes (exclusive with `network`).
    pub egress_allow: Option<Vec<String>>,
    /// Extra binds, flattened by `index.js` from the `{ src: target | [target, mode] }` record.
    pub mounts: Option<Vec<MountInput>>,
    /// `vcpu:`/`vgpio:`/`vdisk:` profile tokens.
    pub profiles: Option<Vec<String>>,
    /// Workload environment, flattened by `index.js` (values already stringified).
    pub env: Option<Vec<EnvInput>>,
    /// Capture cap for stdout and stderr, each; default 64 MiB.
    pub max_output_bytes: Option<f64>,
    /// false sets `KERN_NO_SCOPE=1` (best-effort caps).
    pub enforce_limits: Option<bool>,
    /// Bind `/workspace/.deps` read-only into run boxes.
    pub deps_readonly: Option<bool>,
    /// false skips the workspace walk; `files` is then `[]`.
    pub track_files: Option<bool>,
    /// Capabilities to drop (`--cap-drop`); default ["ALL"], [] opts out.
    pub cap_drop: Option<Vec<String>>,
    /// kern security profile (`--security-profile`), e.g. "untrusted".
    pub security_profile: Option<String>,
    /// Refuse to start a box whose caps cannot be enforced (`--require-limits`).
    pub require_limits: Option<bool>,
    /// AppArmor profile name (`--apparmor`).
    pub apparmor: Option<String>,
}

#[napi(object)]
pub struct MountInput {
    pub source: String,
    pub target: String,
    pub read_only: bool,
}

#[napi(object)]
pub struct EnvInput {
    pub key: String,
    pub value: String,
}

/// One validated extra bind.
#[derive(Debug, Clone, PartialEq)]
pub struct Mount {
    pub source: PathBuf,
    pub target: String,
    pub read_only: bool,
}

/// The validated session configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub kern: PathBuf,
    pub image: String,
    pub setup: Option<String>,
    pub workspace: Option<PathBuf>,
    pub memory_mb: Option<u64>,
    pub cpus: Option<f64>,
    pub pids: Option<u64>,
    pub timeout_s: f64,
    pub network: bool,
    pub egress_allow: Vec<String>,
    pub mounts: Vec<Mount>,
    pub profiles: Vec<String>,
    /// The env-file body, or why it cannot be written. Like the reference, a bad env value fails
    /// the call that needs it, not the constructor.
    pub env_file: std::result::Result<String, String>,
    pub max_output: usize,
    pub enforce_limits: bool,
    pub deps_readonly: bool,
    pub track_files: bool,
    pub cap_drop: Vec<String>,
    pub security_profile: Option<String>,
    pub require_limits: bool,
    pub apparmor: Option<String>,
}

impl Config {
    pub fn from_options(o: SandboxOptions) -> Result<Config> {
        let timeout_s = match o.timeout_s {
            None => DEFAULT_TIMEOUT_S,
            Some(t) => check_timeout(t)?,
        };
        let max_output = match o.max_output_bytes {
            None => DEFAULT_MAX_OUTPUT,
            Some(n) if n.is_finite() && n >= 1.0 => n.min(usize::MAX as f64 / 2.0) as usize,
            Some(_) => return Err(Error::sandbox("maxOutputBytes must be positive")),
        };
        let memory_mb = cap(o.memory_mb, DEFAULT_MEMORY_MB, "memoryMb", 1 << 30)?;
        let pids = cap(o.pids, DEFAULT_PIDS, "pids", 1 << 22)?;
        let cpus = match o.cpus {
            None | Some(Either::B(Null)) => None,
            Some(Either::A(c)) if c.is_finite() && c > 0.0 && c <= 4096.0 => Some(c),
            Some(Either::A(c)) => {
                return Err(Error::sandbox(format!(
                    "cpus must be a positive number of cores, got {c}"
                )))
            }
        };
        let image = match o.image {
            None => DEFAULT_IMAGE.to_string(),
            Some(i) => check_image(i)?,
        };
        let setup = match o.setup {
            Some(s) if s.contains('\0') => {
                return Err(Error::sandbox("setup must not contain a NUL byte"))
            }
            Some(s) if s.trim().is_empty() => None,
            s => s,
        };
        let workspace = match o.workspace {
            None => None,
            Some(w) if w.contains('\0') => {
                return Err(Error::mount("workspace path must not contain a NUL byte"))
            }
            Some(w) => Some(PathBuf::from(w)),
        };

        let mut mounts = Vec::new();
        for m in o.mounts.unwrap_or_default() {
            let (source, target) = validate_mount(&m.source, &m.target)?;
            mounts.push(Mount {
                source,
                target,
                read_only: m.read_only,
            });
        }
        let profiles = o
            .profiles
            .unwrap_or_default()
            .into_iter()
            .map(check_profile)
            .collect::<Result<Vec<_>>>()?;
        let egress_allow = o
            .egress_allow
            .unwrap_or_default()
            .into_iter()
            .map(check_domain)
            .collect::<Result<Vec<_>>>()?;
        let network = o.network.unwrap_or(false);
        if network && !egress_allow.is_empty() {
            return Err(Error::sandbox(
                "egressAllow and network:true are mutually exclusive: egressAllow restricts run \
                 boxes to a domain allowlist, network:true gives them the full host network",
            ));
        }
        let cap_drop = match o.cap_drop {
            None => vec!["ALL".to_string()],
            Some(v) => v
                .into_iter()
                .map(check_capability)
                .collect::<Result<Vec<_>>>()?,
        };
        let security_profile = o.security_profile.map(check_security_profile).transpose()?;
        let apparmor = o.apparmor.map(check_apparmor).transpose()?;

        Ok(Config {
            kern: locate::find_kern()?,
            image,
            setup,
            workspace,
            memory_mb,
            cpus,
            pids,
            timeout_s,
            network,
            egress_allow,
            mounts,
            profiles,
            env_file: env_file_body(o.env.unwrap_or_default()),
            max_output,
            enforce_limits: o.enforce_limits.unwrap_or(true),
            deps_readonly: o.deps_readonly.unwrap_or(false),
            track_files: o.track_files.unwrap_or(true),
            cap_drop,
            security_profile,
            require_limits: o.require_limits.unwrap_or(false),
            apparmor,
        })
    }
}

/// A per-call or session deadline: finite, positive, at most a year.
pub fn check_timeout(t: f64) -> Result<f64> {
    if t.is_finite() && t > 0.0 && t <= MAX_TIMEOUT_S {
        Ok(t)
    } else {
        Err(Error::sandbox(
            "timeoutS must be a positive number of seconds",
        ))
    }
}

fn cap(v: Option<Either<f64, Null>>, default: u64, name: &str, max: u64) -> Result<Option<u64>> {
    match v {
        None => Ok(Some(default)),
        Some(Either::B(Null)) => Ok(None),
        Some(Either::A(n)) if n.is_finite() && n >= 1.0 && n.fract() == 0.0 && n <= max as f64 => {
            Ok(Some(n as u64))
        }
        Some(Either::A(n)) => Err(Error::sandbox(format!(
            "{name} must be a positive whole number or null, got {n}"
        ))),
    }
}

/// An image reference: registry/name:tag@digest characters only, never starting with `-`, so the
/// value can never read as a flag to kern.
fn check_image(i: String) -> Result<String> {
    let ok = !i.is_empty()
        && i.len() <= 512
        && !i.starts_with('-')
        && i.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-/:@+".contains(&b));
    if ok {
        Ok(i)
    } else {
        Err(Error::sandbox(format!("invalid image name {i:?}")))
    }
}

/// `vcpu:`/`vgpio:`/`vdisk:` plus a name of safe characters; anchored so nothing else slips in.
pub fn check_profile(t: String) -> Result<String> {
    let ok = ["vcpu:", "vgpio:", "vdisk:"].iter().any(|p| {
        t.strip_prefix(p).is_some_and(|name| {
            name.len() <= 128
                && name
                    .as_bytes()
                    .first()
                    .is_some_and(|c| c.is_ascii_alphanumeric())
                && name
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || b"._-".contains(&c))
        })
    });
    if ok {
        Ok(t)
    } else {
        Err(Error::sandbox(format!(
            "invalid resource profile {t:?}: expected 'vcpu:NAME', 'vgpio:NAME' or 'vdisk:NAME' \
             with an alphanumeric profile name defined in your kern.toml"
        )))
    }
}

/// An FQDN of LDH labels with an alphabetic TLD: no scheme, port, path, wildcard, comma or space.
pub fn check_domain(d: String) -> Result<String> {
    let labels: Vec<&str> = d.split('.').collect();
    let label_ok = |l: &&str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let tld = labels.last().copied().unwrap_or("");
    let ok = d.len() <= 253
        && labels.len() >= 2
        && labels.iter().all(label_ok)
        && tld.len() >= 2
        && tld.bytes().all(|c| c.is_ascii_alphabetic());
    if ok {
        Ok(d)
    } else {
        Err(Error::sandbox(format!(
            "invalid egress domain {d:?}: expected a bare hostname like 'pkgs.example.org' \
             (no scheme, port, path, wildcard or spaces)"
        )))
    }
}

fn check_capability(c: String) -> Result<String> {
    let ok = !c.is_empty()
        && c.len() <= 64
        && c.as_bytes()[0].is_ascii_alphabetic()
        && c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(c)
    } else {
        Err(Error::sandbox(format!(
            "invalid capDrop entry {c:?}: expected a capability name like 'ALL' or 'NET_RAW'"
        )))
    }
}

fn check_security_profile(p: String) -> Result<String> {
    if p == "untrusted" {
        Ok(p)
    } else {
        Err(Error::sandbox(format!(
            "invalid securityProfile {p:?}: the supported profile is 'untrusted'"
        )))
    }
}

fn check_apparmor(p: String) -> Result<String> {
    let ok = !p.is_empty()
        && p.len() <= 255
        && p.as_bytes()[0].is_ascii_alphanumeric()
        && p.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(p)
    } else {
        Err(Error::sandbox(format!(
            "invalid apparmor profile {p:?}: expected a profile name of letters, digits, '.', '_' or '-'"
        )))
    }
}

fn env_file_body(env: Vec<EnvInput>) -> std::result::Result<String, String> {
    let mut body = String::new();
    let mut has_pythonpath = false;
    // kern reads the file line by line, trimmed, skipping `#` comments: refuse what it would
    // read differently instead of letting a value change on the way.
    for EnvInput { key, value } in env {
        if key.is_empty()
            || key.contains(['=', '\n', '\r', '\0'])
            || key.starts_with('#')
            || key.trim() != key
        {
            return Err(format!(
                "env var name {key:?} must be non-empty, with no '=', newline, NUL, leading '#' \
                 or surrounding whitespace"
            ));
        }
        if value.contains(['\n', '\r', '\0']) {
            return Err(format!("env var {key:?} must not contain a newline or NUL"));
        }
        if value.trim_end() != value {
            return Err(format!(
                "env var {key:?} must not end in whitespace (kern would trim it)"
            ));
        }
        has_pythonpath |= key == "PYTHONPATH";
        body.push_str(&key);
        body.push('=');
        body.push_str(&value);
        body.push('\n');
    }
    if !has_pythonpath {
        body.push_str("PYTHONPATH=/workspace/.deps\n");
    }
    Ok(body)
}

/// The canonical (realpath) $HOME, if there is one.
fn home_dir() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    Some(std::fs::canonicalize(&home).unwrap_or_else(|_| PathBuf::from(home)))
}

/// Validates one host→box bind; returns the canonical source and the target as given.
pub fn validate_mount(source: &str, target: &str) -> Result<(PathBuf, String)> {
    if !target.starts_with('/') {
        return Err(Error::mount(format!(
            "mount target must be an absolute path in the box, got {target:?}"
        )));
    }
    if target.split('/').any(|c| c == "..") {
        return Err(Error::mount(format!(
            "mount target must not contain '..': {target:?}"
        )));
    }
    if target.len() > 4096 || target.split('/').any(|c| c.len() > 255) {
        return Err(Error::mount(format!(
            "mount target is longer than a path can be: {}...",
            target.chars().take(60).collect::<String>()
        )));
    }
    // `:` and `,` would change how kern splits `-v SRC:DST[:ro]`; NUL and newlines never belong.
    if target.contains([':', ',', '\0', '\n']) {
        return Err(Error::mount(format!(
            "mount target has a forbidden character: {target:?}"
        )));
    }
    let norm = format!(
        "/{}",
        target
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .collect::<Vec<_>>()
            .join("/")
    );
    if ESSENTIAL_TARGETS.contains(&norm.as_str()) {
        return Err(Error::mount(format!(
            "cannot mount over the box's essential mount {norm:?}"
        )));
    }
    if !source.starts_with('/') || source.contains(['\0', ',', '\n']) {
        return Err(Error::mount(format!(
            "mount source must be an absolute host path, got {source:?}"
        )));
    }
    let real = std::fs::canonicalize(source)
        .map_err(|_| Error::mount(format!("mount source does not exist: {source:?}")))?;
    check_source_not_sensitive(&real)?;
    if real.as_os_str().as_encoded_bytes().contains(&b':') {
        return Err(Error::mount(format!(
            "mount source path contains ':': {real:?}"
        )));
    }
    Ok((real, target.to_string()))
}

/// Refuses a canonical host path that is a sensitive location or contains one (mounting `/home`
/// would expose `$HOME`, `/run` the docker socket).
pub fn check_source_not_sensitive(real: &Path) -> Result<()> {
    let home = home_dir();
    let sensitive = REFUSED_SOURCES.iter().map(Path::new).chain(home.as_deref());
    for s in sensitive {
        if real == s || s.starts_with(real) {
            return Err(Error::mount(format!(
                "refusing to mount the sensitive host path {:?} into a sandbox (this would \
                 defeat the isolation)",
                real.display().to_string()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_are_anchored() {
        assert!(check_profile("vcpu:heavy".into()).is_ok());
        assert!(check_profile("vdisk:scratch-1.x".into()).is_ok());
        for bad in [
            "--net", "vgpu:x", "vcpu:", "vcpu:-x", "vcpu:a b", "vcpu:a=b", "vcpu:a/b", " vcpu:a",
        ] {
            assert!(check_profile(bad.into()).is_err(), "{bad}");
        }
    }

    #[test]
    fn domains_are_bare_fqdns() {
        assert!(check_domain("pkgs.example.org".into()).is_ok());
        for bad in [
            "localhost",
            "a.b,c.d",
            "http://x.org",
            "x.org:80",
            "*.x.org",
            "-a.org",
            "a.1",
        ] {
            assert!(check_domain(bad.into()).is_err(), "{bad}");
        }
    }

    #[test]
    fn mount_targets_are_checked() {
        let tmp = std::env::temp_dir();
        let src = tmp.to_str().unwrap();
        assert!(validate_mount(src, "/data").is_ok());
        for bad in ["data", "/a/../b", "/", "/proc/", "//sys", "/./dev", "/a:b"] {
            assert!(
                matches!(validate_mount(src, bad), Err(Error::MountRefused(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            validate_mount("/etc", "/x"),
            Err(Error::MountRefused(_))
        ));
        assert!(matches!(
            validate_mount("/", "/x"),
            Err(Error::MountRefused(_))
        ));
        assert!(matches!(
            validate_mount("/var/run", "/x"),
            Err(Error::MountRefused(_))
        ));
        assert!(matches!(
            validate_mount("rel/path", "/x"),
            Err(Error::MountRefused(_))
        ));
        assert!(matches!(
            validate_mount("/no/such/dir/x", "/x"),
            Err(Error::MountRefused(_))
        ));
    }

    #[test]
    fn env_file_adds_pythonpath_unless_set() {
        let body = env_file_body(vec![EnvInput {
            key: "A".into(),
            value: "1".into(),
        }])
        .unwrap();
        assert_eq!(body, "A=1\nPYTHONPATH=/workspace/.deps\n");
        let body = env_file_body(vec![EnvInput {
            key: "PYTHONPATH".into(),
            value: "/x".into(),
        }])
        .unwrap();
        assert_eq!(body, "PYTHONPATH=/x\n");
        assert!(env_file_body(vec![EnvInput {
            key: "A".into(),
            value: "x\ny".into()
        }])
        .is_err());
        assert!(env_file_body(vec![EnvInput {
            key: "A=B".into(),
            value: "x".into()
        }])
        .is_err());
        assert!(env_file_body(vec![EnvInput {
            key: "#A".into(),
            value: "x".into()
        }])
        .is_err());
        assert!(env_file_body(vec![EnvInput {
            key: " A".into(),
            value: "x".into()
        }])
        .is_err());
        assert!(env_file_body(vec![EnvInput {
            key: "A".into(),
            value: "x ".into()
        }])
        .is_err());
        assert!(env_file_body(vec![EnvInput {
            key: "A".into(),
            value: " x".into()
        }])
        .is_ok());
    }
}
