//! Machine and process option intake: the `#[napi(object)]` shapes lib/machine.js hands over, and
//! their one-time conversion into validated configs, as src/options.rs does for a Sandbox. Values
//! arrive untyped, so each option's checks (its JS type, its range, what kern and the agent
//! accept) are one function here, and a refused value is one `ERR_INVALID_OPTION` naming it. What
//! only JS can check (callbacks, an AbortSignal, a path argument's type: TypeErrors) or do (make a
//! typed array or DataView a Buffer) stays in lib/options.js.

use std::collections::HashMap;

use napi::bindgen_prelude::{FromNapiValue, Unknown};
use napi::JsValue;
use napi_derive::napi;

use super::Stdin;
use crate::egress::{NetworkPolicy, Policy};
use crate::errors::Error;
use crate::options::js::{self, given};
use crate::options::{check_image, check_timeout};

type Result<T> = napi::Result<T>;

/// `sbx.machine(opts)` as lib/machine.js passes it.
#[napi(object)]
pub struct MachineOptions<'a> {
    /// The machine's image; default the Sandbox's.
    #[napi(ts_type = "string | null")]
    pub image: Option<Unknown<'a>>,
    /// Machine ports to expose on 127.0.0.1 once it runs.
    #[napi(ts_type = "number[] | null")]
    pub ports: Option<Unknown<'a>>,
    /// How long the machine may take to start, in seconds; default the Sandbox's timeoutS.
    #[napi(ts_type = "number | null")]
    pub timeout_s: Option<Unknown<'a>>,
    /// `false`, `true` or a network policy; default the Sandbox's `network`.
    #[napi(ts_type = "boolean | NetworkPolicy | null")]
    pub network: Option<Unknown<'a>>,
    /// Seconds the machine lives (its clock stops while paused); default: until closed.
    #[napi(ts_type = "number | null")]
    pub lifetime_s: Option<Unknown<'a>>,
    /// What its lifetime's end does: `'close'` (default) or `'pause'`.
    #[napi(ts_type = "'close' | 'pause' | null")]
    pub on_timeout: Option<Unknown<'a>>,
    /// A snapshot's id or name (lib/machine.js passes a MachineSnapshot's id) to start on.
    #[napi(ts_type = "string | null")]
    pub from: Option<Unknown<'a>>,
}

/// A machine's own `network`.
pub enum Network {
    /// No network at all.
    Off,
    /// The host's network, as a Sandbox's `network: true`.
    Host,
    /// A proxy of the machine's own serves this policy.
    Policy(Policy),
}

/// A validated `sbx.machine()` call.
pub struct MachineConfig {
    pub image: Option<String>,
    pub ports: Vec<u16>,
    pub timeout_s: Option<f64>,
    /// None: the Sandbox's.
    pub network: Option<Network>,
    pub lifetime: super::lifetime::LifetimeConfig,
    /// The snapshot (id or name) the machine starts on.
    pub from: Option<String>,
}

impl MachineConfig {
    pub fn from_options(o: MachineOptions) -> Result<MachineConfig> {
        let image = match given(o.image)? {
            None => None,
            Some(v) => match js::string(&v)? {
                Some(s) => Some(check_image(s)?),
                None => {
                    return Err(refused(format!(
                        "image must be a string, got {}",
                        js::show(&v)?
                    )))
                }
            },
        };
        let ports = match given(o.ports)? {
            None => Vec::new(),
            Some(v) => js::array(&v)?
                .ok_or_else(|| refused("ports must be an array of port numbers".into()))?
                .iter()
                .map(port)
                .collect::<Result<_>>()?,
        };
        let from = match given(o.from)? {
            None => None,
            Some(v) => match js::string(&v)? {
                Some(s) if !s.is_empty() && !s.contains('\0') => {
                    if image.is_some() {
                        return Err(refused(
                            "from: a machine from a snapshot runs the snapshot's image; \
                             image may not be given with it"
                                .into(),
                        ));
                    }
                    Some(s)
                }
                _ => {
                    return Err(refused(format!(
                        "from must be a MachineSnapshot, or a snapshot's id or name, got {}",
                        js::show(&v)?
                    )))
                }
            },
        };
        Ok(MachineConfig {
            image,
            ports,
            timeout_s: timeout(o.timeout_s)?,
            network: network(o.network)?,
            lifetime: super::lifetime::LifetimeConfig::from_options(o.lifetime_s, o.on_timeout)?,
            from,
        })
    }
}

/// `network`: a boolean, or a policy object (checked: `ERR_BAD_NETWORK_POLICY` names the entry).
fn network(v: Option<Unknown>) -> Result<Option<Network>> {
    let Some(v) = given(v)? else {
        return Ok(None);
    };
    if let Some(on) = js::boolean(&v)? {
        return Ok(Some(if on { Network::Host } else { Network::Off }));
    }
    if js::object(&v)?.is_some() && !v.is_array()? {
        return Ok(Some(Network::Policy(policy(v)?)));
    }
    Err(refused(format!(
        "network must be a boolean or a network policy object, got {}",
        js::show(&v)?
    )))
}

/// A policy object as JS gave it, checked once.
pub fn policy(v: Unknown) -> Result<Policy> {
    let input = NetworkPolicy::from_unknown(v)?;
    Ok(input.check()?)
}

/// exec's and spawn's options as lib/machine.js passes them (each reads what applies to it).
#[napi(object)]
pub struct ProcessOptions<'a> {
    /// The working directory; its type is checked in JS (a TypeError, as for every path).
    pub cwd: Option<String>,
    #[napi(ts_type = "Record<string, string> | null")]
    pub env: Option<Unknown<'a>>,
    /// exec: a string or bytes written to stdin before EOF; spawn: `true` keeps stdin open for
    /// write()/end().
    #[napi(ts_type = "string | Buffer | boolean | null")]
    pub stdin: Option<Unknown<'a>>,
    /// spawn: `{ cols, rows }` runs the process on a terminal.
    #[napi(ts_type = "{ cols: number; rows: number } | null")]
    pub pty: Option<Unknown<'a>>,
    #[napi(ts_type = "number | null")]
    pub timeout_s: Option<Unknown<'a>>,
    #[napi(ts_type = "number | null")]
    pub max_output_bytes: Option<Unknown<'a>>,
    #[napi(ts_type = "string | null")]
    pub user: Option<Unknown<'a>>,
    /// exec: the id an AbortSignal cancels the call by.
    pub call_id: Option<u32>,
}

/// Which call the options are for: exec writes stdin and ignores `pty`; spawn may keep stdin
/// open and run on a terminal.
#[derive(Clone, Copy)]
pub enum Call {
    Exec,
    Spawn,
}

/// Validated process options; the machine resolves `cwd` and the defaults.
pub struct ProcessConfig {
    pub cwd: Option<String>,
    pub env: HashMap<String, String>,
    pub stdin: Stdin,
    pub pty: Option<(u16, u16)>,
    pub timeout_s: Option<f64>,
    /// The capture cap for stdout and stderr, each; absent, the Sandbox's.
    pub max_output: Option<usize>,
    pub user: Option<String>,
    pub call_id: Option<u32>,
}

impl ProcessConfig {
    pub fn from_options(o: ProcessOptions, call: Call) -> Result<ProcessConfig> {
        let user = user(o.user)?;
        let env = env(o.env)?;
        let timeout_s = timeout(o.timeout_s)?;
        let max_output = max_output(o.max_output_bytes)?;
        let (stdin, pty) = match call {
            Call::Exec => (exec_stdin(o.stdin)?, None),
            Call::Spawn => {
                let pty = pty_size(o.pty)?;
                let open = match given(o.stdin)? {
                    Some(v) => js::boolean(&v)? == Some(true),
                    None => false,
                };
                // A terminal's input is always open: it is how keys reach it.
                let stdin = if open || pty.is_some() {
                    Stdin::Open
                } else {
                    Stdin::Closed
                };
                (stdin, pty)
            }
        };
        Ok(ProcessConfig {
            cwd: o.cwd,
            env,
            stdin,
            pty,
            timeout_s,
            max_output,
            user,
            call_id: o.call_id,
        })
    }
}

fn refused(message: String) -> napi::Error {
    Error::InvalidOption(message).into()
}

/// A number option that must be positive, in the words every such option uses.
fn positive(name: &str, v: Option<Unknown>) -> Result<Option<f64>> {
    match given(v)? {
        None => Ok(None),
        Some(v) => match js::number(&v)? {
            Some(n) if n > 0.0 => Ok(Some(n)),
            _ => Err(refused(format!("{name} must be a positive number"))),
        },
    }
}

/// `timeoutS` of a machine, a process or a machine's kernel: positive, then at most a year.
pub fn timeout(v: Option<Unknown>) -> Result<Option<f64>> {
    Ok(positive("timeoutS", v)?.map(check_timeout).transpose()?)
}

fn max_output(v: Option<Unknown>) -> Result<Option<usize>> {
    match positive("maxOutputBytes", v)? {
        None => Ok(None),
        Some(n) if n.is_finite() && n >= 1.0 => Ok(Some(n as usize)),
        Some(_) => Err(refused("maxOutputBytes must be positive".into())),
    }
}

/// `env`: an object of strings, each a variable the agent can set (a name without `=` or NUL, a
/// value without NUL).
fn env(v: Option<Unknown>) -> Result<HashMap<String, String>> {
    let Some(v) = given(v)? else {
        return Ok(HashMap::new());
    };
    let obj = match js::object(&v)? {
        Some(o) if !v.is_array()? => o,
        _ => return Err(refused("env must be an object".into())),
    };
    let mut env = Vec::new();
    for (k, v) in js::entries(&obj)? {
        match js::string(&v)? {
            Some(s) => env.push((k, s)),
            None => {
                return Err(refused(format!(
                    "env.{k} must be a string, got {}",
                    js::show(&v)?
                )))
            }
        }
    }
    for (k, v) in &env {
        check_env_var(k, v)?;
    }
    Ok(env.into_iter().collect())
}

fn check_env_var(k: &str, v: &str) -> std::result::Result<(), Error> {
    if k.is_empty() || k.contains(['=', '\0']) || v.contains('\0') {
        return Err(Error::InvalidOption(format!(
            "env: {k:?} is not a valid variable (a name without '=' or NUL, a value without NUL)"
        )));
    }
    Ok(())
}

/// `user`: a user name or uid the image knows; never read as a flag.
fn user(v: Option<Unknown>) -> Result<Option<String>> {
    let Some(v) = given(v)? else { return Ok(None) };
    let Some(u) = js::string(&v)? else {
        return Err(refused(format!(
            "user must be a string, got {}",
            js::show(&v)?
        )));
    };
    Ok(Some(check_user(u)?))
}

fn check_user(u: String) -> std::result::Result<String, Error> {
    let ok = !u.is_empty()
        && u.len() <= 64
        && !u.starts_with('-')
        && u.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if ok {
        Ok(u)
    } else {
        Err(Error::InvalidOption(format!(
            "user: {u:?} is not a user name or uid"
        )))
    }
}

/// exec's `stdin`: a string (as UTF-8, as Buffer.from writes it) or bytes (lib/options.js makes
/// a Buffer of any other view first).
fn exec_stdin(v: Option<Unknown>) -> Result<Stdin> {
    use napi::bindgen_prelude::{Buffer, FromNapiValue};
    let Some(v) = given(v)? else {
        return Ok(Stdin::Closed);
    };
    if let Some(s) = js::string(&v)? {
        return Ok(Stdin::Data(s.into_bytes()));
    }
    if v.is_buffer()? {
        return Ok(Stdin::Data(Buffer::from_unknown(v)?.to_vec()));
    }
    Err(refused("stdin must be a string or a Buffer".into()))
}

/// spawn's `pty` and resize()'s size: `{ cols, rows }` of whole positive numbers a terminal has.
pub fn pty_size(v: Option<Unknown>) -> Result<Option<(u16, u16)>> {
    use napi::bindgen_prelude::JsObjectValue;
    let Some(v) = given(v)? else { return Ok(None) };
    let shape = || refused("pty must be { cols, rows } with whole numbers".into());
    let obj = js::object(&v)?.ok_or_else(shape)?;
    let cols = js::integer(&obj.get_named_property::<Unknown>("cols")?)?.ok_or_else(shape)?;
    let rows = js::integer(&obj.get_named_property::<Unknown>("rows")?)?.ok_or_else(shape)?;
    if cols <= 0.0 || rows <= 0.0 {
        return Err(refused("pty cols and rows must be positive".into()));
    }
    Ok(Some((term_size("cols", cols)?, term_size("rows", rows)?)))
}

fn term_size(what: &str, n: f64) -> std::result::Result<u16, Error> {
    if n >= 1.0 && n <= f64::from(u16::MAX) {
        Ok(n as u16)
    } else {
        Err(Error::InvalidOption(format!(
            "pty {what} must be a positive whole number up to 65535"
        )))
    }
}

/// A machine port: `exposePort(port)` and each of the `ports` option.
pub fn port(v: &Unknown) -> Result<u16> {
    match js::integer(v)? {
        Some(p) if (1.0..=65535.0).contains(&p) => Ok(p as u16),
        _ => Err(refused(format!(
            "port must be an integer from 1 to 65535, got {}",
            js::show(v)?
        ))),
    }
}

/// The signals of Linux by name (Node's `os.constants.signals`).
const SIGNALS: &[(&str, i32)] = &[
    ("SIGHUP", libc::SIGHUP),
    ("SIGINT", libc::SIGINT),
    ("SIGQUIT", libc::SIGQUIT),
    ("SIGILL", libc::SIGILL),
    ("SIGTRAP", libc::SIGTRAP),
    ("SIGABRT", libc::SIGABRT),
    ("SIGIOT", libc::SIGIOT),
    ("SIGBUS", libc::SIGBUS),
    ("SIGFPE", libc::SIGFPE),
    ("SIGKILL", libc::SIGKILL),
    ("SIGUSR1", libc::SIGUSR1),
    ("SIGSEGV", libc::SIGSEGV),
    ("SIGUSR2", libc::SIGUSR2),
    ("SIGPIPE", libc::SIGPIPE),
    ("SIGALRM", libc::SIGALRM),
    ("SIGTERM", libc::SIGTERM),
    ("SIGCHLD", libc::SIGCHLD),
    ("SIGSTKFLT", libc::SIGSTKFLT),
    ("SIGCONT", libc::SIGCONT),
    ("SIGSTOP", libc::SIGSTOP),
    ("SIGTSTP", libc::SIGTSTP),
    ("SIGTTIN", libc::SIGTTIN),
    ("SIGTTOU", libc::SIGTTOU),
    ("SIGURG", libc::SIGURG),
    ("SIGXCPU", libc::SIGXCPU),
    ("SIGXFSZ", libc::SIGXFSZ),
    ("SIGVTALRM", libc::SIGVTALRM),
    ("SIGPROF", libc::SIGPROF),
    ("SIGWINCH", libc::SIGWINCH),
    ("SIGIO", libc::SIGIO),
    ("SIGPOLL", libc::SIGPOLL),
    ("SIGPWR", libc::SIGPWR),
    ("SIGSYS", libc::SIGSYS),
];

/// kill()'s signal: a name (any case) or a number from 1 to 64; `undefined`, SIGKILL (`null` is
/// no signal, and refused).
pub fn signal(v: Unknown) -> Result<i32> {
    if v.get_type()? == napi::ValueType::Undefined {
        return Ok(libc::SIGKILL);
    }
    if let Some(n) = js::integer(&v)? {
        return match signal_number(n) {
            Some(s) => Ok(s),
            None => Err(refused(format!("{} is not a signal number", js::show(&v)?))),
        };
    }
    match js::string(&v)?.and_then(|s| signal_named(&s)) {
        Some(s) => Ok(s),
        None => Err(refused(format!("unknown signal {}", js::show(&v)?))),
    }
}

fn signal_named(name: &str) -> Option<i32> {
    let upper = name.to_uppercase();
    SIGNALS.iter().find(|(n, _)| *n == upper).map(|(_, s)| *s)
}

fn signal_number(n: f64) -> Option<i32> {
    (1.0..=64.0).contains(&n).then_some(n as i32)
}

/// readFile's `maxBytes`: positive; no cap when absent.
pub fn max_bytes(v: Option<Unknown>) -> Result<Option<u64>> {
    crate::options::nonnegative_bytes(positive("maxBytes", v)?, "maxBytes")
}

/// writeFile's `mode`: permission bits.
pub fn file_mode(v: Option<Unknown>) -> Result<Option<u32>> {
    let Some(v) = given(v)? else { return Ok(None) };
    match js::integer(&v)? {
        Some(m) if m >= 0.0 && m <= f64::from(0o7777) => Ok(Some(m as u32)),
        Some(m) if m >= 0.0 => Err(refused(
            "mode must be permission bits (at most 0o7777)".into(),
        )),
        _ => Err(refused("mode must be a non-negative integer".into())),
    }
}

/// list()'s `depth`: whole levels, 1 (the default) lists the directory itself.
pub fn depth(v: Option<Unknown>) -> Result<u32> {
    let Some(v) = given(v)? else { return Ok(1) };
    match js::integer(&v)? {
        Some(d) if d >= 1.0 => Ok(d.min(f64::from(u32::MAX)) as u32),
        _ => Err(refused("depth must be an integer >= 1".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_by_name_in_any_case() {
        assert_eq!(signal_named("SIGTERM"), Some(libc::SIGTERM));
        assert_eq!(signal_named("sigint"), Some(libc::SIGINT));
        assert_eq!(signal_named("SIGIOT"), Some(libc::SIGABRT));
        for bad in ["TERM", "SIGNOPE", "", "SIGRTMIN", "constructor"] {
            assert_eq!(signal_named(bad), None, "{bad}");
        }
    }

    #[test]
    fn signal_numbers_are_1_to_64() {
        assert_eq!(signal_number(9.0), Some(9));
        assert_eq!(signal_number(64.0), Some(64));
        for bad in [0.0, -0.0, 65.0, -9.0, 4294967305.0] {
            assert_eq!(signal_number(bad), None, "{bad}");
        }
    }

    #[test]
    fn env_vars_the_agent_can_set() {
        assert!(check_env_var("A", "1 2=3").is_ok());
        for (k, v) in [("", "x"), ("A=B", "x"), ("A\0B", "x"), ("A", "x\0y")] {
            assert!(check_env_var(k, v).is_err(), "{k:?}={v:?}");
        }
    }

    #[test]
    fn users_are_names_or_uids() {
        for ok in ["root", "1000", "www-data", "a.b_c"] {
            assert_eq!(check_user(ok.into()).unwrap(), ok);
        }
        for bad in ["", "--root", "a b", "a:b", "é", &"u".repeat(65)] {
            assert!(check_user(bad.into()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn terminal_sizes_fit_a_u16() {
        assert_eq!(term_size("cols", 65535.0).unwrap(), 65535);
        let e = term_size("rows", 65536.0).unwrap_err().to_string();
        assert_eq!(e, "pty rows must be a positive whole number up to 65535");
    }
}
