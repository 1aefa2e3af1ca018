//! "stream 200 kb": a long Markdown reply (paragraphs, lists, code blocks), streamed in many small
//! deltas at a steady pace — some 200 KB/s, a hundred times what a fast model streams: a stress
//! for the window's render benchmark, which sees whether a long reply streaming in keeps the frame
//! rate.

use std::time::Duration;

use super::script::Reply;

/// Longest reply a prompt may ask for.
pub const MAX_LONG_REPLY_KIB: usize = 1024;
/// Bytes per streamed delta, and the pause before each.
pub const LONG_REPLY_PIECE_BYTES: usize = 1024;
pub const LONG_REPLY_PIECE_EVERY: Duration = Duration::from_millis(5);

/// The size in KiB a prompt `stream <N> kb` asks for (case-insensitive; at most
/// [`MAX_LONG_REPLY_KIB`]).
pub fn long_reply_request(prompt: &str) -> Option<usize> {
    let lower = prompt.to_ascii_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    words.windows(3).find_map(|w| match w {
        ["stream", n, "kb" | "kb." | "kib"] => n.parse::<usize>().ok().filter(|n| (1..=MAX_LONG_REPLY_KIB).contains(n)),
        _ => None,
    })
}

/// `kib` KiB of Markdown, streamed at a steady pace.
pub fn long_reply(kib: usize) -> Reply {
    let text = long_markdown(kib * 1024);
    let pieces = text.len().div_ceil(LONG_REPLY_PIECE_BYTES);
    Reply::Paced { text, pieces, every: LONG_REPLY_PIECE_EVERY }
}

/// About `bytes` of Markdown (ASCII, so bytes and characters agree): sections of a paragraph, a
/// list and a fenced Rust block.
pub fn long_markdown(bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 512);
    let mut section = 0;
    while out.len() < bytes {
        section += 1;
        out.push_str(&format!("## Section {section}\n\nThe ember protocol keeps each conversation apart: section {section} says how, in words a reader follows without the code beside it. "));
        out.push_str("Every request carries its own grant, and nothing one conversation reads may open another's.\n\n");
        out.push_str(&format!("- step {section}.1: the runtime starts once\n- step {section}.2: each project gets its own instance\n- step {section}.3: idle instances are freed\n\n"));
        out.push_str(&format!("```rust\nfn section_{section}(grant: &Grant) -> Result<(), Error> {{\n    let scope = grant.scope();\n    for library in scope.libraries() {{\n        search(library, \"ember\")?;\n    }}\n    Ok(())\n}}\n```\n\n"));
    }
    out.truncate(bytes);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_size_is_read_from_the_prompt_and_bounded() {
        assert_eq!(long_reply_request("Please stream 200 KB of text"), Some(200));
        assert_eq!(long_reply_request("stream 2000 kb"), None);
        assert_eq!(long_reply_request("stream 0 kb"), None);
        assert_eq!(long_reply_request("read marker.txt"), None);
    }

    #[test]
    fn the_reply_is_the_size_asked_for_in_one_kib_pieces() {
        let Reply::Paced { text, pieces, .. } = long_reply(200) else { panic!("not paced") };
        assert_eq!(text.len(), 200 * 1024);
        assert_eq!(pieces, 200);
        assert!(text.contains("```rust") && text.contains("## Section 2"));
    }
}
