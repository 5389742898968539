//! Outside programs the tests call.

use std::process::{Command, Stdio};

/// The Python interpreter the reference readings (tests/python) run under, if one is installed.
pub fn python() -> Option<&'static str> {
    ["python3", "python"].into_iter().find(|p| {
        Command::new(p)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}
