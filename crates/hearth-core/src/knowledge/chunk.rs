//! Splitting a document into overlapping chunks on line boundaries, so a search hit points at a
//! passage rather than a whole file and a passage cut at a chunk edge is still found whole in the
//! neighbouring chunk.

/// Most bytes in one chunk. A single longer line is cut (on character boundaries) into pieces.
pub const CHUNK_MAX_BYTES: usize = 2048;
/// Up to this many bytes of whole lines at the end of a chunk start the next one too.
pub const CHUNK_OVERLAP_BYTES: usize = 256;

/// A passage of a document: a slice of its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk<'a> {
    pub text: &'a str,
    /// 1-based line number of the chunk's first line.
    pub start_line: u32,
}

/// A contiguous piece of the text: a line (with its newline) or part of a line too long for a chunk.
struct Piece {
    start: usize,
    end: usize,
    line: u32,
}

fn pieces(text: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut start = 0;
    for (index, line) in text.split_inclusive('\n').enumerate() {
        let line_no = index as u32 + 1;
        let end = start + line.len();
        let mut at = start;
        while end - at > CHUNK_MAX_BYTES {
            let mut cut = at + CHUNK_MAX_BYTES;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            out.push(Piece { start: at, end: cut, line: line_no });
            at = cut;
        }
        out.push(Piece { start: at, end, line: line_no });
        start = end;
    }
    out
}

/// Chunks of at most [`CHUNK_MAX_BYTES`], consecutive chunks sharing up to [`CHUNK_OVERLAP_BYTES`]
/// of whole lines. Text that is only whitespace gives no chunks.
pub fn chunk_text(text: &str) -> Vec<Chunk<'_>> {
    if text.trim().is_empty() {
        return Vec::new();
    }
    let pieces = pieces(text);
    let mut chunks = Vec::new();
    let mut first = 0;
    loop {
        let mut last = first; // exclusive end of this chunk's pieces
        let mut size = 0;
        while last < pieces.len() && (last == first || size + pieces[last].end - pieces[last].start <= CHUNK_MAX_BYTES) {
            size += pieces[last].end - pieces[last].start;
            last += 1;
        }
        let slice = &text[pieces[first].start..pieces[last - 1].end];
        if !slice.trim().is_empty() {
            chunks.push(Chunk { text: slice, start_line: pieces[first].line });
        }
        if last == pieces.len() {
            return chunks;
        }
        // Overlap: step back over whole trailing pieces while they fit, but always move forward.
        let mut next = last;
        let mut overlap = 0;
        while next - 1 > first && overlap + pieces[next - 1].end - pieces[next - 1].start <= CHUNK_OVERLAP_BYTES {
            overlap += pieces[next - 1].end - pieces[next - 1].start;
            next -= 1;
        }
        first = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_one_chunk_and_blank_text_none() {
        assert_eq!(chunk_text("one\ntwo\n"), vec![Chunk { text: "one\ntwo\n", start_line: 1 }]);
        assert!(chunk_text(" \n\n\t").is_empty());
    }

    #[test]
    fn long_text_is_cut_on_lines_with_bounded_overlapping_chunks_covering_everything() {
        let text: String = (1..=400).map(|i| format!("line {i} of the ember protocol notes\n")).collect();
        let chunks = chunk_text(&text);
        assert!(chunks.len() > 3, "{}", chunks.len());
        for pair in chunks.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            assert!(a.text.len() <= CHUNK_MAX_BYTES);
            assert!(a.text.ends_with('\n') && b.start_line > a.start_line);
            // b starts inside a (overlap) but not at its start, and the overlap is whole lines.
            let overlap = a.text.len() - (b.text.as_ptr() as usize - a.text.as_ptr() as usize);
            assert!(overlap > 0 && overlap <= CHUNK_OVERLAP_BYTES, "overlap {overlap}");
            assert!(b.text.starts_with("line "));
        }
        // Every line is in some chunk.
        for i in 1..=400 {
            let line = format!("line {i} of");
            assert!(chunks.iter().any(|c| c.text.contains(&line)), "{line}");
        }
        assert_eq!(chunks.last().unwrap().text.lines().last(), Some("line 400 of the ember protocol notes"));
    }

    #[test]
    fn a_giant_line_is_split_on_character_boundaries() {
        let text = "é".repeat(CHUNK_MAX_BYTES * 2); // 2-byte characters, 2 * max chars
        let chunks = chunk_text(&text);
        assert!(chunks.len() >= 2);
        assert!(chunks.iter().all(|c| c.text.len() <= CHUNK_MAX_BYTES && c.start_line == 1));
        assert_eq!(chunks.iter().map(|c| c.text.chars().count()).sum::<usize>(), CHUNK_MAX_BYTES * 2);
    }
}
