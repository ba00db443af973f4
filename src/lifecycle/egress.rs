//! The box side of an egress proxy (issue 37): how a program in a box reaches the host's proxy, a
//! unix socket, and what it sees of it.
//!
//! The box keeps kern's default network (loopback only, no route out). Three things go in, all
//! read-only binds: the proxy's socket at [`SOCK_IN_BOX`], the proxy CA's certificate at
//! [`CA_IN_BOX`] (never its key), and our agent. The agent relays `127.0.0.1:`[`PORT`] in the box
//! to the socket: for a one-shot or kernel box it wraps the workload (`agent egress ... -- argv`,
//! then execs it in place, so the workload keeps PID 1, its exit code and its signals); a
//! machine's agent, PID 1 already, runs the relay on a thread. Before the workload runs it writes
//! [`BUNDLE_IN_BOX`]: the image's own CA bundle followed by the proxy's CA. A second env file,
//! read after the session's so that its values win, points the usual variables at both
//! ([`env_body`]).

use std::ffi::OsString;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

pub use crate::egress::attach::EgressAttach;
use crate::errors::{Error, Result};

/// The relay's port on the box's loopback (squid's, rarely taken by a dev server).
pub const PORT: u16 = 3128;
/// Where the proxy's socket, the CA certificate and the agent appear in the box.
pub const SOCK_IN_BOX: &str = "/.kern-sandbox/egress.sock";
pub const CA_IN_BOX: &str = "/.kern-sandbox/egress-ca.pem";
/// Where our agent binary is bound in every box that uses it (machines, and egress relays).
pub const AGENT_IN_BOX: &str = "/.kern-sandbox/agent";
/// The combined bundle the relay writes at start. /dev/shm is a tmpfs that stays writable in a
/// `--ro` box, and under `--security-profile untrusted` (checked on kern and the stand-in).
pub const BUNDLE_IN_BOX: &str = "/dev/shm/kern-sandbox-ca-bundle.pem";
/// Names no proxy is used for: the box's own loopback.
const NO_PROXY: &str = "localhost,127.0.0.1,::1";

/// An attach with its host files written: what a box's argv refers to.
#[derive(Debug, Clone)]
pub struct EgressBox {
    pub attach: EgressAttach,
    /// The CA certificate, bound at [`CA_IN_BOX`].
    pub ca_file: PathBuf,
    /// The env file of [`env_body`].
    pub env_file: PathBuf,
}

impl EgressAttach {
    /// Writes the CA certificate and the env file into `dir` (created 0700; it must not exist),
    /// checking first that every path can be bound.
    pub fn prepare(&self, dir: &Path) -> Result<EgressBox> {
        for (p, what) in [
            (&self.sock, "the egress proxy's socket"),
            (&self.agent, "the agent"),
        ] {
            check_bind_source(p, what)?;
        }
        if !self.ca_pem.contains("-----BEGIN CERTIFICATE-----") || self.ca_pem.contains('\0') {
            return Err(Error::InvalidOption(
                "the egress CA must be a PEM certificate (and never a private key)".into(),
            ));
        }
        if self.ca_pem.contains("PRIVATE KEY") {
            return Err(Error::InvalidOption(
                "the egress CA holds a private key: only its certificate may enter a box".into(),
            ));
        }
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(dir)
            .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
        check_bind_source(dir, "the egress directory")?;
        let ca_file = dir.join("ca.pem");
        let env_file = dir.join("env");
        write_new(&ca_file, self.ca_pem.as_bytes(), 0o644)?;
        write_new(&env_file, env_body().as_bytes(), 0o600)?;
        Ok(EgressBox {
            attach: self.clone(),
            ca_file,
            env_file,
        })
    }
}

/// What a program in an attached box finds in its environment: the proxy for HTTP and HTTPS
/// (both spellings), none for loopback, and the bundle for OpenSSL, Python (requests, pip),
/// curl and git; Node adds the proxy CA to its own roots and, from Node 24 (and 22.21), uses the
/// proxy variables for `fetch` and `http` too.
pub fn env_body() -> String {
    let proxy = format!("http://127.0.0.1:{PORT}");
    let mut vars: Vec<(&str, &str)> = vec![
        ("HTTP_PROXY", &proxy),
        ("HTTPS_PROXY", &proxy),
        ("http_proxy", &proxy),
        ("https_proxy", &proxy),
        ("NO_PROXY", NO_PROXY),
        ("no_proxy", NO_PROXY),
        ("NODE_USE_ENV_PROXY", "1"),
        ("NODE_EXTRA_CA_CERTS", CA_IN_BOX),
    ];
    for k in [
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "GIT_SSL_CAINFO",
        "PIP_CERT",
    ] {
        vars.push((k, BUNDLE_IN_BOX));
    }
    vars.iter().map(|(k, v)| format!("{k}={v}\n")).collect()
}

/// The binds of an attached box; `with_agent` for a box that does not bind the agent already (a
/// machine does). Its env file goes after the session's (see `argv`).
pub fn box_binds(e: &EgressBox, with_agent: bool) -> Vec<OsString> {
    let mut binds = vec![
        (e.attach.sock.as_path(), SOCK_IN_BOX),
        (e.ca_file.as_path(), CA_IN_BOX),
    ];
    if with_agent {
        binds.push((e.attach.agent.as_path(), AGENT_IN_BOX));
    }
    let mut a = Vec::new();
    for (host, at) in binds {
        let mut v = host.as_os_str().to_owned();
        v.push(format!(":{at}:ro"));
        a.extend(["-v".into(), v]);
    }
    a
}

/// The relay's arguments, after `agent egress` (`prefix` "--") or after a machine agent's socket
/// (`prefix` "--egress-").
fn relay_args(prefix: &str) -> Vec<String> {
    [
        ("sock", SOCK_IN_BOX.to_string()),
        ("port", PORT.to_string()),
        ("ca", CA_IN_BOX.to_string()),
        ("bundle", BUNDLE_IN_BOX.to_string()),
    ]
    .into_iter()
    .flat_map(|(k, v)| [format!("{prefix}{k}"), v])
    .collect()
}

/// A one-shot or kernel box's command: the relay first, then the workload in its place.
pub fn wrap(command: &[String]) -> Vec<String> {
    let mut out = vec![AGENT_IN_BOX.to_string(), "egress".to_string()];
    out.extend(relay_args("--"));
    out.push("--".into());
    out.extend(command.iter().cloned());
    out
}

/// What a machine's agent is given after its socket path.
pub fn machine_args() -> Vec<String> {
    relay_args("--egress-")
}

/// A host path that goes into a `-v source:target:ro` argument: absolute, and free of the
/// characters kern's volume syntax splits on.
pub fn check_bind_source(p: &Path, what: &str) -> Result<()> {
    let s = p.to_string_lossy();
    if !p.is_absolute() || s.contains([':', ',', '\n', '\0']) {
        return Err(Error::InvalidOption(format!(
            "{what} must be at an absolute path without ':' or ',' (it is bound into the box): {s}"
        )));
    }
    Ok(())
}

fn write_new(p: &Path, body: &[u8], mode: u32) -> Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(p)
        .and_then(|mut f| f.write_all(body))
        .map_err(|e| Error::io(format!("cannot write {}", p.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    fn attach() -> EgressAttach {
        EgressAttach {
            sock: "/run/p/proxy.sock".into(),
            ca_pem: CA.into(),
            agent: "/opt/kern-sandbox-agent".into(),
        }
    }

    #[test]
    fn the_env_points_every_client_at_the_relay_and_the_bundle() {
        let body = env_body();
        for line in [
            "HTTP_PROXY=http://127.0.0.1:3128",
            "https_proxy=http://127.0.0.1:3128",
            "NO_PROXY=localhost,127.0.0.1,::1",
            "SSL_CERT_FILE=/dev/shm/kern-sandbox-ca-bundle.pem",
            "NODE_EXTRA_CA_CERTS=/.kern-sandbox/egress-ca.pem",
        ] {
            assert!(body.lines().any(|l| l == line), "{line} missing");
        }
        // kern reads it line by line: one KEY=VALUE per line, nothing else.
        assert!(body.lines().all(|l| l.split_once('=').is_some()));
    }

    #[test]
    fn prepare_writes_the_certificate_and_env_privately() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("egress");
        let e = attach().prepare(&dir).unwrap();
        assert_eq!(std::fs::read_to_string(&e.ca_file).unwrap(), CA);
        assert_eq!(std::fs::read_to_string(&e.env_file).unwrap(), env_body());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        // Never twice into the same place.
        assert!(attach().prepare(&dir).is_err());
    }

    #[test]
    fn a_key_or_an_unbindable_path_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let mut a = attach();
        a.ca_pem
            .push_str("-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n");
        assert!(a.prepare(&tmp.path().join("a")).is_err());
        let mut a = attach();
        a.sock = "/run/p:x/proxy.sock".into();
        assert!(a.prepare(&tmp.path().join("b")).is_err());
        let mut a = attach();
        a.ca_pem = "not a certificate".into();
        assert!(a.prepare(&tmp.path().join("c")).is_err());
    }

    #[test]
    fn the_workload_runs_after_the_relay_in_its_place() {
        let cmd = vec!["python3".to_string(), "-c".into(), "print(1)".into()];
        let w = wrap(&cmd);
        assert_eq!(w[..2], ["/.kern-sandbox/agent", "egress"]);
        let dd = w.iter().position(|a| a == "--").unwrap();
        assert_eq!(w[dd + 1..], cmd[..]);
        assert_eq!(
            machine_args(),
            [
                "--egress-sock",
                SOCK_IN_BOX,
                "--egress-port",
                "3128",
                "--egress-ca",
                CA_IN_BOX,
                "--egress-bundle",
                BUNDLE_IN_BOX
            ]
        );
    }
}
