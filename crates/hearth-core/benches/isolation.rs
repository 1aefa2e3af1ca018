//! The isolation check at 32 MiB as a benchmark: compaction assembly time, B's prompt latency while
//! A's compaction is held vs B idle, and GET latency held vs idle. Prints figures and the goals
//! (B prompt held/idle ≤ 1.2, GET held/idle ≤ 1.5); asserts nothing about speed.
//!
//! `cargo bench -p hearth-core --bench isolation` (`HEARTH_BENCH_CORPUS_MIB` picks 0/2/8/32).


use std::process::ExitCode;

use hearth_core::diagnostics::isolation::{run_isolation_check, IsolationOptions};
use hearth_core::diagnostics::ProgressSink;
use tokio_util::sync::CancellationToken;

/// The corpus of the benchmark run unless the environment names another.
const DEFAULT_CORPUS_MIB: u32 = 32;
/// Goals from the isolation promise.
const B_PROMPT_RATIO_GOAL: f64 = 1.2;
const GET_RATIO_GOAL: f64 = 1.5;

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() -> ExitCode {
    let (binary, rg_dir) = match hearth_core::diagnostics::kit::locate_runtime().await {
        Ok(found) => (found.binary, found.rg_dir),
        Err(e) => {
            eprintln!("isolation bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    let corpus_mib = std::env::var("HEARTH_BENCH_CORPUS_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_CORPUS_MIB);
    let options = IsolationOptions::new(binary, Some(rg_dir), corpus_mib);
    let report = run_isolation_check(options, ProgressSink::silent(), CancellationToken::new()).await;
    println!("Isolation benchmark, {corpus_mib} MiB corpus: check {}", if report.passed { "passed" } else { "FAILED" });
    println!("  {:<58} {:>9} {:>9} {:>9}  unit", "figure", "min", "median", "max");
    for f in &report.figures {
        println!("  {:<58} {:>9.1} {:>9.1} {:>9.1}  {}", f.name, f.min, f.median, f.max, f.unit);
    }
    for (needle, goal) in [("B prompt held/idle", B_PROMPT_RATIO_GOAL), ("GET held/idle", GET_RATIO_GOAL)] {
        if let Some(f) = report.figures.iter().find(|f| f.name.contains(needle)) {
            println!("  {needle}: {:.2} (goal ≤ {goal}: {})", f.median, if f.median <= goal { "met" } else { "NOT met" });
        }
    }
    for a in report.assertions.iter().filter(|a| !a.passed) {
        println!("  FAILED: {} — {}", a.name, a.detail);
    }
    if report.passed { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
