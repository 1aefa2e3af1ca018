//! Runtime benchmark against the real `opencode serve` and the built-in scripted model, in a temp
//! sandbox. Prints, in one run: the runtime's memory as projects open and their instances are
//! disposed; a warm turn through the facade vs raw HTTP; a new project's first prompt with and
//! without pre-warming. It asserts nothing about speed (figures vary with the machine); it fails
//! only when the runtime is missing, a turn fails, or a runtime process is left behind.
//!
//! `cargo bench -p hearth-core --bench runtime` (set `HEARTH_OPENCODE_BIN` to use another binary).

mod support;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_core::diagnostics::kit;
use hearth_core::host::procinfo::{self, TreeRss};
use hearth_core::opencode::event_hub::EventHub;
use hearth_core::opencode::sessions::SessionRules;
use hearth_core::opencode::OpenCodeRuntime;
use hearth_core::runtime::*;
use hearth_core::scripted_model::{default_reply, Reply, RequestKind, Script, ScriptedModelServer};
use hearth_core::space::{resolve_local, ExecutionSpace};
use serde_json::json;
use support::*;

/// Projects open at the memory peak (the reference measured +50–60 MB per instance).
const PROJECTS: usize = 10;
/// Interleaved warm turns per path; enough for a stable median, ~0.2–0.5 s each.
const LATENCY_ITERATIONS: usize = 20;
/// Unmeasured turns per path first: the session's first turn also asks for a title.
const WARMUP_TURNS: usize = 2;
/// New projects measured per first-prompt variant (cold, pre-warmed then at once, pre-warmed then
/// after a user's pause), each 1–2 s.
const FIRST_PROMPT_SAMPLES: usize = 3;
/// The least time a user takes between opening a project and sending its first message: the
/// runtime finishes what warming started in the background meanwhile.
const USER_PAUSE: Duration = Duration::from_secs(1);
/// A pre-warmed first prompt may take at most this many warm turns (ratio of medians). Printed.
const FIRST_PROMPT_GOAL: f64 = 1.5;
/// The facade may cost at most this much over raw HTTP (ratio of medians). Printed, not enforced.
const FACADE_OVERHEAD_GOAL: f64 = 1.05;
/// Pause before reading memory, so work the runtime finishes just after a turn (titles, snapshot
/// writes, freeing) is in the figure.
const SETTLE: Duration = Duration::from_secs(3);
/// How long to keep watching memory after the disposals, and how often: the runtime frees lazily.
const RELEASE_WAIT: Duration = Duration::from_secs(42);
const RELEASE_POLL: Duration = Duration::from_secs(1);
/// How long the runtime and its children may take to go after dispose (SIGTERM grace is ~3 s).
const STOP_WAIT_SECS: u64 = 10;
/// Worker threads: the machine has 2 cores, and the runtime needs them more than we do.
const WORKER_THREADS: usize = 2;
/// What the scripted model answers every agent request: a plain text turn, no tool.
const FIXED_REPLY: &str = "BENCH_REPLY_OK";
const PROMPT: &str = "Say the fixed reply.";

// Project 0 serves the latency section; the first-prompt samples and fillers make up the rest.
const FILLER_PROJECTS: usize = PROJECTS - 1 - 3 * FIRST_PROMPT_SAMPLES;

fn main() -> ExitCode {
    tracing_subscriber::fmt().with_max_level(tracing::Level::WARN).with_writer(std::io::stderr).init();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(WORKER_THREADS).enable_all().build().expect("tokio runtime");
    rt.block_on(async {
        let started = Instant::now();
        let found = match kit::locate_runtime().await {
            Ok(found) => found,
            Err(why) => {
                eprintln!("The runtime benchmark needs the real OpenCode runtime and rg, and could not find them: {why}");
                return ExitCode::FAILURE;
            }
        };
        let code = match Bench::new(found).await {
            Ok(bench) => {
                let result = bench.run().await;
                let left = bench.teardown().await;
                match (result, left) {
                    (Ok(()), Ok(())) => ExitCode::SUCCESS,
                    (Err(e), _) | (_, Err(e)) => {
                        eprintln!("Benchmark failed: {e}");
                        ExitCode::FAILURE
                    }
                }
            }
            Err(e) => {
                eprintln!("Benchmark could not start: {e}");
                ExitCode::FAILURE
            }
        };
        println!("\nTotal bench time: {:.0} s", started.elapsed().as_secs_f64());
        code
    })
}

struct Bench {
    sandbox: tempfile::TempDir,
    model: ScriptedModelServer,
    manager: SelectedRuntimeManager,
    selection: RuntimeSelection,
    runtime: OpenCodeRuntime,
    /// The runtime and every descendant seen at its busiest, to prove all are gone at the end.
    seen_pids: std::sync::Mutex<Vec<u32>>,
}

impl Bench {
    async fn new(found: kit::FoundRuntime) -> Result<Self, String> {
        let sandbox = tempfile::tempdir().map_err(|e| e.to_string())?;
        let script = Script::custom(|request| match request.kind {
            RequestKind::Agent => Reply::text(FIXED_REPLY),
            _ => default_reply(request),
        });
        let model = ScriptedModelServer::start(script).map_err(|e| e.to_string())?;
        let selection: RuntimeSelection = Arc::new(kit::scripted_config(&found, &model, false));
        // The app's wiring. Production bounds would evict instances beyond 6 while we open 10, and
        // a sweep could land mid-measurement: this bench measures the peak, then disposes explicitly.
        let registry = RegistryConfig {
            max_warm_instances: PROJECTS,
            instance_idle_after: Duration::from_secs(3600),
            sweep_every: Duration::from_secs(3600),
            // This bench measures the growth a recycle would hide.
            recycle: RecyclePolicy::NEVER,
            ..RegistryConfig::default()
        };
        let manager = kit::runtimes(&sandbox.path().join("runtime"), None, registry, PROJECTS);
        // The runtime behind every facade (made by the manager on first use).
        let probe = sandbox.path().join("projects").join("probe");
        std::fs::create_dir_all(&probe).map_err(|e| e.to_string())?;
        let space = resolve_local(&probe).map_err(|e| e.to_string())?;
        let facade = manager.get_runtime(&selection, &space).await.map_err(|e| e.to_string())?;
        let runtime = kit::opencode_of(&facade).ok_or("the manager made no OpenCode runtime")?;
        Ok(Self { sandbox, model, manager, selection, runtime, seen_pids: Default::default() })
    }

    fn project(&self, name: &str) -> Result<ExecutionSpace, String> {
        let dir = self.sandbox.path().join("projects").join(name);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        std::fs::write(dir.join("README.md"), format!("bench project {name}\n")).map_err(|e| e.to_string())?;
        resolve_local(&dir).map_err(|e| e.to_string())
    }

    async fn facade(&self, space: &ExecutionSpace) -> Result<Arc<WorkspaceRuntime>, String> {
        self.manager.get_runtime(&self.selection, space).await.map_err(|e| e.to_string())
    }

    fn pid(&self) -> Result<u32, String> {
        self.runtime.status().pid.ok_or_else(|| "the runtime is not running".to_string())
    }

    fn open_instances(&self) -> usize {
        self.runtime.status().open_instances.len()
    }

    /// Settle, then read the runtime tree's memory (and remember its pids for the final check).
    async fn memory(&self) -> Result<TreeRss, String> {
        tokio::time::sleep(SETTLE).await;
        let pid = self.pid()?;
        let mut seen = self.seen_pids.lock().unwrap();
        for p in std::iter::once(pid).chain(procinfo::descendants(pid).unwrap_or_default()) {
            if !seen.contains(&p) {
                seen.push(p);
            }
        }
        procinfo::tree_rss(pid).map_err(|e| format!("cannot read the memory of runtime pid {pid}: {e}"))
    }

    // FILLER_PROJECTS is 0 with today's sample counts; its loop stays so other counts still open 10.
    #[allow(clippy::reversed_empty_ranges)]
    async fn run(&self) -> Result<(), String> {
        // --- Launch and idle memory.
        let launch = Instant::now();
        let client = self.runtime.client().await.map_err(|e| e.to_string())?;
        let launch_time = launch.elapsed();
        let pid = self.pid()?;
        println!("Hearth runtime benchmark: opencode {} (pid {pid}), scripted model, {} CPUs", hearth_core::opencode::PINNED_VERSION, std::thread::available_parallelism().map_or(0, |n| n.get()));
        println!("Runtime launched in {:.1} s; sandbox {}", launch_time.as_secs_f64(), self.sandbox.path().display());
        let mut memory = vec![("idle after launch", self.memory().await?, self.open_instances())];

        // --- One project, one prompt.
        let home = self.project("project-0")?;
        let home_facade = self.facade(&home).await?;
        let first = facade_turn(&home_facade, "latency-facade", PROMPT, FIXED_REPLY).await?;
        memory.push(("1 project open (after one prompt)", self.memory().await?, self.open_instances()));

        // --- Warm-turn latency: facade vs raw HTTP on the same project, interleaved.
        let hub = EventHub::start((*client).clone()).await.map_err(|e| e.to_string())?;
        let profile = self.runtime.config().resolve_profile(None).map_err(|e| e.to_string())?;
        let body = json!({
            "parts": [{ "type": "text", "text": PROMPT }],
            "model": { "providerID": profile.provider_id(), "modelID": profile.model },
            "agent": "build",
        });
        // The same rules the runtime gives its own sessions, so both paths do the same work.
        let permission = SessionRules { outside: OutsideProject::Deny, mode: WorkMode::Execute }.to_json();
        let dir = home.root_str();
        let session = client.create_session(dir, "Bench raw", &permission).await.map_err(|e| e.to_string())?;
        let (mut via_facade, mut via_raw, mut before_prompt) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..WARMUP_TURNS + LATENCY_ITERATIONS {
            // Alternate which path goes first so neither always follows the other's tail work.
            let (f, r) = if i % 2 == 0 {
                let f = timed_facade_turn(&home_facade, "latency-facade", PROMPT, FIXED_REPLY).await?;
                (f, raw_turn(&client, &hub, dir, &session, &body).await?)
            } else {
                let r = raw_turn(&client, &hub, dir, &session, &body).await?;
                (timed_facade_turn(&home_facade, "latency-facade", PROMPT, FIXED_REPLY).await?, r)
            };
            if i >= WARMUP_TURNS {
                via_facade.push(f.done);
                before_prompt.push(f.session);
                via_raw.push(r);
            }
        }
        hub.shutdown();
        let raw_reply = last_assistant_text(&client.messages(dir, &session).await.map_err(|e| e.to_string())?);
        if raw_reply != FIXED_REPLY {
            return Err(format!("the raw session answered {raw_reply:?}, expected {FIXED_REPLY:?}"));
        }

        // --- First prompt in new projects: cold vs pre-warmed on open, alternating.
        let (mut cold, mut warm, mut paused, mut warm_calls) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut opened = vec![home.clone()];
        for i in 0..FIRST_PROMPT_SAMPLES {
            let space = self.project(&format!("cold-{i}"))?;
            let facade = self.facade(&space).await?;
            cold.push(facade_turn(&facade, &format!("cold-{i}"), PROMPT, FIXED_REPLY).await?);
            opened.push(space);

            let space = self.project(&format!("warm-{i}"))?;
            let facade = self.facade(&space).await?;
            let t = Instant::now();
            self.runtime.warm(&space).await.map_err(|e| e.to_string())?;
            warm_calls.push(t.elapsed());
            warm.push(facade_turn(&facade, &format!("warm-{i}"), PROMPT, FIXED_REPLY).await?);
            opened.push(space);

            let space = self.project(&format!("paused-{i}"))?;
            let facade = self.facade(&space).await?;
            self.runtime.warm(&space).await.map_err(|e| e.to_string())?;
            tokio::time::sleep(USER_PAUSE).await;
            paused.push(facade_turn(&facade, &format!("paused-{i}"), PROMPT, FIXED_REPLY).await?);
            opened.push(space);
        }
        for i in 0..FILLER_PROJECTS {
            let space = self.project(&format!("filler-{i}"))?;
            facade_turn(&*self.facade(&space).await?, &format!("filler-{i}"), PROMPT, FIXED_REPLY).await?;
            opened.push(space);
        }
        memory.push(("10 projects open (one prompt each)", self.memory().await?, self.open_instances()));

        // --- Free every instance but project 0's, as the registry does for idle ones.
        for space in &opened[1..] {
            self.runtime.dispose_instance(space).await.map_err(|e| e.to_string())?;
        }
        memory.push(("after disposing 9 idle instances (+3 s)", self.memory().await?, self.open_instances()));
        // The runtime's garbage collector hands freed instances back to the OS only later
        // (observed: ~30 s after dispose), so also report the lowest figure within a window.
        let (mut lowest, mut lowest_at) = (memory[3].1, Duration::ZERO);
        let watch = Instant::now();
        while watch.elapsed() < RELEASE_WAIT {
            tokio::time::sleep(RELEASE_POLL).await;
            let now = procinfo::tree_rss(pid).map_err(|e| format!("cannot read the memory of runtime pid {pid}: {e}"))?;
            if now.bytes < lowest.bytes {
                (lowest, lowest_at) = (now, watch.elapsed() + SETTLE);
            }
        }
        let release_label = format!("  lowest within {} s (at +{} s)", (RELEASE_WAIT + SETTLE).as_secs(), lowest_at.as_secs());

        // --- The table.
        println!("\n1. Runtime memory (VmRSS of the runtime pid plus its descendants, from /proc)");
        print_memory_header();
        for (label, rss, open) in &memory {
            print_memory_row(label, rss, *open);
        }
        print_memory_row(&release_label, &lowest, memory[3].2);
        let (one, ten) = (mib(memory[1].1.bytes), mib(memory[2].1.bytes));
        println!("  per further project: {:.1} MiB; freed by disposing 9: {:.1} MiB at once, {:.1} MiB within the window", (ten - one) / (PROJECTS - 1) as f64, ten - mib(memory[3].1.bytes), ten - mib(lowest.bytes));

        let (f, r) = (Summary::of(&via_facade), Summary::of(&via_raw));
        println!("\n2. Warm turn, plain text reply (project 0, warm session, {LATENCY_ITERATIONS} each, interleaved, after {WARMUP_TURNS} warm-up turns)");
        print_timing_header();
        print_timing_row("facade run -> Done", &f);
        print_timing_row("raw prompt_async -> session.idle", &r);
        let ratio = f.median / r.median;
        let verdict = if ratio <= FACADE_OVERHEAD_GOAL { "met" } else { "NOT met" };
        print_timing_row("  of which facade run() -> Session event", &Summary::of(&before_prompt));
        println!("  ratio of medians facade/raw: {ratio:.3} (goal <= {FACADE_OVERHEAD_GOAL}: {verdict})");

        println!("\n3. First prompt in a new project ({FIRST_PROMPT_SAMPLES} projects each, alternating; run -> Done)");
        print_timing_header();
        print_timing_row("cold (no pre-warm)", &Summary::of(&cold));
        print_timing_row("pre-warmed on open, sent at once", &Summary::of(&warm));
        print_timing_row(&format!("pre-warmed on open, sent {} s later", USER_PAUSE.as_secs()), &Summary::of(&paused));
        print_timing_row("  warm() itself, paid at open", &Summary::of(&warm_calls));
        println!("  (the very first prompt of the runtime, project 0: {:.0} ms)", first.as_secs_f64() * 1000.0);
        let warm_turn = f.median;
        println!(
            "  pre-warmed first prompt / warm turn (medians): {:.1} sent at once, {:.1} after the pause (goal <= {FIRST_PROMPT_GOAL})",
            Summary::of(&warm).median / warm_turn,
            Summary::of(&paused).median / warm_turn
        );
        Ok(())
    }

    /// Dispose everything and prove no runtime process is left.
    async fn teardown(&self) -> Result<(), String> {
        if let Ok(pid) = self.pid() {
            let mut seen = self.seen_pids.lock().unwrap();
            for p in std::iter::once(pid).chain(procinfo::descendants(pid).unwrap_or_default()) {
                if !seen.contains(&p) {
                    seen.push(p);
                }
            }
        }
        self.manager.dispose().await;
        self.model.shutdown().await;
        let seen = self.seen_pids.lock().unwrap().clone();
        let mut left = Vec::new();
        for pid in &seen {
            if !kit::gone_within(*pid, Duration::from_secs(STOP_WAIT_SECS)).await {
                left.push(*pid);
            }
        }
        if left.is_empty() {
            println!("\nRuntime stopped: none of its {} processes ({seen:?}) is left.", seen.len());
            Ok(())
        } else {
            Err(format!("runtime processes left behind after dispose: {left:?}"))
        }
    }
}
