//! `setup`'s `pip install …` rewrite: packages land in the workspace's `.deps` (where run boxes
//! find them, read-only with `depsReadonly`), without pip's cache or version check.

use crate::workspace::DEPS_DIR;

/// The script the setup box runs for `setup`: a `pip install …` gets its target and quiet flags,
/// anything else runs as given.
/// `box_workspace` is where the workspace is bound in the box.
pub fn setup_script(setup: &str, box_workspace: &str) -> String {
    match setup.trim().strip_prefix("pip install ") {
        Some(rest) => format!(
            "pip install --target {box_workspace}/{DEPS_DIR} --no-cache-dir --disable-pip-version-check {rest}"
        ),
        None => setup.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pip_install_targets_deps() {
        assert_eq!(
            setup_script("  pip install numpy 'pandas<3'\n", "/workspace"),
            "pip install --target /workspace/.deps --no-cache-dir --disable-pip-version-check numpy 'pandas<3'"
        );
    }

    #[test]
    fn pip_follows_the_box_workspace() {
        assert!(setup_script("pip install x", "/home/user").contains("--target /home/user/.deps "));
    }

    #[test]
    fn other_setups_run_as_given() {
        for s in ["pip3 install x", "apt-get install -y jq", " echo hi "] {
            assert_eq!(setup_script(s, "/workspace"), s);
        }
    }
}
