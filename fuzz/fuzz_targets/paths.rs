//! Arbitrary workspace-relative paths through `write_file`, `read_file` and `open_dir` in a jail
//! full of planted symlinks (to outside, to `..`, to `/`, chains, loops, magic links) and FIFOs.
//!
//! Input: up to 16 lines; each line is an op byte then a path (lossy UTF-8):
//! `w` write, `r` read, `m` read with maxBytes 4, `o` open_dir, `c` open_dir creating,
//! `s` snapshot (the walk; the archive must hold nothing from outside);
//! any other op byte picks one of those by value.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fuzz_jail::paths_case(data);
});
