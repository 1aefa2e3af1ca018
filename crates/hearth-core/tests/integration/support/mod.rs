//! Shared by the integration tests: the test side of `hearth_core::diagnostics::kit` (which the
//! self-test, the benches and these tests all use), and the rule for a missing runtime.
#![allow(dead_code, unused_imports)]

pub mod proxy;

pub mod sshd;

use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use hearth_core::app::runtime_config::BinaryInputs;
use hearth_core::app::{ConversationUpdate, ConversationUpdateKind, HearthOptions, UpdateSink};
use hearth_core::binaries::opencode::LocateInputs;
use hearth_core::binaries::ripgrep::RgInputs;
use hearth_core::host::paths::AppPaths;
use hearth_core::opencode::OpenCodeRuntime;
use hearth_core::runtime::AgentRuntime as _;
use hearth_core::store::Message;
use hearth_core::toolbox::gateway::AllowedCallers;

pub use hearth_core::diagnostics::kit::{self, gone_within, run_request, run_to_end, scripted_config, wait_until, workspace_root, FoundRuntime};
pub use hearth_core::host::procinfo::is_running as alive;

/// Set to `1` to skip the tests that need the real runtime on a machine without it. Without it, a
/// missing runtime FAILS those tests, wherever they run (README: "Tests").
pub const SKIP_RUNTIME_TESTS_ENV: &str = "HEARTH_SKIP_RUNTIME_TESTS";

/// Set to `1` to skip the tests that run an agent other than OpenCode (Claude Code through its ACP
/// adapter, installed by `scripts/setup.sh`). Without it, a missing agent FAILS those tests.
pub const SKIP_AGENT_TESTS_ENV: &str = "HEARTH_SKIP_AGENT_TESTS";

/// Set to `1` to skip the tests that need root (mounting a small tmpfs); without it they fail when
/// not run as root.
pub const SKIP_ROOT_TESTS_ENV: &str = "HEARTH_SKIP_ROOT_TESTS";

/// Bound on one turn in the tests (a first prompt in a new project takes 3–10 s; more on a loaded
/// 2-core machine).
pub const TURN_TIMEOUT: Duration = Duration::from_secs(120);

/// Log to the test's output when `RUST_LOG` asks for it (`RUST_LOG=hearth_core=debug`).
pub fn init_logging() {
    let _ = tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).with_test_writer().try_init();
}

/// The pinned runtime binary and `rg`. Missing, the test fails — unless the person running it
/// opted out with [`SKIP_RUNTIME_TESTS_ENV`]`=1`, and then it says so and is not run.
pub async fn require_runtime() -> Option<FoundRuntime> {
    init_logging();
    match kit::locate_runtime().await {
        Ok(found) => Some(found),
        Err(why) if std::env::var(SKIP_RUNTIME_TESTS_ENV).as_deref() == Ok("1") => {
            eprintln!("NOT RUN ({SKIP_RUNTIME_TESTS_ENV}=1): {why}");
            None
        }
        Err(why) => panic!("this test needs the real runtime and rg: {why}. Run scripts/setup.sh, or set {SKIP_RUNTIME_TESTS_ENV}=1 to skip it."),
    }
}

/// Claude Code's ACP adapter as the checkout has it: `node` and the adapter's entry script.
/// Claude Code's ACP adapter as `scripts/setup.sh` installs it, with its native `claude`, and
/// `node` to run it. Missing, the test fails — unless the person running it opted out with
/// [`SKIP_AGENT_TESTS_ENV`]`=1`, and then it says so and is not run.
pub fn require_claude_agent() -> Option<()> {
    init_logging();
    match locate_claude_agent() {
        Ok(()) => Some(()),
        Err(why) if std::env::var(SKIP_AGENT_TESTS_ENV).as_deref() == Ok("1") => {
            eprintln!("NOT RUN ({SKIP_AGENT_TESTS_ENV}=1): {why}");
            None
        }
        Err(why) => panic!("this test needs Claude Code's ACP adapter: {why}. Run scripts/setup.sh, or set {SKIP_AGENT_TESTS_ENV}=1 to skip it."),
    }
}

fn locate_claude_agent() -> Result<(), String> {
    let root = workspace_root();
    let search = hearth_core::acp::AgentSearch { anchors: vec![root.clone()], ..Default::default() };
    search.locate(&hearth_core::acp::agents::CLAUDE_CODE).map_err(|e| e.to_string())?;
    // The SDK takes its native `claude` from the optional dependency for this platform.
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => other,
    };
    let native = root.join(format!("node_modules/@anthropic-ai/claude-agent-sdk-linux-{arch}/claude"));
    if !native.is_file() {
        return Err(format!("Claude Code's native binary {} is missing", native.display()));
    }
    hearth_core::acp::agents::find_program("node", std::env::var_os("PATH").as_deref()).ok_or("node is not on PATH")?;
    Ok(())
}

/// A small PNG, distinct per `width`.
pub fn png(width: u32) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    image::RgbaImage::from_pixel(width, 1, image::Rgba([200, 80, 20, 255])).write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

/// Gateway callers: the process of the runtime put in the returned slot (once it is created), and
/// nothing else — not the test process, not the agent's tools.
pub fn runtime_callers() -> (AllowedCallers, Arc<OnceLock<OpenCodeRuntime>>) {
    let slot: Arc<OnceLock<OpenCodeRuntime>> = Arc::default();
    let runtime = slot.clone();
    let callers = AllowedCallers::pids(move || runtime.get().and_then(|rt| rt.status().pid).into_iter().collect());
    (callers, slot)
}

/// The app's updates, as the window would receive them (the `Notify` wakes whoever waits on the
/// next one).
#[derive(Default)]
pub struct Recorder(pub Mutex<Vec<ConversationUpdate>>, tokio::sync::Notify);

impl UpdateSink for Recorder {
    fn conversation(&self, event: ConversationUpdate) {
        self.0.lock().unwrap().push(event);
        self.1.notify_waiters();
    }
}

impl Recorder {
    /// The moment the window is told that the `n`th reply of `conversation` (1-based) ended: its
    /// message id, as soon as the update is sent (woken by it, not polled).
    pub async fn reply_ended_shown(&self, conversation: &str, n: usize) -> String {
        let wait = async {
            loop {
                let next = self.1.notified();
                let ended: Vec<String> = self
                    .0
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|e| e.conversation_id == conversation)
                    .filter_map(|e| match &e.kind {
                        ConversationUpdateKind::Runtime { message_id, event } if event.is_terminal() => Some(message_id.clone()),
                        _ => None,
                    })
                    .collect();
                if ended.len() >= n {
                    return ended[n - 1].clone();
                }
                next.await;
            }
        };
        tokio::time::timeout(TURN_TIMEOUT, wait).await.unwrap_or_else(|_| panic!("reply {n} of {conversation} did not end"))
    }

    /// The `n`th finished reply of `conversation` (1-based), waiting up to [`TURN_TIMEOUT`].
    pub async fn finished(&self, conversation: &str, n: usize) -> Message {
        let deadline = tokio::time::Instant::now() + TURN_TIMEOUT;
        loop {
            let done: Vec<Message> = self
                .0
                .lock()
                .unwrap()
                .iter()
                .filter(|e| e.conversation_id == conversation)
                .filter_map(|e| match &e.kind {
                    ConversationUpdateKind::TurnFinished { message } => Some(message.clone()),
                    _ => None,
                })
                .collect();
            if done.len() >= n {
                return done[n - 1].clone();
            }
            assert!(tokio::time::Instant::now() < deadline, "turn {n} of {conversation} did not finish");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Where the app finds the runtime in the tests: the checkout's `node_modules`.
pub fn app_locate_inputs() -> LocateInputs {
    kit::checkout_locate_inputs()
}

/// The app's options for a data folder, finding the runtime as `opencode` says.
pub fn app_options(data: &Path, opencode: LocateInputs) -> HearthOptions {
    HearthOptions { bridge_command: Some(bridge_command()), ..kit::app_options(data, opencode).unwrap() }
}

/// Hearth's stdio bridge to the gateway as the tests run it (the app: `hearth mcp-bridge`).
pub fn bridge_command() -> Vec<String> {
    vec![env!("CARGO_BIN_EXE_hearth-mcp-bridge").into()]
}

/// Live processes whose environment points into `dir` (a test's own sandbox, not other tests').
pub fn processes_under(dir: &Path) -> Vec<u32> {
    processes_naming(dir, "environ")
}

/// Live processes whose `/proc/<pid>/<file>` (`environ`, `cmdline`) names `dir`.
pub fn processes_naming(dir: &Path, file: &str) -> Vec<u32> {
    let needle = dir.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| alive(*pid))
        .filter(|pid| std::fs::read(format!("/proc/{pid}/{file}")).is_ok_and(|text| String::from_utf8_lossy(&text).contains(&needle)))
        .collect()
}

/// The sandbox under `parent` was removed and no process it started is left.
pub fn assert_sandbox_gone(parent: &Path) {
    assert_eq!(std::fs::read_dir(parent).unwrap().count(), 0, "the sandbox was not removed");
    assert!(processes_under(parent).is_empty(), "a runtime process was left behind");
}

/// Every tool call of a reply as one line each (tool: output, error), for assertions on what the
/// agent's tools returned.
pub fn tool_outputs(m: &hearth_core::store::Message) -> String {
    m.tool_calls.iter().map(|t| format!("{}: {:?} {:?}", t.tool, t.output, t.error)).collect::<Vec<_>>().join("; ")
}

/// A Hearth on a fresh data folder under `tmp` with the knowledge library "Ember" (the fixture
/// `ember-protocol.md`) and one project per name, each with `marker.txt` holding `markers[i]` and
/// running on `runtime`.
pub async fn hearth_with_projects(
    tmp: &Path,
    events: Arc<Recorder>,
    runtime: &hearth_core::runtime::RuntimeChoice,
    projects: &[(&str, &str)],
) -> (Arc<hearth_core::app::Hearth>, hearth_core::knowledge::Library, Vec<hearth_core::store::Project>) {
    let hearth = hearth_core::app::Hearth::open(app_options(&tmp.join("data"), app_locate_inputs()), events).await.unwrap();
    let ember = hearth.create_library("Ember".into()).await.unwrap();
    let fixture = workspace_root().join("fixtures/knowledge/ember-protocol.md");
    hearth.import_into_library(ember.id.0, fixture.display().to_string(), |_| {}).await.unwrap();
    let mut made = Vec::new();
    for (name, marker) in projects {
        let dir = tmp.join(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("marker.txt"), marker).unwrap();
        let project = hearth.store().add_project(&dir).unwrap();
        hearth.set_project_runtime(project.id.clone(), runtime.clone()).await.unwrap();
        made.push(project);
    }
    (hearth, ember, made)
}
