//! Bounding tool results: the model gets at most a fixed number of bytes, and is told when a
//! result was cut.

/// Largest tool result, in bytes, passed on to the model.
pub const MAX_RESULT_BYTES: usize = 256 * 1024;

/// `text` cut to at most `max_bytes` (on a character boundary) followed by a notice saying so;
/// unchanged when it fits.
pub fn truncate_with_notice(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_string();
    }
    let mut cut = max_bytes;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}\n\n[Hearth truncated this result: {cut} of {} bytes shown (limit {max_bytes} bytes).]",
        &text[..cut],
        text.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_results_are_cut_with_a_notice() {
        assert_eq!(truncate_with_notice("short", 10), "short");
        let out = truncate_with_notice(&"é".repeat(100), 11);
        assert!(out.starts_with("ééééé\n\n[Hearth truncated this result: 10 of 200 bytes shown"), "{out}");
    }
}
