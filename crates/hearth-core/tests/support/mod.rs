//! Shared by the integration tests that drive the real runtime binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use hearth_core::app::runtime_config::BinaryInputs;
use hearth_core::app::{ConversationUpdate, ConversationUpdateKind, HearthOptions, UpdateSink};
use hearth_core::host::paths::AppPaths;
use hearth_core::runtime::RegistryConfig;
use hearth_core::store::Message;

use hearth_core::binaries::executable::ProbeEnv;
use hearth_core::opencode::config::{Authentication, ModelProfile, Protocol, RuntimeConfig};
use hearth_core::binaries::opencode::{self as locate, LocateInputs};
use hearth_core::binaries::ripgrep::{self, RgInputs};
use hearth_core::opencode::runtime::{OpenCodeRuntime, SharedOpenCode};
use hearth_core::runtime::AgentRuntime as _;
use hearth_core::scripted_model::ScriptedModelServer;
use hearth_core::toolbox::gateway::AllowedCallers;

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// The pinned runtime binary and the folder holding `rg`. In CI a missing one FAILS the test;
/// elsewhere the test says so and is not run.
pub async fn require_runtime() -> Option<(PathBuf, PathBuf)> {
    let scratch = tempfile::tempdir().unwrap();
    let env = ProbeEnv { scratch_home: scratch.path().into() };
    let oc = locate::locate(&LocateInputs { anchors: vec![workspace_root()], ..Default::default() }, &env).await;
    let rg = ripgrep::locate(&RgInputs::from_process(None, None), &env).await;
    match (oc, rg) {
        (Ok(oc), Ok(rg)) => Some((oc.path, rg.path.parent().unwrap().to_path_buf())),
        (oc, rg) => {
            let why = format!("runtime: {:?}; rg: {:?}", oc.err().map(|e| e.to_string()), rg.err().map(|e| e.to_string()));
            if std::env::var_os("CI").is_some() {
                panic!("the real runtime is required in CI: {why}");
            }
            eprintln!("NOT RUN (no CI): {why}. Run scripts/setup.sh.");
            None
        }
    }
}

pub const PROFILE_ID: &str = "scripted";

/// A runtime configuration whose one profile is the scripted model server.
pub fn config_for(binary: PathBuf, rg_dir: PathBuf, model: &ScriptedModelServer, image_input: bool) -> RuntimeConfig {
    RuntimeConfig {
        binary,
        rg_dir: Some(rg_dir),
        profiles: vec![ModelProfile {
            id: PROFILE_ID.into(),
            name: "Built-in scripted model".into(),
            protocol: Protocol::OpenAiChatCompletions,
            base_url: model.base_url(),
            model: model.model_id().into(),
            authentication: Authentication::ApiKey(model.api_key().into()),
            image_input,
        }],
        default_profile: PROFILE_ID.into(),
        plugins: vec![],
        mcp: Default::default(),
        skills_paths: vec![],
    }
}

pub use hearth_core::host::procinfo::is_running as alive;

/// Wait up to `secs` for `pid` to be gone.
pub async fn gone_within(pid: u32, secs: u64) -> bool {
    for _ in 0..secs * 10 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    !alive(pid)
}

/// A small PNG, distinct per `width`.
pub fn png(width: u32) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    image::RgbaImage::from_pixel(width, 1, image::Rgba([200, 80, 20, 255]))
        .write_to(&mut out, image::ImageFormat::Png)
        .unwrap();
    out.into_inner()
}

/// Gateway callers: the process of the runtime put in the returned slot (once it is created), and
/// nothing else — not the test process, not the agent's tools.
pub fn runtime_callers() -> (AllowedCallers, Arc<OnceLock<Arc<OpenCodeRuntime>>>) {
    let slot: Arc<OnceLock<Arc<OpenCodeRuntime>>> = Arc::default();
    let runtime = slot.clone();
    let callers = AllowedCallers::pids(move || runtime.get().and_then(|rt| SharedOpenCode(rt.clone()).status().pid).into_iter().collect());
    (callers, slot)
}

/// Bound on one turn of the app against the real runtime.
pub const TURN_TIMEOUT: Duration = Duration::from_secs(120);

/// Everything the app tells the window, kept for the test.
#[derive(Default)]
pub struct Recorder(pub Mutex<Vec<ConversationUpdate>>);

impl UpdateSink for Recorder {
    fn conversation(&self, event: ConversationUpdate) {
        self.0.lock().unwrap().push(event);
    }
}

impl Recorder {
    /// The reply of the `n`th finished turn of `conversation` (1-based), waiting for it.
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

/// The app's options over a data folder, finding the runtime with `opencode`.
pub fn app_options(data: &Path, opencode: LocateInputs) -> HearthOptions {
    let paths = AppPaths::under(data);
    paths.ensure().unwrap();
    HearthOptions {
        binaries: BinaryInputs { opencode, ripgrep: RgInputs::from_process(None, None), probe_home: paths.probe_dir.clone() },
        paths,
        registry: RegistryConfig::default(),
        runtime: Default::default(),
    }
}
