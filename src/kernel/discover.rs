//! Finding a kernel's driver among the host's processes (`/proc`), to interrupt it with a
//! signal: it is the one descendant of the box's root whose whole command line is the driver's.

use crate::lifecycle::procfs::find_descendant;

/// The driver's host pid: a descendant of kern whose whole command line is the driver's.
pub(super) fn find_driver(kern_pid: i32, marker: &str) -> Option<i32> {
    find_descendant(kern_pid, |cmdline| is_driver_cmdline(cmdline, marker))
}

/// kern's own processes (and the JavaScript driver's sh launcher) carry the marker too: only the
/// interpreter's whole command line is `python3 -c DRIVER [ipython:…] <marker>` or
/// `node --min-semi-space-size=8 -e DRIVER <marker>` (js/launch.sh).
fn is_driver_cmdline(cmdline: &[u8], marker: &str) -> bool {
    let args: Vec<&[u8]> = cmdline
        .strip_suffix(b"\0")
        .unwrap_or(cmdline)
        .split(|b| *b == 0)
        .collect();
    let shape_ok = match args.as_slice() {
        [_, flag, _, _] => *flag == b"-c",
        [_, a, b, c, _] => {
            (*a == b"-c" && c.starts_with(b"ipython:"))
                || (*a == JS_HEAP_FLAG.as_bytes() && *b == b"-e")
        }
        _ => false,
    };
    shape_ok && args.last() == Some(&marker.as_bytes())
}

/// The one node option js/launch.sh gives the driver.
const JS_HEAP_FLAG: &str = "--min-semi-space-size=8";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::language;

    #[test]
    fn the_driver_is_told_from_kern_by_its_whole_command_line() {
        let m = "kern-kernel-00ff";
        assert!(is_driver_cmdline(
            b"python3\0-c\0import sys\0kern-kernel-00ff\0",
            m
        ));
        let kern = b"kern\0box\0jssbx-1\0--\0python3\0-c\0import sys\0kern-kernel-00ff\0";
        assert!(!is_driver_cmdline(kern, m));
        assert!(!is_driver_cmdline(b"python3\0-c\0x\0kern-kernel-0\0", m));
        assert!(!is_driver_cmdline(b"", m));
        assert!(is_driver_cmdline(
            b"python3\0-c\0import sys\0ipython:offline\0kern-kernel-00ff\0",
            m
        ));
        assert!(!is_driver_cmdline(
            b"python3\0-c\0import sys\0other\0kern-kernel-00ff\0",
            m
        ));
        assert!(is_driver_cmdline(
            b"node\0--min-semi-space-size=8\0-e\0driver\0kern-kernel-00ff\0",
            m
        ));
        assert!(!is_driver_cmdline(
            b"node\0--inspect\0-e\0driver\0kern-kernel-00ff\0",
            m
        ));
        assert!(
            language::JS_LAUNCH.contains(&format!("exec node {JS_HEAP_FLAG} -e \"$1\" \"$2\"")),
            "the launcher starts node as is_driver_cmdline expects"
        );
        let launcher = b"/bin/sh\0-c\0exec node\0kern-js-kernel\0driver\0kern-kernel-00ff\0";
        assert!(!is_driver_cmdline(launcher, m));
    }
}
