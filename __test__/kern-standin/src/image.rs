//! Image names -> the host root filesystem.
//!
//! The stand-in has no image store: every image it knows IS the host's read-only `/usr`, `/etc`, ...
//! (which is why python3, node and sh exist in the box). The runtime config mirrors the project's
//! test image (`make-test-image`): `PATH` + `LANG=C.UTF-8` and a default `Cmd` of `python3`. An image
//! it does not know fails exactly as kern fails on a machine that has no registry access.

use crate::cli::PullPolicy;
use crate::error::Error;

/// Extra image names (comma-separated) that also map to the host root.
pub const IMAGES_ENV: &str = "KERN_STANDIN_IMAGES";

const BUILTIN: &[&str] = &["python:3.12-slim", "node:20-slim"];

/// What kern reads from an image's OCI config.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageConfig {
    pub env: Vec<(String, String)>,
    pub cmd: Vec<String>,
}

pub fn resolve(image: &str, pull: PullPolicy) -> Result<ImageConfig, Error> {
    let extra = std::env::var(IMAGES_ENV).unwrap_or_default();
    let known = BUILTIN.contains(&image)
        || extra
            .split(',')
            .map(str::trim)
            .any(|n| !n.is_empty() && n == image);
    if known {
        return Ok(ImageConfig {
            env: vec![
                (
                    "PATH".into(),
                    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
                ),
                ("LANG".into(), "C.UTF-8".into()),
            ],
            cmd: vec!["python3".into()],
        });
    }
    if pull == PullPolicy::Never {
        return Err(Error::Oci {
            msg: format!(
                "image '{image}' is not usable locally (no complete cache entry: it needs its \
                 rootfs, its sentinel and its config sidecar) and `--pull never` was given"
            ),
            hint: "check the image name and tag exist; private images need `kern login` first",
        });
    }
    // kern's pull progress, then the failure it reports when the registry cannot be reached.
    eprintln!("→ image '{image}' not cached - pulling once (reused after)");
    eprintln!("→ resolving {image} (linux/{})", host_arch());
    Err(Error::Oci {
        msg: format!(
            "curl failed: exit Some(6): curl: (6) Could not resolve host: {}",
            registry_host(image)
        ),
        hint: "pull/push need `curl`, GNU `tar`, `gzip`, `sha256sum` (and `zstd` for \
               zstd-compressed images) on PATH, plus a working network",
    })
}

fn host_arch() -> &'static str {
    if cfg!(target_arch = "aarch64") {
        "arm64"
    } else {
        "amd64"
    }
}

/// The registry a reference points at (Docker's rule: a first component with a dot, a port or
/// `localhost` names a registry; anything else is Docker Hub).
fn registry_host(image: &str) -> &str {
    match image.split_once('/') {
        Some((first, _)) if first.contains(['.', ':']) || first == "localhost" => first,
        _ => "registry-1.docker.io",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_host_follows_docker_reference_rules() {
        assert_eq!(registry_host("alpine:3"), "registry-1.docker.io");
        assert_eq!(registry_host("library/alpine"), "registry-1.docker.io");
        assert_eq!(registry_host("ghcr.io/me/app:1"), "ghcr.io");
        assert_eq!(registry_host("localhost/app"), "localhost");
    }

    #[test]
    fn builtin_images_resolve_to_the_test_image_config() {
        let c = resolve("node:20-slim", PullPolicy::Never).unwrap();
        assert_eq!(c.cmd, ["python3"]);
        assert!(c.env.iter().any(|(k, v)| k == "LANG" && v == "C.UTF-8"));
    }
}
