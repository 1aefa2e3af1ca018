//! The bounded tail of a child process's output, kept for the sentence shown when it fails.

use std::collections::VecDeque;
use std::sync::Mutex;

use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, BufReader};

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

/// A child's output line by line, each at most [`MAX_LINE_BYTES`] (a longer one comes in pieces),
/// decoded lossily and without trailing whitespace: a child printing junk cannot grow Hearth's memory.
pub struct OutputLines<R> {
    reader: BufReader<R>,
    line: Vec<u8>,
}

impl<R: AsyncRead + Unpin> OutputLines<R> {
    pub fn new(stream: R) -> Self {
        Self { reader: BufReader::new(stream), line: Vec::new() }
    }

    /// The next line; `None` once the output ends (or cannot be read).
    pub async fn next_line(&mut self) -> Option<String> {
        self.line.clear();
        match (&mut self.reader).take(MAX_LINE_BYTES as u64).read_until(b'\n', &mut self.line).await {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(String::from_utf8_lossy(&self.line).trim_end().to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_trimmed_and_bounded() {
        let long = "x".repeat(MAX_LINE_BYTES + 10);
        let input = format!("one  \r\n{long}\ntwo");
        let mut lines = OutputLines::new(input.as_bytes());
        assert_eq!(lines.next_line().await.as_deref(), Some("one"));
        assert_eq!(lines.next_line().await.map(|l| l.len()), Some(MAX_LINE_BYTES));
        assert_eq!(lines.next_line().await.as_deref(), Some("xxxxxxxxxx"));
        assert_eq!(lines.next_line().await.as_deref(), Some("two"));
        assert_eq!(lines.next_line().await, None);
    }

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
