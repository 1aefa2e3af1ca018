//! A day of use, compressed: 50 projects visited one after another, 2 conversations each, 4 turns
//! each, at most 2 projects active at a time, through the app's runtime wiring (manager → registry →
//! the real `opencode serve`) and the built-in scripted model. Samples the runtime's memory (its
//! process tree's RSS) every second and prints it over time, its peak and the steady state of two
//! active projects; writes the series as CSV and as a PNG chart to `test-output/bench/`.
//!
//! By default the registry runs with its production bounds, so an idle runtime past its memory bound
//! is replaced; `-- --no-recycle` turns that off to show the growth it prevents. Asserts nothing
//! about memory; fails when the runtime is missing, a turn fails, or a conversation does not continue
//! its native session (each reply says how many of the conversation's messages the model saw).
//!
//! `cargo bench -p hearth-core --bench soak [-- --no-recycle]`

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hearth_core::diagnostics::kit;
use hearth_core::host::procinfo;
use hearth_core::runtime::*;
use hearth_core::scripted_model::{default_reply, Reply, RequestKind, Script, ScriptedModelServer};
use hearth_core::space::{resolve_local, ExecutionSpace};
use tokio_util::sync::CancellationToken;

const PROJECTS: usize = 50;
const CONVERSATIONS: usize = 2;
const TURNS: usize = 4;
/// Projects active at once: visited in pairs.
const ACTIVE: usize = 2;
const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// Between two visits: the least time a user takes to move to other projects. Without it no moment
/// would pass with no turn running, and Hearth replaces the runtime only in such a moment.
const SWITCH_PAUSE: Duration = Duration::from_secs(1);
/// A first prompt in a new project takes 3–10 s here; past this the turn counts as failed.
const TURN_TIMEOUT: Duration = Duration::from_secs(90);
/// The goal the issue sets: the peak within this many times the steady state of two active projects.
const PEAK_GOAL: f64 = 1.5;
const BYTES_PER_MIB: f64 = 1024.0 * 1024.0;
const CHART_SIZE: (u32, u32) = (1000, 420);
const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// One memory reading: seconds since the start, MiB, projects whose visit had started.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: f64,
    mib: f64,
    visited: usize,
    /// The reading was taken during the steady-state phase (the first pair, visited again).
    steady: bool,
}

#[derive(Default)]
struct Progress {
    visited: usize,
    steady: bool,
}

fn main() -> ExitCode {
    let recycle = !std::env::args().any(|a| a == "--no-recycle");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio");
    match rt.block_on(bench(recycle)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("soak bench failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Replies "saw N user messages": the conversation's Nth turn must see N.
fn script() -> Script {
    Script::custom(|request| match request.kind {
        RequestKind::Agent => {
            let users = request.user_texts().len();
            Reply::text(format!("saw {users} user messages"))
        }
        _ => default_reply(request),
    })
}

async fn bench(recycle: bool) -> Result<(), String> {
    let found = kit::locate_runtime().await.map_err(|e| format!("{e} (run scripts/setup.sh)"))?;
    let font = std::fs::read(FONT).map_err(|e| format!("the chart's font {FONT}: {e} (run scripts/setup.sh)"))?;
    let sandbox = tempfile::tempdir().map_err(|e| e.to_string())?;
    let model = ScriptedModelServer::start(script()).map_err(|e| e.to_string())?;
    let selection: RuntimeSelection = Arc::new(kit::scripted_config(&found, &model, false));
    let registry = RegistryConfig { recycle: if recycle { RecyclePolicy::default() } else { RecyclePolicy::NEVER }, ..RegistryConfig::default() };
    let manager = Arc::new(kit::runtimes(&sandbox.path().join("runtime"), None, registry, DEFAULT_FACADE_CAPACITY));
    let policy = if recycle {
        format!("on (bound {:.0} MiB, or {} instances freed)", registry.recycle.above_bytes as f64 / BYTES_PER_MIB, registry.recycle.after_disposals)
    } else {
        "OFF".to_string()
    };
    println!("Soak: {PROJECTS} projects in turn, {CONVERSATIONS} conversations x {TURNS} turns each, {ACTIVE} active at a time; recycling {policy}");

    let progress = Arc::new(Mutex::new(Progress::default()));
    let samples = Arc::new(Mutex::new(Vec::<Sample>::new()));
    let start = Instant::now();
    let stop = CancellationToken::new();
    let sampler = tokio::spawn(sample(manager.clone(), progress.clone(), samples.clone(), start, stop.clone()));

    let spaces: Vec<ExecutionSpace> = (0..PROJECTS).map(|p| project(sandbox.path(), p)).collect::<Result<_, _>>()?;
    let mut turns = Vec::new();
    // The first pair twice: its second visit is the steady state of two active projects.
    let mut visits: Vec<(usize, bool)> = vec![(0, false), (0, true)];
    visits.extend((1..PROJECTS.div_ceil(ACTIVE)).map(|pair| (pair, false)));
    for (pair, steady) in visits {
        {
            let mut p = progress.lock().unwrap();
            p.visited = p.visited.max((pair + 1) * ACTIVE);
            p.steady = steady;
        }
        let first_turn = if steady { TURNS } else { 0 };
        let runs = (pair * ACTIVE..((pair + 1) * ACTIVE).min(PROJECTS)).map(|p| visit(&manager, &selection, &spaces[p], p, first_turn));
        for took in futures::future::try_join_all(runs).await? {
            turns.extend(took);
        }
        tokio::time::sleep(SWITCH_PAUSE).await;
    }
    stop.cancel();
    sampler.await.map_err(|e| e.to_string())?;

    let samples = samples.lock().unwrap().clone();
    let report = manager.memory_report();
    let report_at = start.elapsed().as_secs_f64();
    let statuses = manager.runtimes();
    let launches: u32 = statuses.iter().map(|r| r.runtime.launches).sum();
    let pids = manager.pids();
    manager.dispose().await;
    for pid in pids {
        if !kit::gone_within(pid, Duration::from_secs(10)).await {
            return Err(format!("runtime pid {pid} is still running after dispose"));
        }
    }

    let recycles: Vec<f64> = report.recycles.iter().map(|r| report_at - r.ago_ms as f64 / 1000.0).collect();
    print_figures(&samples, &turns, &recycles, launches)?;
    let dir = kit::workspace_root().join("test-output").join("bench");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let name = if recycle { "soak-memory" } else { "soak-memory-no-recycle" };
    write_csv(&dir.join(format!("{name}.csv")), &samples, &recycles)?;
    draw_chart(&dir.join(format!("{name}.png")), &samples, &recycles, report.bound_bytes as f64 / BYTES_PER_MIB, recycle, font)?;
    println!("Series: {}/{name}.csv and .png", dir.display());
    Ok(())
}

fn project(root: &Path, p: usize) -> Result<ExecutionSpace, String> {
    let dir = root.join("projects").join(format!("project-{p:02}"));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("README.md"), format!("soak project {p}\n")).map_err(|e| e.to_string())?;
    resolve_local(&dir).map_err(|e| e.to_string())
}

/// One project's conversations, their turns interleaved as a user switching between two would;
/// each turn continues its conversation's native session, as the app's store does. Returns each
/// turn's time.
async fn visit(manager: &SelectedRuntimeManager, selection: &RuntimeSelection, space: &ExecutionSpace, p: usize, first_turn: usize) -> Result<Vec<Duration>, String> {
    let facade = manager.get_runtime(selection, space).await.map_err(|e| e.to_string())?;
    let mut native: Vec<Option<String>> = vec![None; CONVERSATIONS];
    let mut took = Vec::new();
    for turn in first_turn..first_turn + TURNS {
        for (c, session) in native.iter_mut().enumerate() {
            let conversation = format!("p{p}-c{c}");
            let mut request = kit::run_request(&conversation, &format!("soak turn {}", turn + 1), space);
            request.native_session = session.clone();
            let finished = kit::run_to_end(&*facade, request, CancellationToken::new(), TURN_TIMEOUT).await.map_err(|e| format!("{conversation} turn {}: {e}", turn + 1))?;
            let TurnEnd::Done { native_session_id, text } = &finished.end else {
                return Err(format!("{conversation} turn {} ended {:?}", turn + 1, finished.end));
            };
            let expect = format!("saw {} user messages", turn + 1);
            if text != &expect || session.as_ref().is_some_and(|s| s != native_session_id) {
                return Err(format!("{conversation} turn {} did not continue its session: {text:?} in {native_session_id} (expected {expect:?} in {session:?})", turn + 1));
            }
            *session = Some(native_session_id.clone());
            took.push(finished.took);
        }
    }
    Ok(took)
}

async fn sample(manager: Arc<SelectedRuntimeManager>, progress: Arc<Mutex<Progress>>, samples: Arc<Mutex<Vec<Sample>>>, start: Instant, stop: CancellationToken) {
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let bytes: u64 = manager.pids().into_iter().filter_map(|pid| procinfo::tree_rss(pid).ok()).map(|t| t.bytes).sum();
        if bytes == 0 {
            continue;
        }
        let (visited, steady) = {
            let p = progress.lock().unwrap();
            (p.visited, p.steady)
        };
        samples.lock().unwrap().push(Sample { at: start.elapsed().as_secs_f64(), mib: bytes as f64 / BYTES_PER_MIB, visited, steady });
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn print_figures(samples: &[Sample], turns: &[Duration], recycles: &[f64], launches: u32) -> Result<(), String> {
    let steady = median(samples.iter().filter(|s| s.steady).map(|s| s.mib).collect());
    let peak = samples.iter().copied().max_by(|a, b| a.mib.total_cmp(&b.mib)).ok_or("no memory was sampled")?;
    let last = samples.last().ok_or("no memory was sampled")?;
    let turn_ms = median(turns.iter().map(|d| d.as_secs_f64() * 1000.0).collect());
    println!("\nRuntime memory (VmRSS of the runtime's process tree), every {} s:", SAMPLE_EVERY.as_secs());
    println!("  {:>8}  {:>9}  {:>8}", "time s", "visited", "MiB");
    let step = (samples.len() / 25).max(1);
    for s in samples.iter().step_by(step) {
        println!("  {:>8.0}  {:>9}  {:>8.0}", s.at, s.visited, s.mib);
    }
    println!("\n  steady state, 2 projects active: {steady:.0} MiB (median over the first pair's second visit)");
    println!("  peak: {:.0} MiB at {:.0} s ({} projects visited); at the end: {:.0} MiB", peak.mib, peak.at, peak.visited, last.mib);
    let ratio = peak.mib / steady;
    println!("  peak / steady: {ratio:.2} (goal <= {PEAK_GOAL}: {})", if ratio <= PEAK_GOAL { "met" } else { "NOT met" });
    println!("  recycles: {} at {:?} s; runtime launches: {launches}", recycles.len(), recycles.iter().map(|t| t.round() as i64).collect::<Vec<_>>());
    println!("  turns: {} in {:.0} s, median {turn_ms:.0} ms", turns.len(), last.at);
    Ok(())
}

fn write_csv(path: &Path, samples: &[Sample], recycles: &[f64]) -> Result<(), String> {
    let mut out = String::from("seconds,rss_mib,projects_visited,recycled_since_last_sample\n");
    let mut previous = 0.0;
    for s in samples {
        let recycled = recycles.iter().filter(|&&t| t > previous && t <= s.at).count();
        out.push_str(&format!("{:.1},{:.1},{},{}\n", s.at, s.mib, s.visited, recycled));
        previous = s.at;
    }
    std::fs::write(path, out).map_err(|e| format!("{}: {e}", path.display()))
}

fn draw_chart(path: &PathBuf, samples: &[Sample], recycles: &[f64], bound_mib: f64, recycle: bool, font: Vec<u8>) -> Result<(), String> {
    use plotters::prelude::*;
    let font: &'static [u8] = Box::leak(font.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, font).map_err(|_| "the chart's font could not be read".to_string())?;
    let err = |e: &dyn std::fmt::Display| format!("chart {}: {e}", path.display());
    let root = BitMapBackend::new(path, CHART_SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let end = samples.last().map_or(1.0, |s| s.at);
    let top = samples.iter().map(|s| s.mib).fold(if recycle { bound_mib } else { 0.0 }, f64::max) * 1.1;
    let title = format!("Runtime memory, {PROJECTS} projects in turn ({})", if recycle { "recycling on" } else { "recycling off" });
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..end, 0.0..top)
        .map_err(|e| err(&e))?;
    chart.configure_mesh().x_desc("seconds").y_desc("RSS (MiB)").label_style(("sans-serif", 13)).draw().map_err(|e| err(&e))?;
    chart
        .draw_series(LineSeries::new(samples.iter().map(|s| (s.at, s.mib)), BLUE.stroke_width(2)))
        .map_err(|e| err(&e))?
        .label("runtime RSS")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLUE.stroke_width(2)));
    if recycle {
        chart
            .draw_series(LineSeries::new([(0.0, bound_mib), (end, bound_mib)], RED.stroke_width(1)))
            .map_err(|e| err(&e))?
            .label("recycle bound")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], RED));
    }
    for &t in recycles {
        chart.draw_series(LineSeries::new([(t, 0.0), (t, top)], BLACK.mix(0.4))).map_err(|e| err(&e))?;
    }
    chart.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.8)).label_font(("sans-serif", 13)).draw().map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}
