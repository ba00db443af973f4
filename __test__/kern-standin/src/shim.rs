//! The box's first process: finishes setup the way kern's box child does, then execs the workload.
//!
//! bwrap alone cannot reproduce kern at the last step: it sets `PWD`, refuses a missing `--chdir`
//! instead of creating it, and reports a failed exec as its own `bwrap: execvp ...` with status 1 where
//! kern says `kern: cannot start ...` with 127/126. So bwrap execs this binary (bound read-only at
//! [`SHIM_PATH`]) as the box's PID 1 under the seccomp filter; it reads the exec spec from an
//! inherited memfd, wipes and sets the environment, enters the AppArmor profile, changes into the
//! workdir, sheds every inherited descriptor above 2 and execs the workload in its own place.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::FromRawFd;

/// Where the stand-in binary is bound inside the box.
pub const SHIM_PATH: &str = "/run/kern-standin/exec";
/// argv[1] that selects the shim; never a kern verb.
pub const SHIM_VERB: &str = "__kern-standin-exec";

/// What the workload gets: kern's environment, workdir, AppArmor profile and argv.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ExecSpec {
    pub workdir: Option<String>,
    pub apparmor: Option<String>,
    pub env: Vec<(String, String)>,
    pub argv: Vec<String>,
}

impl ExecSpec {
    /// NUL-terminated fields: workdir, apparmor, env count, `K=V`..., argv...
    pub fn encode(&self) -> Vec<u8> {
        let mut fields: Vec<String> = vec![
            self.workdir.clone().unwrap_or_default(),
            self.apparmor.clone().unwrap_or_default(),
            self.env.len().to_string(),
        ];
        fields.extend(self.env.iter().map(|(k, v)| format!("{k}={v}")));
        fields.extend(self.argv.iter().cloned());
        let mut out = Vec::new();
        for f in fields {
            out.extend(f.bytes().filter(|b| *b != 0));
            out.push(0);
        }
        out
    }

    fn decode(bytes: &[u8]) -> Option<ExecSpec> {
        let mut it = bytes
            .split(|b| *b == 0)
            .map(|f| String::from_utf8_lossy(f).into_owned());
        let opt = |s: String| (!s.is_empty()).then_some(s);
        let workdir = opt(it.next()?);
        let apparmor = opt(it.next()?);
        let n: usize = it.next()?.parse().ok()?;
        let env = (0..n)
            .map(|_| {
                let kv = it.next()?;
                let (k, v) = kv.split_once('=')?;
                Some((k.to_string(), v.to_string()))
            })
            .collect::<Option<Vec<_>>>()?;
        let mut argv: Vec<String> = it.collect();
        argv.pop(); // the empty tail after the final NUL
        Some(ExecSpec {
            workdir,
            apparmor,
            env,
            argv,
        })
    }
}

/// Entry point inside the box: `SHIM_PATH SHIM_VERB <spec-fd> <lifeline-rd> <lifeline-wr>`.
/// Never returns.
pub fn run(args: &[String]) -> ! {
    let fd_arg = |i: usize| args.get(i).and_then(|fd| fd.parse::<i32>().ok());
    if let (Some(rd), Some(wr)) = (fd_arg(1), fd_arg(2)) {
        exit_if_orphaned(rd, wr);
    }
    let spec = args
        .first()
        .and_then(|fd| fd.parse::<i32>().ok())
        .filter(|fd| *fd > 2)
        .and_then(read_spec);
    let Some(spec) = spec.filter(|s| !s.argv.is_empty()) else {
        setup_failed("the box's exec spec could not be read");
    };
    set_env(&spec.env);
    if let Some(wd) = &spec.workdir {
        enter_workdir(wd);
    }
    if let Some(profile) = &spec.apparmor {
        if let Err(msg) = apparmor_onexec(profile) {
            setup_failed(&msg);
        }
    }
    drop_ambient_caps();
    shed_inherited_fds();
    exec(&spec)
}

/// Our PDEATHSIG (towards bwrap, whose own is towards the supervisor) is armed by now, so a
/// supervisor that dies from here on takes us along. One that died earlier may have taken bwrap
/// before our PDEATHSIG was armed; its lifeline end is closed then, and the workload must not
/// start with nobody left to stop it.
fn exit_if_orphaned(rd: i32, wr: i32) {
    let mut p = libc::pollfd {
        fd: rd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: plain syscalls on descriptors the supervisor handed us; nothing else uses them.
    let cut = unsafe {
        libc::close(wr);
        libc::poll(&mut p, 1, 0) == 1 && p.revents & libc::POLLHUP != 0
    };
    if cut {
        // SAFETY: _exit never returns and runs nothing of ours.
        unsafe { libc::_exit(128 + libc::SIGKILL) };
    }
    // SAFETY: as above.
    unsafe { libc::close(rd) };
}

/// bwrap raises the kept caps into the inheritable and ambient sets; a kern box has both empty.
fn drop_ambient_caps() {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    // SAFETY: prctl takes plain ints; capget/capset get live, #[repr(C)] header and data
    // structs of the layout the kernel expects for _LINUX_CAPABILITY_VERSION_3.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        let mut hdr = Header {
            version: VERSION_3,
            pid: 0,
        };
        let mut data = [Data::default(); 2];
        if libc::syscall(libc::SYS_capget, &mut hdr, data.as_mut_ptr()) == 0 {
            data.iter_mut().for_each(|d| d.inheritable = 0);
            libc::syscall(libc::SYS_capset, &mut hdr, data.as_ptr());
        }
    }
}

fn read_spec(fd: i32) -> Option<ExecSpec> {
    // SAFETY: the fd was handed to us by the supervisor and nothing else in this process owns it.
    let mut f = unsafe { File::from_raw_fd(fd) };
    f.seek(SeekFrom::Start(0)).ok()?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).ok()?;
    ExecSpec::decode(&buf)
}

fn setup_failed(msg: &str) -> ! {
    eprintln!("kern: sandbox setup failed: {msg}");
    std::process::exit(125)
}

/// kern's box env: the inherited environment wiped, a minimal base, then image + user variables.
fn set_env(env: &[(String, String)]) {
    // SAFETY: single-threaded process, no other reader of the environment.
    unsafe { libc::clearenv() };
    for (k, v) in env {
        if let (Ok(k), Ok(v)) = (CString::new(k.as_str()), CString::new(v.as_str())) {
            // SAFETY: NUL-terminated CStrings alive for the call; single-threaded, as above.
            unsafe { libc::setenv(k.as_ptr(), v.as_ptr(), 1) };
        }
    }
}

/// Like kern (and Docker): an absolute workdir is created when missing; the chdir decides.
fn enter_workdir(wd: &str) {
    if wd.starts_with('/') && !std::path::Path::new(wd).exists() {
        let _ = std::fs::DirBuilder::new().recursive(true).create(wd);
    }
    if let Err(e) = std::env::set_current_dir(wd) {
        setup_failed(&format!("chdir(workdir) failed: {e}"));
    }
}

/// Request the exec-time transition into a loaded AppArmor profile, failing closed as kern does.
fn apparmor_onexec(profile: &str) -> Result<(), String> {
    use std::io::Write;
    let mut last = String::from("no AppArmor interface (/proc/self/attr/apparmor/exec)");
    for path in ["/proc/self/attr/apparmor/exec", "/proc/self/attr/exec"] {
        match std::fs::OpenOptions::new().write(true).open(path) {
            Ok(mut f) => {
                return f
                    .write_all(format!("exec {profile}").as_bytes())
                    .map_err(|e| {
                        format!(
                        "--apparmor {profile}: could not enter the profile (is it loaded on the \
                         host? `sudo apparmor_parser -r <profile>`): {e}"
                    )
                    });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => last = format!("cannot open {path}: {e}"),
        }
    }
    Err(format!(
        "--apparmor {profile}: {last} - AppArmor is not available on this kernel"
    ))
}

/// Descriptors the caller leaked into bwrap must not reach the workload.
fn shed_inherited_fds() {
    // SAFETY: close_range takes plain ints; the fds past 2 are leaks, nothing of ours.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
    if rc != 0 {
        for fd in 3..1024 {
            // SAFETY: as above, on a kernel without close_range.
            unsafe { libc::close(fd) };
        }
    }
}

fn exec(spec: &ExecSpec) -> ! {
    let cargs: Vec<CString> = spec
        .argv
        .iter()
        .map(|a| CString::new(OsStr::new(a).as_bytes()).unwrap_or_default())
        .collect();
    let mut ptrs: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // execvp searches the PATH just set above, as kern's does.
    // SAFETY: `ptrs` is a NULL-terminated array of pointers into `cargs`, alive for the call.
    unsafe { libc::execvp(ptrs[0], ptrs.as_ptr()) };
    let err = std::io::Error::last_os_error();
    let cmd = &spec.argv[0];
    let denied = err.kind() == std::io::ErrorKind::PermissionDenied;
    match &spec.apparmor {
        Some(profile) if denied => eprintln!(
            "kern: cannot start '{cmd}' in box: {err}\nhint: the AppArmor profile '{profile}' would \
             not admit the exec - is it loaded on the host? (`apparmor_parser -r <profile>` loads \
             it; `-R` removes it)"
        ),
        _ => eprintln!(
            "kern: cannot start '{cmd}' in box: {err}\nhint: the command must exist inside the box \
             (try a full path like /bin/sh) and, if dynamically linked, its libraries/loader must \
             be present in the rootfs"
        ),
    }
    std::process::exit(if denied { 126 } else { 127 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_round_trips() {
        let s = ExecSpec {
            workdir: Some("/w".into()),
            apparmor: None,
            env: vec![("A".into(), "1=2".into()), ("EMPTY".into(), String::new())],
            argv: vec!["sh".into(), "-c".into(), String::new(), "x y".into()],
        };
        assert_eq!(ExecSpec::decode(&s.encode()), Some(s));
    }
}
