//! Pseudo-terminals from the box's own /dev/ptmx (no libutil: the binary is static).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A new pty pair (master, slave), both CLOEXEC, the window set to `cols` x `rows`.
pub fn open(cols: u16, rows: u16) -> io::Result<(OwnedFd, OwnedFd)> {
    let master = open_path(
        c"/dev/ptmx",
        libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
    )?;
    let unlock: libc::c_int = 0;
    // SAFETY: TIOCSPTLCK reads one int from the pointer we pass.
    if unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSPTLCK as _, &unlock) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let slave = open_peer(&master)?;
    set_size(&master, cols, rows)?;
    Ok((master, slave))
}

/// The slave side: TIOCGPTPEER where the kernel has it (no path lookup, so it works whatever is
/// mounted at /dev/pts), else /dev/pts/<n>.
fn open_peer(master: &OwnedFd) -> io::Result<OwnedFd> {
    let flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: TIOCGPTPEER takes the open flags by value and returns a new fd or -1.
    let fd = unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCGPTPEER as _, flags) };
    if fd >= 0 {
        // SAFETY: the ioctl just returned this fd; nothing else owns it.
        return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    let mut n: libc::c_uint = 0;
    // SAFETY: TIOCGPTN writes one unsigned int into `n`.
    if unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCGPTN as _, &mut n) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let path = CString::new(format!("/dev/pts/{n}")).expect("no NUL in a formatted number");
    open_path(&path, flags)
}

fn open_path(path: &std::ffi::CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: `path` is a valid NUL-terminated string for the duration of the call.
    let fd = unsafe { libc::open(path.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: open just returned this fd; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sets the window size on the master; the kernel sends SIGWINCH to the foreground group.
pub fn set_size(master: &OwnedFd, cols: u16, rows: u16) -> io::Result<()> {
    let size = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize struct from the pointer we pass.
    if unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ as _, &size) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
