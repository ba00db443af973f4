//! Arbitrary bytes as a one-shot Python call's results file (or a kernel error frame), through
//! the host's line splitter.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fuzz_jail::kernel::result_lines_case(data);
});
