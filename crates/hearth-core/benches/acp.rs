//! ACP benchmark: a turn on `opencode acp` against the same turn on OpenCode's HTTP server — the
//! same project, the same scripted model, the same tool call (`read marker.txt`) — and the agent
//! process's memory with 1 and with 10 projects open; Claude Code beside them when it is installed.
//! Both runtimes are made by the self-test's own constructors (`diagnostics/choice.rs`), so this is
//! the wiring a conversation runs. It asserts nothing about speed; it fails only when the runtime
//! is missing, a turn fails, or a process is left behind.
//!
//! `cargo bench -p hearth-core --bench acp`

// Shared with the runtime benchmark, which uses more of it.
#[allow(dead_code)]
mod support;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use hearth_core::acp::AgentSearch;
use hearth_core::diagnostics::choice::{self, CheckSetup};
use hearth_core::diagnostics::kit::{self, FoundRuntime};
use hearth_core::host::procinfo;
use hearth_core::runtime::*;
use hearth_core::scripted_model::{Script, ScriptedModelServer};
use hearth_core::space::resolve_local;
use support::*;
use tokio_util::sync::CancellationToken;

/// Projects open for the second memory reading.
const PROJECTS: usize = 10;
/// Measured turns per runtime, interleaved so both see the same machine.
const TURNS: usize = 20;
/// Unmeasured turns first: a session's first turn also starts the agent and asks for a title.
const WARMUP_TURNS: usize = 2;
/// Pause before reading memory, so work finished just after a turn is in the figure.
const SETTLE: Duration = Duration::from_secs(3);
const STOP_WAIT: Duration = Duration::from_secs(10);
const WORKER_THREADS: usize = 2;
const PROMPT: &str = "Read marker.txt";

struct Runtime {
    label: String,
    facades: Vec<Arc<WorkspaceRuntime>>,
    turns: Vec<Duration>,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt().with_max_level(tracing::Level::WARN).with_writer(std::io::stderr).init();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(WORKER_THREADS).enable_all().build().expect("tokio runtime");
    rt.block_on(async {
        let found = match kit::locate_runtime().await {
            Ok(found) => found,
            Err(why) => {
                eprintln!("The ACP benchmark needs the real OpenCode runtime and rg, and could not find them: {why}");
                return ExitCode::FAILURE;
            }
        };
        match run(found).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("Benchmark failed: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

/// One turn through the facade, from `run()` to its end; the reply must carry the project's marker.
async fn turn(facade: &WorkspaceRuntime, conversation: &str, marker: &str) -> Result<Duration, String> {
    let request = kit::run_request(conversation, PROMPT, facade.space());
    let started = Instant::now();
    let mut stream = facade.run(request, CancellationToken::new());
    let end = tokio::time::timeout(RUN_TIMEOUT, async {
        while let Some(event) = stream.next().await {
            if let RuntimeEvent::Ended { end } = event {
                return Some(end);
            }
        }
        None
    })
    .await
    .map_err(|_| format!("a turn in {conversation} took over {} s", RUN_TIMEOUT.as_secs()))?;
    match end {
        Some(TurnEnd::Done { text, .. }) if text.contains(marker) => Ok(started.elapsed()),
        other => Err(format!("a turn in {conversation} ended {other:?}, not with {marker}")),
    }
}

async fn run(found: FoundRuntime) -> Result<(), String> {
    let sandbox = tempfile::tempdir().map_err(|e| e.to_string())?;
    let model = ScriptedModelServer::start(Script::default_agent()).map_err(|e| e.to_string())?;
    let mut spaces = Vec::new();
    for i in 0..PROJECTS {
        let dir = sandbox.path().join(format!("project-{i}"));
        std::fs::create_dir(&dir).map_err(|e| e.to_string())?;
        std::fs::write(dir.join("marker.txt"), marker(i)).map_err(|e| e.to_string())?;
        spaces.push(resolve_local(&dir).map_err(|e| e.to_string())?);
    }
    let agents = AgentSearch { anchors: vec![kit::workspace_root()], ..AgentSearch::from_process(vec![]) };
    // Every project stays warm and no process is replaced: the figures are the runtimes' own.
    let registry = RegistryConfig { max_warm_instances: PROJECTS, recycle: RecyclePolicy::NEVER, ..RegistryConfig::default() };
    let manager = kit::runtimes(&sandbox.path().join("runtime"), None, registry, PROJECTS * 3);
    let mut choices = vec![RuntimeChoice::OpenCode, RuntimeChoice::Acp { agent: "opencode".into() }];
    let claude = RuntimeChoice::Acp { agent: "claude-code".into() };
    match choice::unavailable(&claude, &agents) {
        None => choices.push(claude),
        Some(why) => println!("Claude Code is left out: {why}"),
    }
    let mut runtimes = Vec::new();
    for c in &choices {
        let mut config = kit::scripted_config(&found, &model, false);
        config.rg_dir = Some(found.rg_dir.clone());
        let selection = choice::selection(c, CheckSetup { config, model: &model, gateway: None, skills: None, agents: &agents, bridge: None, transport: Default::default(), project: &spaces[0].root, remote: None })
            .map_err(|e| e.to_string())?;
        let mut facades = Vec::new();
        for space in &spaces {
            facades.push(manager.get_runtime(&selection, space).await.map_err(|e| e.to_string())?);
        }
        runtimes.push(Runtime { label: choice::label(c), facades, turns: Vec::new() });
    }

    let result = measure(&mut runtimes).await;
    let pids: Vec<u32> = manager.runtimes().iter().filter_map(|r| r.runtime.pid).collect();
    drop(runtimes);
    manager.dispose().await;
    model.shutdown().await;
    for pid in pids {
        if !kit::gone_within(pid, STOP_WAIT).await {
            return Err(format!("process {pid} was left running"));
        }
    }
    result
}

async fn measure(runtimes: &mut [Runtime]) -> Result<(), String> {
    // Memory with one project: its first turns (which start the process) done, then settled.
    let mut one = Vec::new();
    for r in runtimes.iter_mut() {
        let facade = r.facades[0].clone();
        for _ in 0..WARMUP_TURNS {
            turn(&facade, "bench-0", &marker(0)).await?;
        }
    }
    tokio::time::sleep(SETTLE).await;
    for r in runtimes.iter() {
        one.push(memory(&r.facades[0])?);
    }

    for _ in 0..TURNS {
        for r in runtimes.iter_mut() {
            let took = turn(&r.facades[0], "bench-0", &marker(0)).await?;
            r.turns.push(took);
        }
    }
    println!("\nA warm turn (read marker.txt with the agent's own tool, then answer), {TURNS} each, interleaved");
    print_timing_header();
    for r in runtimes.iter() {
        print_timing_row(&r.label, &Summary::of(&r.turns));
    }
    let server = Summary::of(&runtimes[0].turns).median;
    for r in runtimes.iter().skip(1) {
        println!("  {} / {}: {:.2}× the median", r.label, runtimes[0].label, Summary::of(&r.turns).median / server);
    }

    // Memory with every project open: one conversation each has run a turn.
    for r in runtimes.iter_mut() {
        for (i, facade) in r.facades.iter().enumerate().skip(1) {
            turn(facade, &format!("bench-{i}"), &marker(i)).await?;
        }
    }
    tokio::time::sleep(SETTLE).await;
    println!("\nThe process's memory (its whole process tree)");
    print_memory_header();
    for (r, one) in runtimes.iter().zip(one) {
        print_memory_row(&format!("{}: 1 project", r.label), &one, 1);
        let ten = memory(&r.facades[0])?;
        print_memory_row(&format!("{}: {PROJECTS} projects", r.label), &ten, r.facades[0].status().open_instances.len());
        println!("  {:<40} {:>9.1}", format!("{}: per further project", r.label), (mib(ten.bytes) - mib(one.bytes)) / (PROJECTS - 1) as f64);
    }
    Ok(())
}

fn memory(facade: &WorkspaceRuntime) -> Result<procinfo::TreeRss, String> {
    let pid = facade.status().pid.ok_or("the runtime is not running")?;
    procinfo::tree_rss(pid).map_err(|e| e.to_string())
}

fn marker(i: usize) -> String {
    format!("PROJECT_{}", 600 + i)
}
