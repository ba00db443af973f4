//! Arbitrary bytes as the kernel box's control channel, through the host's frame decoder.
//!
//! Input: a byte choosing the frame bound, a byte choosing the read size, then the wire.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fuzz_jail::kernel::frames_case(data);
});
