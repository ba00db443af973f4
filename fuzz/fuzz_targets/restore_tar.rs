//! Arbitrary bytes as a raw tar stream, gzip-compressed here so the fuzzer works on the tar layer.
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(data).unwrap();
    fuzz_jail::restore_case(&gz.finish().unwrap());
});
