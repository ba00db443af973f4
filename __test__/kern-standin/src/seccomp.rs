//! The box's seccomp program, in the shape of kern's *denylist* posture.
//!
//! Same verdicts as kern for the syscalls that matter to a sandbox test:
//! * escape vectors (mount API, namespaces, ptrace, modules, kexec, bpf, ...) -> SIGSYS-kill the
//!   whole process (`SECCOMP_RET_KILL_PROCESS`), so a box that tries one exits 159;
//! * capabilities software merely probes (io_uring, keyring, userfaultfd, perf, syslog,
//!   open_by_handle_at, clone3) -> `ENOSYS`, so it takes its fallback instead of dying (kern does
//!   exactly this: `keyctl` returns -1/ENOSYS under kern, it is not killed);
//! * `socket(AF_VSOCK, ..)` -> `EAFNOSUPPORT`; `clone` with any `CLONE_NEW*` flag -> kill;
//! * a foreign arch or an x32 syscall number -> kill.
//!
//! NOT reproduced: kern's shipped default is a deny-by-default allowlist (moby's vetted set, everything
//! else ENOSYS). The stand-in allows everything not listed above, i.e. it behaves like
//! `KERN_SECCOMP=denylist`. Hand-assembled rather than built with `seccompiler` because one program
//! needs three different actions plus the x32/JSET checks; bwrap takes it raw via `--seccomp FD`.

use libc::{c_long, sock_filter};

// cBPF opcodes (<linux/bpf_common.h>).
const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K

// seccomp return values (<linux/seccomp.h>).
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_ALLOW: u32 = 0x7fff_0000;

// Offsets into `struct seccomp_data`: nr, arch, ip, args[6]. Only the low word of args[0] is read,
// which is the whole flag word on the little-endian targets below.
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0_LO: u32 = 16;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7; // AUDIT_ARCH_AARCH64

/// x32 syscalls share x86_64's audit arch but set this bit; a number-only match would miss them.
#[cfg(target_arch = "x86_64")]
const X32_BIT: u32 = 0x4000_0000;

/// CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET.
const CLONE_NEW_ANY: u32 =
    0x0002_0000 | 0x0200_0000 | 0x0400_0000 | 0x0800_0000 | 0x1000_0000 | 0x2000_0000 | 0x4000_0000;
const AF_VSOCK: u32 = 40;

/// Killed on sight: no sandboxed workload has a reason to call these.
fn killed() -> Vec<c_long> {
    let mut v = vec![
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_kexec_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_reboot,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_open_tree,
        libc::SYS_move_mount,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        libc::SYS_bpf,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
    ];
    #[cfg(target_arch = "x86_64")]
    v.push(libc::SYS_kexec_file_load);
    #[cfg(target_arch = "aarch64")]
    v.push(294); // __NR_kexec_file_load, absent from some libc targets
    v
}

/// Denied with ENOSYS: probed for optional fast paths, and `clone3`, whose flags BPF cannot read.
fn enosys() -> [c_long; 11] {
    [
        libc::SYS_clone3,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_userfaultfd,
        libc::SYS_perf_event_open,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_keyctl,
        libc::SYS_syslog,
        libc::SYS_open_by_handle_at,
    ]
}

fn op(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn branch(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// `nr == k -> return action`, otherwise fall through to the next rule.
fn on_nr(prog: &mut Vec<sock_filter>, nr: c_long, action: u32) {
    prog.push(branch(JEQ_K, nr as u32, 0, 1));
    prog.push(op(RET_K, action));
}

pub fn program() -> Vec<sock_filter> {
    let errno = |e: i32| RET_ERRNO | (e as u32 & 0xffff);
    let mut p = vec![
        op(LD_W_ABS, ARCH),
        branch(JEQ_K, AUDIT_ARCH, 1, 0),
        op(RET_K, RET_KILL_PROCESS),
        op(LD_W_ABS, NR),
    ];
    #[cfg(target_arch = "x86_64")]
    {
        p.push(branch(JSET_K, X32_BIT, 0, 1));
        p.push(op(RET_K, RET_KILL_PROCESS));
    }
    for nr in killed() {
        on_nr(&mut p, nr, RET_KILL_PROCESS);
    }
    for nr in enosys() {
        on_nr(&mut p, nr, errno(libc::ENOSYS));
    }
    // socket(domain, ..): only AF_VSOCK is refused. Both arms return, so loading args[0] over the
    // syscall number is safe; any other syscall skips the 4-instruction block with `nr` intact.
    p.push(branch(JEQ_K, libc::SYS_socket as u32, 0, 4));
    p.push(op(LD_W_ABS, ARG0_LO));
    p.push(branch(JEQ_K, AF_VSOCK, 0, 1));
    p.push(op(RET_K, errno(libc::EAFNOSUPPORT)));
    p.push(op(RET_K, RET_ALLOW));
    // clone(flags, ..): a namespace flag is the same escape as unshare(2). Last, since it clobbers nr.
    p.push(branch(JEQ_K, libc::SYS_clone as u32, 0, 3));
    p.push(op(LD_W_ABS, ARG0_LO));
    p.push(branch(JSET_K, CLONE_NEW_ANY, 0, 1));
    p.push(op(RET_K, RET_KILL_PROCESS));
    p.push(op(RET_K, RET_ALLOW));
    p
}

/// The raw `struct sock_filter` array bwrap reads from its `--seccomp` fd.
pub fn program_bytes() -> Vec<u8> {
    program()
        .iter()
        .flat_map(|f| {
            let mut b = Vec::with_capacity(8);
            b.extend_from_slice(&f.code.to_ne_bytes());
            b.push(f.jt);
            b.push(f.jf);
            b.extend_from_slice(&f.k.to_ne_bytes());
            b
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny cBPF interpreter for exactly the opcodes `program` emits, so verdicts are checked
    /// without installing anything.
    fn run(nr: c_long, arch: u32, arg0: u64) -> u32 {
        let prog = program();
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let f = prog[pc];
            pc += 1;
            match f.code {
                LD_W_ABS => {
                    acc = match f.k {
                        NR => nr as u32,
                        ARCH => arch,
                        ARG0_LO => arg0 as u32,
                        k => panic!("unexpected load offset {k}"),
                    }
                }
                JEQ_K => pc += usize::from(if acc == f.k { f.jt } else { f.jf }),
                JSET_K => pc += usize::from(if acc & f.k != 0 { f.jt } else { f.jf }),
                RET_K => return f.k,
                c => panic!("unexpected opcode {c:#x}"),
            }
        }
    }

    #[test]
    fn verdicts_match_kern_denylist() {
        let kill = RET_KILL_PROCESS;
        for nr in [
            libc::SYS_mount,
            libc::SYS_unshare,
            libc::SYS_ptrace,
            libc::SYS_bpf,
        ] {
            assert_eq!(run(nr, AUDIT_ARCH, 0), kill, "syscall {nr}");
        }
        let enosys = RET_ERRNO | libc::ENOSYS as u32;
        assert_eq!(run(libc::SYS_keyctl, AUDIT_ARCH, 0), enosys);
        assert_eq!(run(libc::SYS_clone3, AUDIT_ARCH, 0), enosys);
        assert_eq!(run(libc::SYS_open_by_handle_at, AUDIT_ARCH, 0), enosys);
        assert_eq!(run(libc::SYS_getpid, AUDIT_ARCH, 0), RET_ALLOW);
        assert_eq!(run(libc::SYS_socket, AUDIT_ARCH, 2), RET_ALLOW);
        assert_eq!(
            run(libc::SYS_socket, AUDIT_ARCH, 40),
            RET_ERRNO | libc::EAFNOSUPPORT as u32
        );
        assert_eq!(run(libc::SYS_clone, AUDIT_ARCH, 0x11), RET_ALLOW); // SIGCHLD fork
        assert_eq!(run(libc::SYS_clone, AUDIT_ARCH, 0x1000_0011), kill); // CLONE_NEWUSER
        assert_eq!(run(libc::SYS_getpid, 0x4000_0003, 0), kill); // i386 arch
        #[cfg(target_arch = "x86_64")]
        assert_eq!(run(libc::SYS_getpid | 0x4000_0000, AUDIT_ARCH, 0), kill);
    }

    #[test]
    fn serialised_as_sock_filter_array() {
        assert_eq!(program_bytes().len(), program().len() * 8);
    }
}
