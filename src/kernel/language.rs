//! The kernel languages: which in-box driver serves cells and the command line that starts it.
//! TypeScript is a JavaScript kernel whose cells the JS side strips of types first.

use crate::errors::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    Python,
    JavaScript,
}

impl Language {
    /// The language as JS names it (the JS side folds the aliases into these two).
    pub fn parse(name: &str) -> Result<Language> {
        match name {
            "python" => Ok(Language::Python),
            "javascript" => Ok(Language::JavaScript),
            other => Err(Error::sandbox(format!(
                "unsupported kernel language {other:?} (expected 'python', 'javascript' or 'typescript')"
            ))),
        }
    }

    /// How often an aborted cell's driver is interrupted again while the cell has not ended.
    /// node can lose a SIGINT: one arriving as a cell's synchronous part ends goes to V8's
    /// watchdog for that run after it stopped looking (node's own race), and the cell, now
    /// awaiting, never hears of it; a later one reaches the driver's listener (js/kernel.js
    /// spends what such a race can leave counted). Python's driver holds SIGINT blocked outside
    /// cells, so a repeat would stay pending and interrupt the next cell: it gets one.
    pub fn reinterrupt(self) -> Option<std::time::Duration> {
        match self {
            Language::Python => None,
            Language::JavaScript => Some(std::time::Duration::from_millis(100)),
        }
    }

    /// The box command. Each driver ends up as a process whose whole command line is
    /// `<interpreter> <flag> DRIVER <marker>`, which is how `find_driver` tells it from kern's own
    /// processes; the JavaScript one is started through a small sh launcher that lays out its fds.
    pub fn command(self, marker: &str) -> Vec<String> {
        match self {
            Language::Python => vec![
                "python3".into(),
                "-c".into(),
                KERNEL_DRIVER.into(),
                marker.into(),
            ],
            Language::JavaScript => vec![
                "/bin/sh".into(),
                "-c".into(),
                JS_LAUNCH.into(),
                "kern-js-kernel".into(),
                JS_KERNEL_DRIVER.into(),
                marker.into(),
            ],
        }
    }
}

/// The warm kernel's driver, run as `python3 -c DRIVER <marker>`; its chart extractor is a
/// string compiled on the first figure.
pub const KERNEL_DRIVER: &str = concat!(
    include_str!("python/core.py"),
    include_str!("python/capture.py"),
    include_str!("python/ipython.py"),
    "\n_CHARTS = r'''",
    include_str!("python/charts.py"),
    "'''\n\n",
    include_str!("python/kernel.py")
);

/// The JavaScript kernel's driver, run as `node -e DRIVER <marker>` by [`JS_LAUNCH`]. `-e` code
/// is a script: wrapped in a function, its names stay out of the global scope cells share.
pub const JS_KERNEL_DRIVER: &str = concat!(
    "(() => {\n",
    include_str!("js/core.js"),
    include_str!("js/kernel.js"),
    "})()\n"
);

/// The sh script that starts the JavaScript driver with its fds laid out.
pub const JS_LAUNCH: &str = include_str!("js/launch.sh");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_are_the_two_drivers() {
        assert_eq!(Language::parse("python").unwrap(), Language::Python);
        assert_eq!(Language::parse("javascript").unwrap(), Language::JavaScript);
        for bad in ["js", "ts", "Python", "", "ruby"] {
            assert!(Language::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_js_launcher_hands_node_the_driver_and_marker() {
        let c = Language::JavaScript.command("kern-kernel-00");
        assert_eq!(c.len(), 6);
        assert!(c[2].contains(r#"exec node --min-semi-space-size=8 -e "$1" "$2""#));
        assert_eq!(c[5], "kern-kernel-00");
    }

    #[test]
    fn drivers_are_embedded_whole() {
        assert!(KERNEL_DRIVER.contains("def _bundle") && KERNEL_DRIVER.ends_with("_serve()\n"));
        assert!(
            JS_KERNEL_DRIVER.contains("function bundleOf")
                && JS_KERNEL_DRIVER.ends_with("serve()\n})()\n")
        );
    }
}
