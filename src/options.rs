//! Option intake: the `#[napi(object)]` shapes JS hands us, and their one-time conversion into a
//! validated [`Config`]. Everything downstream trusts `Config` and never re-checks a string.

use std::path::PathBuf;

use napi::bindgen_prelude::{Either, Null};
use napi_derive::napi;

use crate::egress::{NetworkPolicy, Policy};
use crate::errors::{Error, Result};
use crate::locate;
use crate::workspace::check_source_not_sensitive;

pub mod js;

/// Each option's default, in one place: [`Config::from_options`] applies them and JS reads them
/// through [`option_defaults`] (lib/options.js for a Sandbox's properties; a test holds the README
/// and index.d.ts to them). Options not listed default to "none".
pub struct Defaults {
    pub image: &'static str,
    pub memory_mb: u64,
    pub pids: u64,
    pub timeout_s: f64,
    pub max_output: usize,
    pub network: bool,
    pub enforce_limits: bool,
    pub deps_readonly: bool,
    pub track_files: bool,
    pub cap_drop: &'static [&'static str],
    pub require_limits: bool,
    pub box_workspace: &'static str,
    /// Ready boxes per session; `KERN_SANDBOX_PREWARM` replaces it.
    pub prewarm: u32,
}

pub const DEFAULTS: Defaults = Defaults {
    image: "python:3.12-slim",
    memory_mb: 512,
    pids: 256,
    timeout_s: 30.0,
    max_output: 64 * 1024 * 1024,
    network: false,
    enforce_limits: true,
    deps_readonly: false,
    track_files: true,
    cap_drop: &["ALL"],
    require_limits: false,
    box_workspace: "/workspace",
    prewarm: 0,
};

/// [`DEFAULTS`] as JS sees them, under the options' names.
#[napi(object, object_from_js = false)]
pub struct OptionDefaults {
    pub image: String,
    pub memory_mb: u32,
    pub pids: u32,
    pub timeout_s: f64,
    pub max_output_bytes: f64,
    pub network: bool,
    pub enforce_limits: bool,
    pub deps_readonly: bool,
    pub track_files: bool,
    pub cap_drop: Vec<String>,
    pub require_limits: bool,
    pub box_workspace: String,
    pub prewarm: u32,
}

#[napi]
pub fn option_defaults() -> OptionDefaults {
    let d = &DEFAULTS;
    OptionDefaults {
        image: d.image.into(),
        memory_mb: d.memory_mb as u32,
        pids: d.pids as u32,
        timeout_s: d.timeout_s,
        max_output_bytes: d.max_output as f64,
        network: d.network,
        enforce_limits: d.enforce_limits,
        deps_readonly: d.deps_readonly,
        track_files: d.track_files,
        cap_drop: d.cap_drop.iter().map(|c| c.to_string()).collect(),
        require_limits: d.require_limits,
        box_workspace: d.box_workspace.into(),
        prewarm: d.prewarm,
    }
}

/// Above a year a deadline is a mistake, and tokio's timer cannot represent much more.
const MAX_TIMEOUT_S: f64 = 365.0 * 86_400.0;

/// Box paths a mount may not cover: kern's own essential mounts.
const ESSENTIAL_TARGETS: &[&str] = &["/", "/proc", "/sys", "/dev"];

/// Constructor options as JS passes them. `lib/options.js` drops `null`/`undefined` entries before
/// the call, except for the caps below, where `null` means "uncapped" and absence the default.
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
    /// `true` shares the host network with every box; a policy object sends every box's traffic
    /// through a host egress proxy the session starts at open().
    #[napi(ts_type = "boolean | NetworkPolicy")]
    pub network: Option<Either<bool, NetworkPolicy>>,
    /// Domain allowlist for run boxes (exclusive with `network`).
    pub egress_allow: Option<Vec<String>>,
    /// Extra binds, flattened by `lib/options.js` from the `{ src: target | [target, mode] }`
    /// record.
    pub mounts: Option<Vec<MountInput>>,
    /// `vcpu:`/`vgpio:`/`vdisk:` profile tokens.
    pub profiles: Option<Vec<String>>,
    /// Workload environment, flattened by `lib/options.js` (values already stringified).
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
    /// Where the workspace is bound in the box, and the box's working directory.
    pub box_workspace: Option<String>,
    /// Boxes kept started ahead of calls; 0 turns it off.
    pub prewarm: Option<f64>,
    /// The machine snapshot store; default `$KERN_SANDBOX_SNAPSHOT_DIR` or the user's data dir.
    pub snapshot_dir: Option<String>,
    /// The store's size cap in bytes; default 20 GiB.
    pub snapshot_max_bytes: Option<f64>,
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
    /// The checked `network` policy object: the session's proxy serves it.
    pub policy: Option<Policy>,
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
    /// The workspace's path in the box: bind target, `--workdir`, and the base of `.deps`.
    pub box_workspace: String,
    /// How many ready boxes the session keeps (0: none).
    pub prewarm: usize,
    /// `snapshotDir`: None for the default store (see `snapshots::Store::open`).
    pub snapshot_dir: Option<PathBuf>,
    /// `snapshotMaxBytes`: the store's cap.
    pub snapshot_max_bytes: u64,
    /// The internal test hook's attach (`egress::attach::from_test_env`), when no policy is given:
    /// a policy's attach exists once open() has started the session's proxy.
    pub egress: Option<crate::egress::attach::EgressAttach>,
}

impl Config {
    /// Validates each option once, one step per option (two for those that constrain each other);
    /// kern is looked up last, so a bad option is reported even where kern is missing.
    pub fn from_options(o: SandboxOptions) -> Result<Config> {
        let d = &DEFAULTS;
        let (network, policy, egress_allow) = check_network(o.network, o.egress_allow)?;
        // The test hook only where no policy asks for a proxy of the session's own.
        let egress = match policy {
            Some(_) => None,
            None => crate::egress::attach::from_test_env()?,
        };
        let box_workspace = o
            .box_workspace
            .map_or(Ok(d.box_workspace.into()), check_box_workspace)?;
        Ok(Config {
            image: o.image.map_or(Ok(d.image.into()), check_image)?,
            setup: check_setup(o.setup)?,
            workspace: check_workspace(o.workspace)?,
            memory_mb: whole_cap(o.memory_mb, d.memory_mb, "memoryMb", 1 << 30)?,
            cpus: check_cpus(o.cpus)?,
            pids: whole_cap(o.pids, d.pids, "pids", 1 << 22)?,
            timeout_s: o.timeout_s.map_or(Ok(d.timeout_s), check_timeout)?,
            network,
            policy,
            egress_allow,
            mounts: check_mounts(o.mounts)?,
            profiles: each(o.profiles, check_profile)?,
            env_file: env_file_body(o.env.unwrap_or_default(), &box_workspace),
            max_output: check_max_output(o.max_output_bytes)?,
            enforce_limits: o.enforce_limits.unwrap_or(d.enforce_limits),
            deps_readonly: o.deps_readonly.unwrap_or(d.deps_readonly),
            track_files: o.track_files.unwrap_or(d.track_files),
            cap_drop: match o.cap_drop {
                None => d.cap_drop.iter().map(|c| c.to_string()).collect(),
                given => each(given, check_capability)?,
            },
            security_profile: o.security_profile.map(check_security_profile).transpose()?,
            require_limits: o.require_limits.unwrap_or(d.require_limits),
            apparmor: o.apparmor.map(check_apparmor).transpose()?,
            box_workspace,
            prewarm: check_prewarm(o.prewarm)?,
            snapshot_dir: check_snapshot_dir(o.snapshot_dir)?,
            snapshot_max_bytes: match o.snapshot_max_bytes {
                None => crate::snapshots::DEFAULT_MAX_BYTES,
                Some(n) if n.is_finite() && n >= 0.0 && n.fract() == 0.0 => n as u64,
                Some(n) => return Err(invalid("snapshotMaxBytes", "a whole number of bytes", n)),
            },
            egress,
            kern: locate::find_kern()?,
        })
    }
}

/// `snapshotDir`: an absolute host path without NUL.
fn check_snapshot_dir(v: Option<String>) -> Result<Option<PathBuf>> {
    match v {
        Some(d) if d.contains('\0') || !d.starts_with('/') => {
            Err(invalid("snapshotDir", "an absolute host path", shown(&d)))
        }
        d => Ok(d.map(PathBuf::from)),
    }
}

/// The most ready boxes a session may keep.
const PREWARM_MAX: u32 = 16;

/// `prewarm`: a whole number of boxes, 0 to [`PREWARM_MAX`]; absent, `KERN_SANDBOX_PREWARM` or
/// the default.
fn check_prewarm(v: Option<f64>) -> Result<usize> {
    let max = PREWARM_MAX;
    let v = match v {
        Some(v) => v,
        None => match std::env::var("KERN_SANDBOX_PREWARM") {
            Ok(s) if !s.trim().is_empty() => s.trim().parse::<f64>().map_err(|_| {
                Error::InvalidOption(format!(
                    "invalid KERN_SANDBOX_PREWARM: expected a whole number 0-{max}, got {}",
                    shown(&s)
                ))
            })?,
            _ => return Ok(DEFAULTS.prewarm as usize),
        },
    };
    if v.fract() != 0.0 || !(0.0..=f64::from(max)).contains(&v) {
        return Err(invalid("prewarm", &format!("a whole number 0-{max}"), v));
    }
    Ok(v as usize)
}

/// A byte limit given as a JS number: absent, or a non-negative count (capped at u64::MAX).
pub fn nonnegative_bytes(v: Option<f64>, what: &str) -> napi::Result<Option<u64>> {
    match v {
        None => Ok(None),
        Some(n) if n.is_finite() && n >= 0.0 => Ok(Some(n.min(u64::MAX as f64) as u64)),
        Some(_) => Err(Error::InvalidOption(format!(
            "{what} must be a non-negative number of bytes"
        ))
        .into()),
    }
}

/// How an error message shows a value the caller gave: quoted, escaped, cut at 60 characters.
fn shown(v: &str) -> String {
    match v.char_indices().nth(60) {
        Some((end, _)) => format!("{:?}", format!("{}...", &v[..end])),
        None => format!("{v:?}"),
    }
}

/// A refused option value, worded the same way for every option.
fn invalid(option: &str, expected: &str, got: impl std::fmt::Display) -> Error {
    Error::InvalidOption(format!(
        "invalid option {option}: expected {expected}, got {got}"
    ))
}

/// Checks each entry of a list option.
fn each(v: Option<Vec<String>>, check: fn(String) -> Result<String>) -> Result<Vec<String>> {
    v.unwrap_or_default().into_iter().map(check).collect()
}

fn check_setup(setup: Option<String>) -> Result<Option<String>> {
    match setup {
        Some(s) if s.contains('\0') => Err(invalid(
            "setup",
            "a shell command without NUL bytes",
            shown(&s),
        )),
        Some(s) if s.trim().is_empty() => Ok(None),
        s => Ok(s),
    }
}

fn check_workspace(workspace: Option<String>) -> Result<Option<PathBuf>> {
    match workspace {
        Some(w) if w.contains('\0') => Err(Error::mount(format!(
            "invalid option workspace: a host path cannot contain a NUL byte, got {}",
            shown(&w)
        ))),
        w => Ok(w.map(PathBuf::from)),
    }
}

fn check_cpus(cpus: Option<Either<f64, Null>>) -> Result<Option<f64>> {
    match cpus {
        None | Some(Either::B(Null)) => Ok(None),
        Some(Either::A(c)) if c.is_finite() && c > 0.0 && c <= 4096.0 => Ok(Some(c)),
        Some(Either::A(c)) => Err(invalid("cpus", "a positive number of cores or null", c)),
    }
}

fn check_max_output(n: Option<f64>) -> Result<usize> {
    match n {
        None => Ok(DEFAULTS.max_output),
        Some(n) if n.is_finite() && n >= 1.0 => Ok(n.min(usize::MAX as f64 / 2.0) as usize),
        Some(n) => Err(invalid("maxOutputBytes", "a positive number of bytes", n)),
    }
}

/// `egressAllow` restricts run boxes to an allowlist, `network: true` opens the host network, a
/// policy object (checked here, once) sends every box through the session's egress proxy.
fn check_network(
    network: Option<Either<bool, NetworkPolicy>>,
    egress: Option<Vec<String>>,
) -> Result<(bool, Option<Policy>, Vec<String>)> {
    let network = match network {
        None => DEFAULTS.network,
        Some(Either::A(on)) => on,
        Some(Either::B(policy)) => {
            let policy = policy.check()?;
            if egress.is_some() {
                return Err(Error::InvalidOption(
                    "egressAllow and a network policy are mutually exclusive: put the names in \
                     the policy's allowOut instead"
                        .into(),
                ));
            }
            return Ok((false, Some(policy), Vec::new()));
        }
    };
    let egress = each(egress, check_domain)?;
    if network && !egress.is_empty() {
        return Err(Error::InvalidOption(
            "egressAllow and network:true are mutually exclusive: egressAllow restricts run \
             boxes to a domain allowlist, network:true gives them the full host network"
                .into(),
        ));
    }
    Ok((network, None, egress))
}

fn check_mounts(mounts: Option<Vec<MountInput>>) -> Result<Vec<Mount>> {
    let mut out = Vec::new();
    for m in mounts.unwrap_or_default() {
        let (source, target) = validate_mount(&m.source, &m.target)?;
        out.push(Mount {
            source,
            target,
            read_only: m.read_only,
        });
    }
    Ok(out)
}

/// A per-call or session deadline: finite, positive, at most a year.
pub fn check_timeout(t: f64) -> Result<f64> {
    if t.is_finite() && t > 0.0 && t <= MAX_TIMEOUT_S {
        Ok(t)
    } else {
        Err(invalid(
            "timeoutS",
            "a positive number of seconds, at most a year",
            t,
        ))
    }
}

/// A whole-number cap: absent is the default, null is "uncapped".
fn whole_cap(
    v: Option<Either<f64, Null>>,
    default: u64,
    name: &str,
    max: u64,
) -> Result<Option<u64>> {
    match v {
        None => Ok(Some(default)),
        Some(Either::B(Null)) => Ok(None),
        Some(Either::A(n)) if n.is_finite() && n >= 1.0 && n.fract() == 0.0 && n <= max as f64 => {
            Ok(Some(n as u64))
        }
        Some(Either::A(n)) => Err(invalid(
            name,
            &format!("a whole number from 1 to {max}, or null"),
            n,
        )),
    }
}

/// An image reference: registry/name:tag@digest characters only, never starting with `-`, so the
/// value can never read as a flag to kern.
pub fn check_image(i: String) -> Result<String> {
    let ok = !i.is_empty()
        && i.len() <= 512
        && !i.starts_with('-')
        && i.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-/:@+".contains(&b));
    if ok {
        Ok(i)
    } else {
        Err(invalid(
            "image",
            "an image name like \"python:3.12-slim\" (letters, digits and ._-/:@+, not starting with '-')",
            shown(&i),
        ))
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
        Err(invalid(
            "profiles",
            "'vcpu:NAME', 'vgpio:NAME' or 'vdisk:NAME' with an alphanumeric profile name defined \
             in your kern.toml",
            shown(&t),
        ))
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
        Err(invalid(
            "egressAllow",
            "a bare hostname like 'pkgs.example.org' (no scheme, port, path, wildcard or spaces)",
            shown(&d),
        ))
    }
}

/// The capabilities of capabilities(7), by number.
const CAPABILITIES: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
];

/// A capability name (with or without `CAP_`, any case) or `ALL`, handed to kern in the form its
/// documentation uses: upper case, no prefix.
fn check_capability(c: String) -> Result<String> {
    let upper = c.to_ascii_uppercase();
    let name = upper.strip_prefix("CAP_").unwrap_or(&upper);
    if name == "ALL" || CAPABILITIES.contains(&name) {
        Ok(name.to_string())
    } else {
        Err(invalid(
            "capDrop",
            "\"ALL\" or a capability name of capabilities(7), like \"NET_RAW\" or \"CAP_NET_RAW\"",
            shown(&c),
        ))
    }
}

fn check_security_profile(p: String) -> Result<String> {
    if p == "untrusted" {
        Ok(p)
    } else {
        Err(invalid(
            "securityProfile",
            "\"untrusted\" (the only profile)",
            shown(&p),
        ))
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
        Err(invalid(
            "apparmor",
            "a profile name of letters, digits, '.', '_' or '-'",
            shown(&p),
        ))
    }
}

/// The workspace's path in the box: absolute and plain (names of `[A-Za-z0-9._-]`, no `.` or `..`,
/// no empty component), not `/` and not under kern's own `/proc`, `/sys` or `/dev`. It reaches
/// kern's argv inside `-v` and `--workdir`, so nothing in it may read as a separator or a flag.
fn check_box_workspace(p: String) -> Result<String> {
    let names: Vec<&str> = p.strip_prefix('/').unwrap_or("").split('/').collect();
    let plain = |n: &&str| {
        !n.is_empty()
            && *n != "."
            && *n != ".."
            && n.len() <= 255
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    };
    let ok = p.starts_with('/')
        && p.len() <= 1024
        && names.iter().all(plain)
        && !["proc", "sys", "dev"].contains(&names[0]);
    if ok {
        Ok(p)
    } else {
        Err(invalid(
            "boxWorkspace",
            "an absolute path in the box like \"/home/user\" (names of letters, digits, '.', '_' \
             or '-'; not '/', '/proc', '/sys' or '/dev')",
            shown(&p),
        ))
    }
}

fn env_file_body(env: Vec<EnvInput>, box_workspace: &str) -> std::result::Result<String, String> {
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
        body.push_str(&format!(
            "PYTHONPATH={box_workspace}/{}\n",
            crate::workspace::DEPS_DIR
        ));
    }
    Ok(body)
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
    fn js_gets_the_defaults_under_the_options_names() {
        let d = option_defaults();
        assert_eq!(d.image, DEFAULTS.image);
        assert_eq!((d.memory_mb, d.pids), (512, 256));
        assert_eq!(d.max_output_bytes, (64 << 20) as f64);
        assert_eq!(d.cap_drop, ["ALL"]);
    }

    #[test]
    fn capabilities_are_those_of_capabilities_7() {
        for (given, passed) in [
            ("ALL", "ALL"),
            ("all", "ALL"),
            ("NET_RAW", "NET_RAW"),
            ("cap_sys_admin", "SYS_ADMIN"),
            ("Cap_Checkpoint_Restore", "CHECKPOINT_RESTORE"),
        ] {
            assert_eq!(check_capability(given.into()).unwrap(), passed);
        }
        for bad in [
            "",
            "CAP_",
            "NET-RAW",
            "NET_RAW,SYS_ADMIN",
            "--privileged",
            &"A".repeat(40),
        ] {
            let e = check_capability(bad.into()).unwrap_err().to_string();
            assert!(e.starts_with("invalid option capDrop: "), "{e}");
        }
    }

    #[test]
    fn network_is_a_boolean_or_a_checked_policy() {
        let policy = |allow: serde_json::Value| {
            Some(Either::B(NetworkPolicy {
                allow_out: Some(allow),
                ..Default::default()
            }))
        };
        let (on, p, allow) = check_network(policy(serde_json::json!(["api.test"])), None).unwrap();
        assert!(!on && p.is_some() && allow.is_empty());
        let e = check_network(policy(serde_json::json!(["a.*.com"])), None).unwrap_err();
        assert_eq!(e.code(), "ERR_BAD_NETWORK_POLICY");
        assert!(e.to_string().starts_with("network.allowOut[0]: "), "{e}");
        let e = check_network(
            policy(serde_json::json!(["a.test"])),
            Some(vec!["a.test".into()]),
        )
        .unwrap_err();
        assert_eq!(e.code(), "ERR_INVALID_OPTION");
        // The boolean forms as before.
        assert!(matches!(check_network(None, None), Ok((false, None, _))));
        assert!(matches!(
            check_network(Some(Either::A(true)), None),
            Ok((true, None, _))
        ));
        assert!(check_network(Some(Either::A(true)), Some(vec!["a.test".into()])).is_err());
    }

    #[test]
    fn long_values_are_cut_in_messages() {
        let e = check_image("-".repeat(1000)).unwrap_err().to_string();
        assert!(e.len() < 300 && e.contains("..."), "{e}");
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
        let body = env_file_body(
            vec![EnvInput {
                key: "A".into(),
                value: "1".into(),
            }],
            "/workspace",
        )
        .unwrap();
        assert_eq!(body, "A=1\nPYTHONPATH=/workspace/.deps\n");
        let body = env_file_body(
            vec![EnvInput {
                key: "PYTHONPATH".into(),
                value: "/x".into(),
            }],
            "/workspace",
        )
        .unwrap();
        assert_eq!(body, "PYTHONPATH=/x\n");
        assert!(env_file_body(
            vec![EnvInput {
                key: "A".into(),
                value: "x\ny".into()
            }],
            "/workspace"
        )
        .is_err());
        assert!(env_file_body(
            vec![EnvInput {
                key: "A=B".into(),
                value: "x".into()
            }],
            "/workspace"
        )
        .is_err());
        assert!(env_file_body(
            vec![EnvInput {
                key: "#A".into(),
                value: "x".into()
            }],
            "/workspace"
        )
        .is_err());
        assert!(env_file_body(
            vec![EnvInput {
                key: " A".into(),
                value: "x".into()
            }],
            "/workspace"
        )
        .is_err());
        assert!(env_file_body(
            vec![EnvInput {
                key: "A".into(),
                value: "x ".into()
            }],
            "/workspace"
        )
        .is_err());
        assert!(env_file_body(
            vec![EnvInput {
                key: "A".into(),
                value: " x".into()
            }],
            "/workspace"
        )
        .is_ok());
        let body = env_file_body(vec![], "/home/user").unwrap();
        assert_eq!(body, "PYTHONPATH=/home/user/.deps\n");
    }

    #[test]
    fn box_workspace_is_a_plain_absolute_path() {
        for ok in ["/workspace", "/home/user", "/a/b.c/d_e-f"] {
            assert_eq!(check_box_workspace(ok.into()).unwrap(), ok);
        }
        for bad in [
            "",
            "/",
            "home/user",
            "/home/user/",
            "//x",
            "/a/../b",
            "/a/./b",
            "/a:b",
            "/a,b",
            "/a b",
            "/proc",
            "/sys/x",
            "/dev",
            "/a\nb",
        ] {
            assert!(check_box_workspace(bad.into()).is_err(), "{bad:?}");
        }
    }
}
