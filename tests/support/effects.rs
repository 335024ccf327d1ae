//! A file that tools append their side effects to.

use std::io::Write as _;
use std::path::PathBuf;

use toolwright::ToolError;

/// Where tool bodies record their side effects, one line each: a file, so that a restarted
/// runtime, or another process, sees them too.
#[derive(Clone, Debug)]
pub(crate) struct EffectLog(pub(crate) PathBuf);

impl EffectLog {
    /// Appends one line with one `write` (atomic for short lines opened with `O_APPEND`).
    pub(crate) fn append(&self, line: &str) -> Result<(), ToolError> {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.0)?;
        file.write_all(format!("{line}\n").as_bytes())?;
        Ok(())
    }

    /// How many lines equal `line`.
    pub(crate) fn count(&self, line: &str) -> usize {
        std::fs::read_to_string(&self.0)
            .unwrap_or_default()
            .lines()
            .filter(|l| *l == line)
            .count()
    }
}
