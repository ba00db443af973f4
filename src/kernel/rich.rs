//! Rich results of Python and JavaScript code: the one-shot in-box runners and what they hand
//! back (the kernel drivers are `language`'s).
//!
//! Both run next to untrusted code, so everything they write back is data to vet: the host reads
//! it bounded and without following links, and lib/results.js parses each JSON line on its own, so
//! one malformed line costs only itself.

use crate::kernel::language::Driver;

/// The one-shot runner's code: what every call runs; the rest goes beside it as [`CAPTURE`],
/// compiled when a cell needs it. A ready box's Python waiter loads it at boot; a one-shot box
/// gets it inside [`RUNNER_FILE`].
pub const RUNNER: &str = concat!(
    include_str!("python/core.py"),
    "\n",
    include_str!("python/runner.py")
);

/// The file a one-shot box runs, `python3 /workspace/.run-<id>.py`: boot.py, then [`RUNNER`] as a
/// raw string it compiles only when the session holds no code for it yet (see [`CellFiles::code`]:
/// compiling the runner took ~1 ms of every cold start, loading its marshalled code ~0.1 ms).
pub const RUNNER_FILE: &str = concat!(
    include_str!("python/boot.py"),
    "exec(_kern_runner(r'''",
    include_str!("python/core.py"),
    "\n",
    include_str!("python/runner.py"),
    "'''))\n"
);

/// The most the host keeps of the runner's marshalled code (it is ~13 KB).
pub const CODE_MAX: u64 = 1 << 20;

/// The one-shot runner's capture file, written as `.cap-<id>.py` beside it: rare.py, compiled
/// when one of its helpers is called, then after runner.py's `_CAP_MARK` the capture code, compiled only
/// when a cell has something to capture; the chart extractor rides along as a string, compiled
/// only for a figure (charts.py holds no `'''`).
pub const CAPTURE: &str = concat!(
    include_str!("python/rare.py"),
    "\n#:kern-capture:\n",
    "_CHARTS = r'''",
    include_str!("python/charts.py"),
    "'''\n\n",
    include_str!("python/capture.py")
);

/// The one-shot JavaScript runner, run as `node /workspace/.run-<id>.js`.
pub const JS_RUNNER: &str = concat!(include_str!("js/core.js"), include_str!("js/runner.js"));

/// The most the host reads of what a cell writes back (results file or kernel result frames).
pub const RESULTS_MAX: u64 = 64 << 20;

/// A one-shot rich-result call's helper files at the workspace root: the cell (Python source, or
/// the prepared JavaScript cell as JSON), the runner, the results it writes, and (Python) the
/// capture code it reads when it needs it.
pub struct CellFiles {
    pub cell: String,
    pub runner: String,
    pub results: String,
    pub capture: Option<String>,
    /// (Python) The runner's marshalled code: written when the session holds it, left by the
    /// runner when it had to compile itself. The box makes it, so it is only ever handed back to
    /// boxes of the same session, which share the workspace (and so could plant modules on the
    /// runner's `sys.path` anyway); the host never runs or parses it.
    pub code: Option<String>,
}

impl CellFiles {
    pub fn new(tag: &str, language: Driver) -> CellFiles {
        let (cell, run) = match language {
            Driver::Python => ("py", "py"),
            Driver::JavaScript => ("json", "js"),
        };
        CellFiles {
            cell: format!(".cell-{tag}.{cell}"),
            runner: format!(".run-{tag}.{run}"),
            results: format!(".res-{tag}.json"),
            capture: (language == Driver::Python).then(|| format!(".cap-{tag}.py")),
            code: (language == Driver::Python).then(|| format!(".run-{tag}.bin")),
        }
    }

    /// The in-box runner's source.
    pub fn runner_source(language: Driver) -> &'static str {
        match language {
            Driver::Python => RUNNER_FILE,
            Driver::JavaScript => JS_RUNNER,
        }
    }

    pub fn all(&self) -> Vec<&str> {
        let mut all = vec![self.cell.as_str(), &self.runner, &self.results];
        all.extend(self.capture.as_deref());
        all.extend(self.code.as_deref());
        all
    }
}

/// The runner's results file, one JSON object per line, as lines (empty ones dropped).
pub fn lines(bytes: &[u8]) -> Vec<String> {
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect()
}

/// A kernel error frame as a results line, the shape the runner writes.
pub fn error_line(payload: &[u8]) -> String {
    format!("{{\"error\":{}}}", String::from_utf8_lossy(payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_skip_blanks_and_keep_order() {
        let got = lines(b"{\"a\":1}\n\n  \n{\"b\":2}\n");
        assert_eq!(got, ["{\"a\":1}", "{\"b\":2}"]);
        assert!(lines(b"").is_empty());
    }

    #[test]
    fn helper_names_share_one_tag() {
        let f = CellFiles::new("0a1b2c3d", Driver::Python);
        assert_eq!(
            f.all(),
            [
                ".cell-0a1b2c3d.py",
                ".run-0a1b2c3d.py",
                ".res-0a1b2c3d.json",
                ".cap-0a1b2c3d.py",
                ".run-0a1b2c3d.bin"
            ]
        );
        assert!(f
            .all()
            .iter()
            .all(|n| crate::workspace::track::is_helper_file(n)));
        let js = CellFiles::new("0a1b2c3d", Driver::JavaScript);
        assert_eq!(
            js.all(),
            [
                ".cell-0a1b2c3d.json",
                ".run-0a1b2c3d.js",
                ".res-0a1b2c3d.json"
            ]
        );
        assert!(js
            .all()
            .iter()
            .all(|n| crate::workspace::track::is_helper_file(n)));
    }

    #[test]
    fn sources_are_embedded_whole() {
        assert!(!include_str!("python/charts.py").contains("'''"));
        assert!(CAPTURE.contains("def _bundle") && RUNNER.ends_with("_run()\n"));
        assert!(!RUNNER.contains("_CHARTS = "));
        // The runner rides in RUNNER_FILE as a raw ''' string: none in it, no backslash to end it.
        assert!(!RUNNER.contains("'''") && !RUNNER.trim_end().ends_with('\\'));
        assert!(RUNNER_FILE.contains(RUNNER) && RUNNER_FILE.ends_with("'''))\n"));
        // The runner splits the capture file at its marker: rare.py before it, the rest after.
        let mark = "\n#:kern-capture:\n";
        assert!(RUNNER.contains(r#"_CAP_MARK = "\n#:kern-capture:\n""#));
        let parts: Vec<&str> = CAPTURE.split(mark).collect();
        assert_eq!(parts.len(), 2);
        assert!(parts[0].contains("def _dedent") && parts[0].contains("def _pil_spec"));
        assert!(parts[1].starts_with("_CHARTS = ") && !parts[0].contains("_CHARTS"));
        assert!(JS_RUNNER.contains("function bundleOf") && JS_RUNNER.ends_with("run()\n"));
    }
}
