//! The bounded tail of a child process's output, kept for the sentence shown when it fails.

use std::collections::VecDeque;
use std::sync::Mutex;

/// Bytes of a child's stdout/stderr kept for error messages.
pub const OUTPUT_TAIL_BYTES: usize = 8 * 1024;
/// Longest output line read; longer lines are cut.
pub const MAX_LINE_BYTES: usize = 16 * 1024;

#[derive(Debug, Default)]
pub struct OutputTail(Mutex<VecDeque<u8>>);

impl OutputTail {
    pub fn push_line(&self, line: &str) {
        let mut buf = self.0.lock().unwrap_or_else(|p| p.into_inner());
        buf.extend(line.as_bytes().iter().take(MAX_LINE_BYTES));
        buf.push_back(b'\n');
        let excess = buf.len().saturating_sub(OUTPUT_TAIL_BYTES);
        buf.drain(..excess);
    }

    pub fn text(&self) -> String {
        let buf = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let bytes: Vec<u8> = buf.iter().copied().collect();
        crate::binaries::executable::tail(&bytes, OUTPUT_TAIL_BYTES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_is_bounded() {
        let t = OutputTail::default();
        for i in 0..10_000 {
            t.push_line(&format!("line {i}"));
        }
        let text = t.text();
        assert!(text.len() <= OUTPUT_TAIL_BYTES && text.ends_with("line 9999"), "{}", text.len());
    }
}
