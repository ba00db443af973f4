//! Arbitrary bytes as a `.tar.gz` restored into a jail full of planted symlinks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fuzz_jail::restore_case(data);
});
