//! The languages: the names the JS side hands over (lib/languages.js folds the aliases, and
//! TypeScript into JavaScript with its types stripped, before they get here), and the in-box
//! drivers that serve Python and JavaScript cells with the command line that starts each.

use crate::errors::{Error, Result};

/// How the JS launcher (js/launch.sh) exits when the image has no node: sh's "command not found".
pub const EXIT_NO_INTERPRETER: i32 = 127;

/// A language code runs in: Python and JavaScript through their drivers, bash in a shell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    Python,
    Bash,
    JavaScript,
}

impl Language {
    /// The language as lib/languages.js names it to the native side.
    pub fn parse(name: &str) -> Result<Language> {
        match name {
            "python" => Ok(Language::Python),
            "bash" => Ok(Language::Bash),
            "javascript" => Ok(Language::JavaScript),
            other => Err(Error::UnsupportedLanguage(format!(
                "unsupported language {other:?} (expected 'python', 'bash' or 'javascript')"
            ))),
        }
    }

    /// The driver that runs its cells with rich results; bash has none.
    pub fn driver(self) -> Option<Driver> {
        match self {
            Language::Python => Some(Driver::Python),
            Language::JavaScript => Some(Driver::JavaScript),
            Language::Bash => None,
        }
    }

    /// The driver of a kernel in this language: bash has no kernel.
    pub fn kernel(self) -> Result<Driver> {
        self.driver().ok_or_else(|| {
            Error::UnsupportedLanguage(
                "unsupported kernel language \"bash\" (expected 'python', 'javascript' or \
                 'typescript')"
                    .into(),
            )
        })
    }
}

/// An in-box driver: a kernel's, or a one-shot cell's rich-result runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    Python,
    JavaScript,
}

impl Driver {
    /// How an aborted cell is interrupted. None: SIGINT at once (Python's driver turns it into
    /// KeyboardInterrupt, and holds it blocked outside cells). Some(d), JavaScript: an INTERRUPT
    /// frame, which the driver's event loop reads and ends an awaiting cell with; SIGINT follows
    /// once, after `d`, only for a cell still running then (stuck in synchronous code, where the
    /// frame cannot be read). node's SIGINT watchdog (breakOnSigint) races with a signal that
    /// lands as a guarded run starts or stops: node dies of it (the default action, or node's
    /// own exit handler, is installed for that moment), loses it, or keeps it counted to stop a
    /// later run. An abort on a cell's first output lands there often; a frame never does.
    pub fn signal_after(self) -> Option<std::time::Duration> {
        match self {
            Driver::Python => None,
            Driver::JavaScript => Some(std::time::Duration::from_millis(100)),
        }
    }

    /// The box command. Each driver ends up as a process whose whole command line is
    /// `<interpreter> <flag> DRIVER <marker>`, which is how `find_driver` tells it from kern's own
    /// processes; the JavaScript one is started through a small sh launcher that lays out its fds.
    pub fn command(self, marker: &str) -> Vec<String> {
        match self {
            Driver::Python => vec![
                "python3".into(),
                "-c".into(),
                KERNEL_DRIVER.into(),
                marker.into(),
            ],
            Driver::JavaScript => vec![
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
    include_str!("python/rare.py"),
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
    fn languages_and_their_drivers() {
        assert_eq!(
            Language::parse("python").unwrap().kernel().unwrap(),
            Driver::Python
        );
        assert_eq!(
            Language::parse("javascript").unwrap().kernel().unwrap(),
            Driver::JavaScript
        );
        let bash = Language::parse("bash").unwrap();
        assert_eq!(bash.driver(), None);
        assert_eq!(
            bash.kernel().unwrap_err().code(),
            "ERR_UNSUPPORTED_LANGUAGE"
        );
        for bad in ["js", "ts", "sh", "Python", "", "ruby"] {
            assert_eq!(
                Language::parse(bad).unwrap_err().code(),
                "ERR_UNSUPPORTED_LANGUAGE",
                "{bad}"
            );
        }
    }

    #[test]
    fn the_js_launcher_hands_node_the_driver_and_marker() {
        let c = Driver::JavaScript.command("kern-kernel-00");
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
