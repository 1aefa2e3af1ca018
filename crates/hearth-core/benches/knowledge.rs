//! Knowledge service benchmark: imports synthetic documents into a real SQLite file and managed folder
//! in a temp dir, then times searches through the public API. Prints figures; asserts only that the
//! answers are right (a fast wrong answer is no result).
//!
//! Run: `cargo bench -p hearth-core --bench knowledge`

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hearth_core::knowledge::KnowledgeService;
use tokio_util::sync::CancellationToken;

/// Documents generated and imported.
const DOCUMENTS: usize = 10_000;
/// Documents per generated folder (folders are nested two levels).
const DOCUMENTS_PER_FOLDER: usize = 100;
/// Words in the synthetic vocabulary; word frequency falls off with rank (Zipf-like), as in prose.
const VOCABULARY: usize = 5_000;
/// Lines per document: between MIN and MIN + SPREAD.
const MIN_LINES: usize = 20;
const LINE_SPREAD: usize = 80;
const WORDS_PER_LINE: usize = 10;
/// Searches timed.
const SEARCHES: usize = 500;
/// Hits asked for per search (what the gateway will ask for).
const HITS: usize = 10;
/// Searches timed right after the import, while its index is merged.
const SETTLING_SEARCHES: usize = 20;
/// Of the imported files, every this-many-th is edited and imported again.
const EDITED_EVERY: usize = 10;
/// The speed goal for a median search.
const P50_GOAL: Duration = Duration::from_millis(5);

/// Small deterministic generator (xorshift64*): same corpus every run, no extra dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// A word rank skewed towards common words: the square of a uniform number.
    fn word(&mut self) -> usize {
        let u = self.below(1 << 16) as f64 / 65536.0;
        ((u * u * u) * VOCABULARY as f64) as usize
    }
}

fn word(rank: usize) -> String {
    const SYLLABLES: [&str; 16] = ["ka", "lo", "mi", "ren", "tu", "sa", "vel", "or", "pi", "dan", "ex", "qua", "bri", "no", "zu", "fe"];
    let (mut n, mut w) = (rank + 16, String::new());
    while n > 0 {
        w.push_str(SYLLABLES[n % 16]);
        n /= 16;
    }
    w
}

/// Where document `i` of the corpus under `root` is.
fn document_path(root: &Path, i: usize) -> PathBuf {
    let folder = i / DOCUMENTS_PER_FOLDER;
    let name = if i % 3 == 0 { format!("doc-{i}.rs") } else { format!("doc-{i}.md") };
    root.join(format!("area-{}", folder % 10)).join(format!("topic-{folder}")).join(name)
}

fn generate(root: &Path, rng: &mut Rng) -> u64 {
    let mut bytes = 0;
    for i in 0..DOCUMENTS {
        let path = document_path(root, i);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut text = format!("# Document {i}\n\nReference marker docmarker{i} for lookup.\n\n");
        for _ in 0..MIN_LINES + rng.below(LINE_SPREAD) {
            let line: Vec<String> = (0..WORDS_PER_LINE).map(|_| word(rng.word())).collect();
            text.push_str(&line.join(" "));
            text.push('\n');
        }
        std::fs::write(path, &text).unwrap();
        bytes += text.len() as u64;
    }
    bytes
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).saturating_sub(1).min(sorted.len() - 1)]
}

fn main() {
    // The import's own log line says where its time went (scan, read, hash, insert, commit); the
    // maintenance thread's lines say how long the merge and the checkpoint after it took.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("hearth_core::knowledge::import=info,hearth_core::knowledge::maintenance=info"))
        .with_target(false)
        .init();
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);

    let started = Instant::now();
    let bytes = generate(&corpus, &mut rng);
    println!("generated {DOCUMENTS} documents, {:.1} MB, in {:.1?}", bytes as f64 / 1e6, started.elapsed());

    let k = KnowledgeService::open(tmp.path().join("knowledge.sqlite"), tmp.path().join("managed")).unwrap();
    let lib = k.create_library("bench").unwrap();
    let other = k.create_library("other").unwrap();
    let started = Instant::now();
    let mut events = 0u32;
    let report = k.import_path(lib.id, &corpus, &CancellationToken::new(), |_| events += 1).unwrap();
    let import_time = started.elapsed();
    let import_done = Instant::now();
    assert_eq!(report.imported as usize, DOCUMENTS, "{:?}", &report.skipped[..report.skipped.len().min(5)]);
    println!(
        "import: {DOCUMENTS} files in {:.2?} = {:.1} MB/s, {:.0} files/s ({events} progress events)",
        import_time,
        bytes as f64 / 1e6 / import_time.as_secs_f64(),
        DOCUMENTS as f64 / import_time.as_secs_f64()
    );
    // Right after the import its batches are searchable as they are, while the maintenance thread merges
    // them beside the searches: what a user searching at once gets.
    let started = Instant::now();
    let mut settling = Vec::new();
    let mut query_rng = Rng(7);
    for _ in 0..SETTLING_SEARCHES {
        let query = format!("{} {}", word(query_rng.below(10)), word(100 + query_rng.below(1_000)));
        let began = Instant::now();
        assert!(!k.search(&[lib.id], &query, HITS).unwrap().is_empty(), "{query}");
        settling.push(began.elapsed());
    }
    settling.sort();
    println!(
        "searches right after the import, beside the merge: p50 {:.2?}, max {:.2?} ({SETTLING_SEARCHES} in {:.2?})",
        percentile(&settling, 0.5),
        settling.last().unwrap(),
        started.elapsed()
    );
    // The import's segments are merged and its log copied into the database file after it returns,
    // on a thread of its own. Timed here, and waited for so that the searches below run alone.
    k.wait_for_maintenance();
    println!(
        "index merge and log checkpoint after the import (their own thread, not part of the import): done {:.2?} after it",
        import_done.elapsed()
    );
    // A second library with the same words: searches scoped to `lib` must filter it out.
    let few = corpus.join("area-0").join("topic-0");
    k.import_path(other.id, &few, &CancellationToken::new(), |_| {}).unwrap();
    let started = Instant::now();
    let again = k.import_path(lib.id, &corpus, &CancellationToken::new(), |_| {}).unwrap();
    assert_eq!(again.unchanged as usize, DOCUMENTS);
    println!("re-import of unchanged files (hash check only): {:.2?}", started.elapsed());

    // Query kinds. The first three are what users and agents type (rare names, content words,
    // questions padded with everyday words) and make up the goal; the last searches only the most
    // common words of the corpus (like "the of"), the worst case, reported on its own.
    let scope = [lib.id];
    let content = |rng: &mut Rng| word(100 + rng.below(1_000));
    let everyday = |rng: &mut Rng| word(rng.below(10));
    let mut kinds: [(&str, Vec<Duration>); 4] =
        [("rare name", vec![]), ("two content words", vec![]), ("question", vec![]), ("only common words", vec![])];
    let mut total_hits = 0;
    for n in 0..SEARCHES {
        let kind = n % kinds.len();
        let query = match kind {
            0 => format!("docmarker{}", rng.below(DOCUMENTS)),
            1 => format!("{} {}", content(&mut rng), content(&mut rng)),
            2 => format!("{} {} {} {}?", everyday(&mut rng), content(&mut rng), everyday(&mut rng), content(&mut rng)),
            _ => format!("{} {}", everyday(&mut rng), everyday(&mut rng)),
        };
        let started = Instant::now();
        let hits = k.search(&scope, &query, HITS).unwrap();
        kinds[kind].1.push(started.elapsed());
        assert!(hits.iter().all(|h| h.library_id == lib.id), "a hit from outside the scope");
        if kind == 0 {
            assert_eq!(hits.len(), 1, "{query}");
            assert!(hits[0].snippet.contains(&format!("«{query}»")));
        } else {
            assert!(!hits.is_empty(), "{query}");
        }
        total_hits += hits.len();
    }
    let mut typical: Vec<Duration> = kinds[..3].iter().flat_map(|(_, t)| t.iter().copied()).collect();
    typical.sort();
    for (name, times) in &mut kinds {
        times.sort();
        println!("  {name:<18} p50 {:>8.2?}  p99 {:>8.2?}", percentile(times, 0.5), percentile(times, 0.99));
    }
    let p50 = percentile(&typical, 0.5);
    println!(
        "search: {SEARCHES} searches of {DOCUMENTS} documents, {HITS} hits asked ({total_hits} returned); typical queries: p50 {p50:.2?}, p99 {:.2?}, max {:.2?}",
        percentile(&typical, 0.99),
        typical.last().unwrap()
    );
    println!("goal p50 <= {P50_GOAL:?} for typical queries: {}", if p50 <= P50_GOAL { "met" } else { "NOT met" });

    let started = Instant::now();
    let doc = k.search(&scope, "docmarker42", 1).unwrap()[0].document_id;
    let text = k.read_document(&scope, doc, 64 * 1024).unwrap();
    assert!(text.text.contains("docmarker42 "));
    println!("read_document: {:.2?}", started.elapsed());

    // Some files edited: the re-import replaces their chunks (a document's chunks are found by their
    // row-id range; the chunk table has no other index).
    let edited: Vec<usize> = (0..DOCUMENTS).step_by(EDITED_EVERY).collect();
    for &i in &edited {
        let path = document_path(&corpus, i);
        let text = std::fs::read_to_string(&path).unwrap() + &format!("Edited later: editmarker{i}.\n");
        std::fs::write(path, text).unwrap();
    }
    let started = Instant::now();
    let report = k.import_path(lib.id, &corpus, &CancellationToken::new(), |_| {}).unwrap();
    assert_eq!((report.replaced as usize, report.unchanged as usize), (edited.len(), DOCUMENTS - edited.len()));
    println!("re-import with {} files edited (their chunks replaced): {:.2?}", edited.len(), started.elapsed());
    let probe = edited[edited.len() / 2];
    assert_eq!(k.search(&scope, &format!("editmarker{probe}"), HITS).unwrap().len(), 1, "the edit is found");
    let before_edit = format!("docmarker{probe}");
    assert!(k.search(&scope, &before_edit, HITS).unwrap()[0].snippet.contains(&format!("«{before_edit}»")));
    k.wait_for_maintenance();

    let started = Instant::now();
    k.delete_library(lib.id).unwrap();
    println!("deleting the library ({DOCUMENTS} documents and their managed copies): {:.2?}", started.elapsed());
    let deleted = Instant::now();
    k.wait_for_maintenance();
    println!("index merge and log checkpoint after the deletion (their own thread): done {:.2?} after it", deleted.elapsed());
    assert!(k.search(&scope, "docmarker42", HITS).unwrap().is_empty());
    assert_eq!(k.search(&[other.id], "docmarker42", HITS).unwrap().len(), 1, "the other library keeps its own");
}
