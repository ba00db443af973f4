//! Writes a few real snapshots (made by `snapshot_archive`) into corpus/restore/ and their
//! decompressed tar streams into corpus/restore_tar/. Run from fuzz/ with
//! `cargo run --example make_snapshots` (no sanitizer needed).

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn build(dir: &Path, case: &str) {
    let w = |p: &str, b: &[u8]| {
        let p = dir.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b).unwrap();
    };
    match case {
        "snap-small" => {
            w("main.py", b"print('hi')\n");
            w("out/result.json", b"{\"ok\":true}\n");
            std::fs::create_dir_all(dir.join("empty")).unwrap();
        }
        "snap-longnames" => {
            w(
                &format!("{}/{}", "d".repeat(120), "f".repeat(150)),
                b"deep\n",
            );
            w(&format!("a/{}", "n".repeat(99)), b"99\n");
        }
        "snap-exec-and-deps" => {
            w("run.sh", b"#!/bin/sh\necho ok\n");
            std::fs::set_permissions(dir.join("run.sh"), std::fs::Permissions::from_mode(0o755))
                .unwrap();
            w(".deps/pkg/__init__.py", b"");
            w("d/e/x", b"nested under the names the jail plants\n");
        }
        _ => unreachable!(),
    }
}

fn main() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = std::env::temp_dir().join(format!("kern-seeds-{}", std::process::id()));
    for case in ["snap-small", "snap-longnames", "snap-exec-and-deps"] {
        let dir = tmp.join(case);
        std::fs::create_dir_all(&dir).unwrap();
        build(&dir, case);
        let ws = kern_sandbox::Workspace::open(&dir).unwrap();
        let gz = here.join("corpus/restore").join(format!("{case}.tar.gz"));
        std::fs::create_dir_all(gz.parent().unwrap()).unwrap();
        kern_sandbox::snapshot_archive(&ws, &gz, 1 << 30).unwrap();
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap())
            .read_to_end(&mut raw)
            .unwrap();
        let tar = here.join("corpus/restore_tar").join(format!("{case}.tar"));
        std::fs::create_dir_all(tar.parent().unwrap()).unwrap();
        std::fs::write(&tar, trim_tar(&raw)).unwrap();
        println!(
            "{} ({} bytes), {} ({} bytes)",
            gz.display(),
            std::fs::metadata(&gz).unwrap().len(),
            tar.display(),
            std::fs::metadata(&tar).unwrap().len()
        );
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// Drops the zero padding after the two end-of-archive blocks, to keep the corpus small.
fn trim_tar(raw: &[u8]) -> Vec<u8> {
    let end = raw
        .iter()
        .rposition(|&b| b != 0)
        .map_or(0, |i| (i / 512 + 1) * 512);
    let mut v = raw[..end].to_vec();
    v.extend_from_slice(&[0u8; 1024]);
    v
}
