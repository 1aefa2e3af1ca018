//! The isolation check's context corpus: N MiB of conversation in fixed-size items, each starting
//! with a numbered canary line and filled with one byte, so a recorded model request shows exactly
//! which items reached the model and how many fill bytes arrived.

use std::collections::BTreeSet;

/// Corpus sizes the check accepts, in MiB: none, then small, medium and large contexts.
pub const ALLOWED_CORPUS_MIB: [u32; 4] = [0, 2, 8, 32];
/// Bytes of one corpus item (one stored message), canary line included.
pub const CORPUS_ITEM_BYTES: usize = 256 * 1024;
/// Every item's first line is this prefix and the item number in [`CANARY_DIGITS`] digits.
pub const CANARY_PREFIX: &str = "ISOLATION_CANARY_";
pub const CANARY_DIGITS: usize = 4;
/// The fill byte after the canary line.
pub const FILL_BYTE: u8 = b'Z';
/// Runs of the fill byte at least this long count as fill (nothing else in a request has them).
pub const MIN_FILL_RUN: usize = 1024;

/// What a corpus of a given size consists of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CorpusPlan {
    pub mib: u32,
}

/// A corpus size outside [`ALLOWED_CORPUS_MIB`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the corpus size must be 0, 2, 8 or 32 MiB, not {0} MiB")]
pub struct CorpusSizeError(pub u32);

impl CorpusPlan {
    pub fn new(mib: u32) -> Result<Self, CorpusSizeError> {
        if ALLOWED_CORPUS_MIB.contains(&mib) {
            Ok(Self { mib })
        } else {
            Err(CorpusSizeError(mib))
        }
    }

    pub fn items(&self) -> usize {
        self.mib as usize * 1024 * 1024 / CORPUS_ITEM_BYTES
    }

    pub fn total_bytes(&self) -> u64 {
        (self.items() * CORPUS_ITEM_BYTES) as u64
    }

    fn canary(index: usize) -> String {
        format!("{CANARY_PREFIX}{index:0width$}\n", width = CANARY_DIGITS)
    }

    /// Fill bytes over the whole corpus (every item minus its canary line).
    pub fn fill_bytes(&self) -> u64 {
        (0..self.items()).map(|i| (CORPUS_ITEM_BYTES - Self::canary(i).len()) as u64).sum()
    }

    /// The text of item `index`: exactly [`CORPUS_ITEM_BYTES`] bytes.
    pub fn item(&self, index: usize) -> String {
        let canary = Self::canary(index);
        let mut text = String::with_capacity(CORPUS_ITEM_BYTES);
        text.push_str(&canary);
        text.extend(std::iter::repeat_n(FILL_BYTE as char, CORPUS_ITEM_BYTES - canary.len()));
        text
    }
}

/// What of the corpus a request body carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CorpusScan {
    /// Item numbers whose canary occurs.
    pub canaries: BTreeSet<usize>,
    /// Bytes in fill runs of at least [`MIN_FILL_RUN`].
    pub fill_bytes: u64,
}

impl CorpusScan {
    pub fn of(body: &[u8]) -> Self {
        let mut canaries = BTreeSet::new();
        for at in memchr::memmem::find_iter(body, CANARY_PREFIX.as_bytes()) {
            let digits = &body[at + CANARY_PREFIX.len()..];
            let n = digits.iter().take_while(|b| b.is_ascii_digit()).count();
            if n == CANARY_DIGITS {
                if let Some(index) = std::str::from_utf8(&digits[..n]).ok().and_then(|s| s.parse().ok()) {
                    canaries.insert(index);
                }
            }
        }
        let mut fill_bytes = 0u64;
        let mut run = 0usize;
        for &b in body {
            if b == FILL_BYTE {
                run += 1;
                continue;
            }
            if run >= MIN_FILL_RUN {
                fill_bytes += run as u64;
            }
            run = 0;
        }
        if run >= MIN_FILL_RUN {
            fill_bytes += run as u64;
        }
        Self { canaries, fill_bytes }
    }

    /// Item numbers of `plan` whose canary is missing.
    pub fn missing(&self, plan: &CorpusPlan) -> Vec<usize> {
        (0..plan.items()).filter(|i| !self.canaries.contains(i)).collect()
    }
}

/// A short list of numbers for a sentence: the first few, then how many more.
pub fn list_some(numbers: &[usize]) -> String {
    const SHOWN: usize = 8;
    let head: Vec<String> = numbers.iter().take(SHOWN).map(usize::to_string).collect();
    match numbers.len().saturating_sub(SHOWN) {
        0 => head.join(", "),
        more => format!("{} and {more} more", head.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_items_and_fill() {
        assert!(CorpusPlan::new(3).unwrap_err().to_string().contains("0, 2, 8 or 32"));
        let plan = CorpusPlan::new(2).unwrap();
        assert_eq!(plan.items(), 8);
        assert_eq!(plan.total_bytes(), 2 * 1024 * 1024);
        let item = plan.item(7);
        assert_eq!(item.len(), CORPUS_ITEM_BYTES);
        assert!(item.starts_with("ISOLATION_CANARY_0007\nZZZ"));
        assert_eq!(plan.fill_bytes(), 8 * (CORPUS_ITEM_BYTES as u64 - 22));
        assert_eq!(CorpusPlan::new(0).unwrap().items(), 0);
    }

    #[test]
    fn a_scan_finds_every_canary_and_fill_byte_through_json_escaping() {
        let plan = CorpusPlan::new(2).unwrap();
        let conversation: String =
            (0..plan.items()).filter(|i| *i != 3).map(|i| format!("[User]: {}\n", plan.item(i))).collect();
        let body = serde_json::to_vec(
            &serde_json::json!({"messages": [{"role": "user", "content": conversation}], "z": "ZZZ"}),
        )
        .unwrap();
        let scan = CorpusScan::of(&body);
        assert_eq!(scan.missing(&plan), vec![3]);
        assert_eq!(scan.fill_bytes, plan.fill_bytes() - (CORPUS_ITEM_BYTES as u64 - 22), "short Z runs are not fill");
        assert_eq!(CorpusScan::of(b"ISOLATION_CANARY_12 ISOLATION_CANARY_00012").canaries.len(), 0);
    }

    #[test]
    fn lists_stay_short() {
        assert_eq!(list_some(&[1, 2]), "1, 2");
        assert_eq!(list_some(&(0..20).collect::<Vec<_>>()), "0, 1, 2, 3, 4, 5, 6, 7 and 12 more");
    }
}
