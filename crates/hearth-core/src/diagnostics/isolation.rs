//! The isolation check: one conversation's compaction is held at the scripted model server while
//! the runtime, a second conversation of the same project and an outline keep answering; then the
//! compaction completes, and the recorded request proves the whole context corpus reached the
//! model. It proves a long compaction in one conversation never starves another.
//!
//! This file: options, the sandboxed setup and the cleanup that always runs. The phases are in
//! `isolation_steps.rs`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::opencode::HeldClient;
use crate::opencode::OpenCodeRuntime;
use crate::acp::agents::AgentSearch;
use crate::runtime::{AgentRuntime, RegistryConfig, RuntimeChoice, RuntimeSelection, TurnEnd, WorkspaceRuntime, DEFAULT_FACADE_CAPACITY};
use crate::scripted_model::{default_reply, Reply, RequestKind, Script, ScriptedModelServer};
use crate::space::{resolve_local, ExecutionSpace};

use super::corpus::CorpusPlan;
use super::kit::{self, FoundRuntime};
use super::measure::Latencies;
use super::remote_sandbox::{RemoteSandbox, RemoteTarget};
use super::sandbox::Sandbox;
use super::{isolation_steps, CheckError, PromptError, CheckReport, ProgressSink, ReportBuilder};

/// How many samples each phase takes: what a caller of the check may rely on.
pub use super::isolation_steps::{B_PROMPT_SAMPLES, PROBE_ROUNDS};

pub const CHECK_NAME: &str = "isolation";
/// The step ids progress is reported under, in order.
pub const STEPS: &[&str] = &[
    "sandbox",
    "launch",
    "seed",
    "idle",
    "corpus",
    "outline-seed",
    "assembly",
    "held",
    "both-held",
    "outline",
    "release",
    "verify",
    "cleanup",
];
/// The marker file of the sandbox project; B's prompts read it and must answer with it.
pub const MARKER: &str = "PROJECT_4242";
/// Conversation ids inside the sandbox runtime.
pub const CONVERSATION_A: &str = "selftest-isolation-a";
pub const CONVERSATION_B: &str = "selftest-isolation-b";
/// What the sabotaged model answers B (a status the runtime does not retry).
pub const SABOTAGE_STATUS: u16 = 400;
pub const SABOTAGE_MESSAGE: &str = "Sabotaged self-test: the scripted model refuses conversation B.";

/// A deliberately broken sandbox, to prove the check can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub enum Sabotage {
    /// From A's compaction on, the scripted model refuses every agent request of B.
    RefuseB,
}

#[derive(Debug, Clone)]
pub struct IsolationOptions {
    pub runtime_binary: PathBuf,
    /// Folder holding `rg` (the runtime's search tools need it).
    pub rg_dir: Option<PathBuf>,
    /// Context corpus in A: 0, 2, 8 or 32 MiB.
    pub corpus_mib: u32,
    pub sabotage: Option<Sabotage>,
    /// Where the sandbox is created (the system temporary folder when `None`).
    pub sandbox_parent: Option<PathBuf>,
    /// The runtime checked: OpenCode's server (this file's check), or an ACP agent
    /// (`isolation_acp.rs`).
    pub runtime: RuntimeChoice,
    /// Where agents other than OpenCode are found.
    pub agents: AgentSearch,
    /// Run the project on this host instead of here (OpenCode's server only).
    pub remote: Option<RemoteTarget>,
}

impl IsolationOptions {
    /// The check on OpenCode's server.
    pub fn new(runtime_binary: PathBuf, rg_dir: Option<PathBuf>, corpus_mib: u32) -> Self {
        Self { runtime_binary, rg_dir, corpus_mib, sabotage: None, sandbox_parent: None, runtime: RuntimeChoice::OpenCode, agents: AgentSearch::default(), remote: None }
    }
}

/// Run the isolation check. Never panics on runtime trouble and always cleans up: the report says
/// what passed, what failed and why, and what was measured.
pub async fn run_isolation_check(
    opts: IsolationOptions,
    progress: ProgressSink,
    cancel: CancellationToken,
) -> CheckReport {
    let mut report = ReportBuilder::new(CHECK_NAME, &opts.runtime).on_host(opts.remote.as_ref().map(|r| r.host.as_str()));
    let on_host = opts.remote.as_ref().and_then(|r| super::choice::unavailable_on(&opts.runtime, &r.host));
    let outcome = match &opts.runtime {
        _ if on_host.is_some() => Err(CheckError::Options(on_host.unwrap_or_default())),
        RuntimeChoice::OpenCode => run(&opts, &progress, &cancel, &mut report).await,
        RuntimeChoice::Acp { .. } if opts.sabotage.is_some() => Err(CheckError::Options("sabotage is only built for OpenCode's server".into())),
        RuntimeChoice::Acp { .. } => super::isolation_acp::run(&opts, &progress, &cancel, &mut report).await,
    };
    if let Err(e) = &outcome {
        progress.report("cleanup", format!("Stopped: {e}"));
    }
    report.finish(outcome)
}

/// Everything the phases share.
pub(crate) struct Ctx {
    /// The project's facade, from the app's own wiring: what runs A's and B's turns.
    pub rt: Arc<WorkspaceRuntime>,
    /// The runtime behind it, whose HTTP API the probes measure directly.
    pub runtime: OpenCodeRuntime,
    /// Holds the process: the shared runtime is not recycled under the check's own reads.
    pub client: HeldClient,
    pub model: ScriptedModelServer,
    pub space: ExecutionSpace,
    pub plan: CorpusPlan,
    pub progress: ProgressSink,
    pub lat: Latencies,
    /// B's native session once sabotage is armed: the model refuses it.
    pub refuse: Arc<Mutex<Option<String>>>,
    pub sabotage: Option<Sabotage>,
}

impl Ctx {
    pub fn dir(&self) -> &str {
        self.space.root_str()
    }
}

async fn run(
    opts: &IsolationOptions,
    progress: &ProgressSink,
    cancel: &CancellationToken,
    report: &mut ReportBuilder,
) -> Result<(), CheckError> {
    let plan = CorpusPlan::new(opts.corpus_mib).map_err(|e| CheckError::Options(e.to_string()))?;
    if !opts.runtime_binary.is_file() {
        return Err(CheckError::Options(format!(
            "the runtime binary {} does not exist",
            opts.runtime_binary.display()
        )));
    }
    progress.report("sandbox", "Creating a throw-away sandbox and starting the scripted model server.");
    let sandbox = Sandbox::create(opts.sandbox_parent.as_deref()).map_err(|e| CheckError::Sandbox(e.to_string()))?;
    let refuse: Arc<Mutex<Option<String>>> = Arc::default();
    let model =
        ScriptedModelServer::start(script(refuse.clone())).map_err(|e| CheckError::ModelServer(e.to_string()))?;
    let remote = match &opts.remote {
        Some(target) => {
            progress.report("sandbox", format!("Connecting to {} and creating the project there.", target.host));
            match RemoteSandbox::create(target, None).await {
                Ok(remote) => Some(remote),
                Err(e) => {
                    model.shutdown().await;
                    return Err(e);
                }
            }
        }
        None => None,
    };
    let space = match &remote {
        Some(remote) => match remote.project("project", &[("marker.txt", MARKER)]).await {
            Ok(space) => space,
            Err(e) => {
                model.shutdown().await;
                let _ = remote.remove(&sandbox.runtime_root()).await;
                return Err(e);
            }
        },
        None => {
            let project = sandbox.project("project", &[("marker.txt", MARKER)]).map_err(|e| CheckError::Sandbox(e.to_string()))?;
            resolve_local(&project).map_err(|e| CheckError::Sandbox(e.to_string()))?
        }
    };
    let found = FoundRuntime { binary: opts.runtime_binary.clone(), rg_dir: opts.rg_dir.clone().unwrap_or_default() };
    let mut config = kit::scripted_config(&found, &model, false);
    config.rg_dir = opts.rg_dir.clone();
    let runtimes = kit::runtimes(&sandbox.runtime_root(), None, RegistryConfig::default(), DEFAULT_FACADE_CAPACITY);
    let selection: RuntimeSelection = match &remote {
        Some(remote) => remote.selection(config),
        None => Arc::new(config),
    };
    let rt = match runtimes.get_runtime(&selection, &space).await {
        Ok(rt) => rt,
        Err(e) => {
            model.shutdown().await;
            if let Some(remote) = &remote {
                let _ = remote.remove(&sandbox.runtime_root()).await;
            }
            return Err(CheckError::Runtime(e.to_string()));
        }
    };
    let runtime = kit::opencode_of(&rt).ok_or_else(|| CheckError::Runtime("the manager made no OpenCode runtime".into()))?;

    progress.report("launch", "Starting the runtime inside the sandbox.");
    // A launch is never dropped half-way (its child would be lost): on cancel, let it finish, then
    // stop it with everything else.
    let launched = {
        let launch = runtime.client();
        tokio::pin!(launch);
        tokio::select! {
            r = &mut launch => r.map_err(|e| CheckError::Runtime(e.to_string())),
            _ = cancel.cancelled() => {
                let _ = launch.await;
                Err(CheckError::Cancelled)
            }
        }
    };
    let pid = rt.status().pid;
    report.runtime_version = rt.status().version;
    let outcome = match launched {
        Ok(client) => {
            let ctx = Ctx {
                rt: rt.clone(),
                runtime,
                client,
                model,
                space,
                plan,
                progress: progress.clone(),
                lat: Latencies::default(),
                refuse,
                sabotage: opts.sabotage,
            };
            let outcome = tokio::select! {
                r = isolation_steps::steps(&ctx, report) => r,
                _ = cancel.cancelled() => Err(CheckError::Cancelled),
                free = sandbox.until_full_for_grace() => Err(CheckError::DiskFull {
                    step: "The check stopped: the runtime cannot write.".into(),
                    free_kib: free / 1024,
                    path: sandbox.path().display().to_string(),
                }),
            };
            ctx.model.shutdown().await;
            outcome
        }
        Err(e) => {
            model.shutdown().await;
            Err(e)
        }
    };

    let outcome = match outcome {
        Err(e) if !matches!(e, CheckError::Cancelled | CheckError::DiskFull { .. }) => match sandbox.disk_full() {
            Some(free) => Err(CheckError::DiskFull { step: e.to_string(), free_kib: free / 1024, path: sandbox.path().display().to_string() }),
            None => Err(e),
        },
        other => other,
    };
    progress.report("cleanup", "Stopping the runtime and removing the sandbox.");
    drop(rt);
    runtimes.dispose().await;
    let (stopped, removed_remote, sandbox_path) = match &remote {
        // The runtime's pid is the host's: look for it there.
        Some(remote) => {
            let left = match pid {
                Some(pid) => remote.running(&[pid]).await.map(|running| running.is_empty()),
                None => Ok(true),
            };
            let removed = remote.remove(&sandbox.runtime_root()).await;
            let path = format!("{} on {} and {}", remote.path(), remote.host(), sandbox.path().display());
            (*left.as_ref().unwrap_or(&false), left.and(removed).map(|_| ()), path)
        }
        None => (pid.is_none_or(|pid| !crate::host::procinfo::is_running(pid)), Ok(()), sandbox.path().display().to_string()),
    };
    let removed = sandbox.remove().map_err(|e| e.to_string()).and(removed_remote.map_err(|e| e.to_string()));
    let detail = match (&removed, stopped) {
        (Ok(()), true) => format!("runtime stopped; {sandbox_path} removed"),
        (Err(e), _) => e.clone(),
        (Ok(()), false) => {
            format!("the runtime process {} is still running after it was stopped", pid.unwrap_or_default())
        }
    };
    report.check("Sandbox removed and runtime stopped", removed.is_ok() && stopped, detail);
    outcome
}

/// The default script, except that once sabotage is armed B's agent requests are refused.
fn script(refuse: Arc<Mutex<Option<String>>>) -> Script {
    Script::custom(move |request| {
        let refused = refuse.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if request.kind == RequestKind::Agent && refused.is_some() && request.session_id == refused {
            let body = json!({ "error": { "message": SABOTAGE_MESSAGE, "type": "invalid_request_error" } }).to_string();
            return Reply::Status { code: SABOTAGE_STATUS, body };
        }
        default_reply(request)
    })
}

/// A finished run: its answer and how long it took.
#[derive(Debug, Clone)]
pub(crate) struct RunOk {
    pub text: String,
    pub took: Duration,
}

/// One whole prompt through the runtime contract (`run` → `Ended`), bounded by `timeout`.
pub(crate) async fn run_prompt(
    rt: Arc<WorkspaceRuntime>,
    space: ExecutionSpace,
    conversation: &str,
    prompt: String,
    timeout: Duration,
) -> Result<RunOk, PromptError> {
    let request = kit::run_request(conversation, &prompt, &space);
    let finished = kit::run_to_end(&*rt, request, CancellationToken::new(), timeout).await?;
    match finished.end {
        TurnEnd::Done { text, .. } => Ok(RunOk { text, took: finished.took }),
        TurnEnd::Cancelled => Err(PromptError::Cancelled),
        TurnEnd::Failed(f) => Err(PromptError::Failed(f.message)),
    }
}

/// A spawned task that is aborted when dropped (cancellation drops the whole check).
pub(crate) struct Task<T>(tokio::task::JoinHandle<T>);

impl<T: Send + 'static> Task<T> {
    pub fn spawn(f: impl std::future::Future<Output = T> + Send + 'static) -> Self {
        Self(tokio::spawn(f))
    }

    pub fn is_finished(&self) -> bool {
        self.0.is_finished()
    }

    pub async fn join(&mut self) -> Result<T, tokio::task::JoinError> {
        (&mut self.0).await
    }
}

impl<T> Drop for Task<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripted_model::ObservedRequest;

    fn request(session: &str, kind_tools: bool) -> ObservedRequest {
        let tools = if kind_tools { json!([{"type": "function", "function": {"name": "read"}}]) } else { json!([]) };
        let body = json!({"messages": [{"role": "user", "content": "Read marker.txt"}], "tools": tools});
        let bytes = serde_json::to_vec(&body).unwrap().into();
        ObservedRequest::new(1, Some(session.into()), body, bytes)
    }

    #[test]
    fn sabotage_refuses_only_b_and_only_once_armed() {
        let refuse: Arc<Mutex<Option<String>>> = Arc::default();
        let s = script(refuse.clone());
        assert!(matches!(s.reply(&request("ses_b", true)), Reply::ToolCall { .. }));
        *refuse.lock().unwrap() = Some("ses_b".into());
        assert!(matches!(s.reply(&request("ses_b", true)), Reply::Status { code: SABOTAGE_STATUS, .. }));
        assert!(matches!(s.reply(&request("ses_a", true)), Reply::ToolCall { .. }));
    }

    #[tokio::test]
    async fn bad_options_are_a_clear_failed_report() {
        let mut opts = IsolationOptions::new("/nonexistent/opencode".into(), None, 3);
        let report = run_isolation_check(opts.clone(), ProgressSink::silent(), CancellationToken::new()).await;
        assert!(!report.passed);
        assert_eq!(
            report.error.as_deref(),
            Some("The options are invalid: the corpus size must be 0, 2, 8 or 32 MiB, not 3 MiB")
        );
        opts.corpus_mib = 0;
        let report = run_isolation_check(opts, ProgressSink::silent(), CancellationToken::new()).await;
        assert!(report.error.unwrap().contains("the runtime binary /nonexistent/opencode does not exist"));
    }
}
