//! The runtime contract: one trait every agent runtime keeps, the requests it takes, the events it
//! streams and how a turn ends. The app reaches a runtime only through this file's types.

use std::error::Error as StdError;
use std::fmt;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use tokio_util::sync::CancellationToken;

use crate::space::ExecutionSpace;

/// What the agent may do in its project.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub enum WorkMode {
    /// Edit files and run commands inside the project.
    Execute,
    /// Read-only: edits and shell are refused by the runtime itself.
    Ask,
}

/// What happens when the agent reaches outside its project folder (a per-project setting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub enum OutsideProject {
    /// Refused by the runtime: the agent stays inside its project, nobody is asked.
    #[default]
    Deny,
    /// The runtime asks; the run streams `PermissionAsked` and waits for `reply_permission`.
    Ask,
}

/// An image attached to one request. Bytes are shared, not copied, between the request and events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInput {
    pub name: String,
    pub media_type: String,
    pub bytes: Arc<Vec<u8>>,
}

/// One prompt of one conversation.
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub request_id: String,
    pub conversation_id: String,
    pub prompt: String,
    pub work_mode: WorkMode,
    pub outside_project: OutsideProject,
    pub images: Vec<ImageInput>,
    /// Model profile to use; `None` = the runtime configuration's default.
    pub profile_id: Option<String>,
    pub space: ExecutionSpace,
    /// The native session this conversation already has (stored by the app), to continue it — after
    /// a restart of Hearth or of the runtime. `None` for a conversation's first turn.
    pub native_session: Option<String>,
}

#[derive(Debug, Clone)]
pub struct CompactRequest {
    pub request_id: String,
    pub conversation_id: String,
    pub profile_id: Option<String>,
    pub space: ExecutionSpace,
    /// The conversation's stored native session (compaction needs one).
    pub native_session: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct CompactOutcome {
    pub compacted: bool,
    pub native_session_id: String,
}

/// Token counts of one model step, as the runtime reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_tokens: u64,
    pub cache_read_tokens: u64,
}

/// What a run streams, in order. Exactly one `Ended` ends every run, and nothing follows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, specta::Type)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum RuntimeEvent {
    /// The native session serving this conversation (sent before the prompt goes out).
    /// `native_message_id` is the runtime's id of the turn's user message (where undo and fork cut).
    #[serde(rename_all = "camelCase")]
    Session { native_session_id: String, native_message_id: String },
    #[serde(rename_all = "camelCase")]
    TextDelta { text: String },
    #[serde(rename_all = "camelCase")]
    ToolStarted { call_id: String, tool: String, input: serde_json::Value },
    #[serde(rename_all = "camelCase")]
    ToolFinished { call_id: String, tool: String, input: serde_json::Value, output: String, error: Option<String> },
    Usage(Usage),
    #[serde(rename_all = "camelCase")]
    PermissionAsked { permission_id: String, permission: String, patterns: Vec<String> },
    /// The provider failed and the runtime will retry.
    #[serde(rename_all = "camelCase")]
    Retrying { attempt: u32, message: String },
    /// The run is over.
    Ended { end: TurnEnd },
}

impl RuntimeEvent {
    pub fn is_terminal(&self) -> bool {
        matches!(self, RuntimeEvent::Ended { .. })
    }

    pub fn ended(end: TurnEnd) -> Self {
        RuntimeEvent::Ended { end }
    }

    pub fn failed(kind: FailureKind, message: impl Into<String>) -> Self {
        RuntimeEvent::Ended { end: TurnEnd::Failed(TurnFailure { kind, message: message.into() }) }
    }
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize, specta::Type)]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub enum TurnEnd {
    /// The runtime finished the turn; `text` is the reply it stored for this turn.
    #[serde(rename_all = "camelCase")]
    Done { native_session_id: String, text: String },
    /// The user stopped it.
    Cancelled,
    Failed(TurnFailure),
}

/// A failed turn: what kind of failure, and the sentence for the user.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct TurnFailure {
    pub kind: FailureKind,
    pub message: String,
}

/// What went wrong, for code that decides what to offer next (retry, compact, fix a profile).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub enum FailureKind {
    /// The project folder is gone.
    ProjectMissing,
    /// The request itself cannot be sent (an image the model cannot take, an unknown profile).
    InvalidRequest,
    /// The runtime could not start.
    Start,
    /// The runtime process died while the turn ran.
    RuntimeDied,
    /// The runtime did not answer.
    Unreachable,
    /// The runtime refused a call.
    Refused,
    /// The run's tool grant could not be attached.
    Grant,
    /// The model provider failed (the runtime's error, or retries past Hearth's limit).
    Model,
    /// The model provider refused the credentials.
    ProviderAuth,
    /// The conversation no longer fits the model's context.
    ContextOverflow,
    /// The runtime lost the turn: no trace of it after the event stream came back.
    Lost,
    /// The runtime was stopped (Hearth is closing, or its configuration changed).
    Disposed,
}

/// Where one step of an agent's plan stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub enum PlanStatus {
    Pending,
    InProgress,
    Completed,
    Cancelled,
}

/// One step of the plan an agent keeps for its session (OpenCode's todo list).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct PlanStep {
    pub content: String,
    pub status: PlanStatus,
}

/// How the user answers a permission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub enum PermissionReply {
    Once,
    Always,
    Reject,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionInfo {
    pub version: String,
    pub healthy: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeStatus {
    pub running: bool,
    pub pid: Option<u32>,
    /// Base URL without credentials.
    pub url: Option<String>,
    pub version: Option<String>,
    /// Processes started so far; more than one means the runtime was restarted.
    pub launches: u32,
    /// Of those restarts, how many replaced a healthy idle process to give its memory back.
    pub recycles: u32,
    /// Why the last process ended, if one ended without being asked to.
    pub last_exit: Option<String>,
    pub active_runs: u32,
    pub open_instances: Vec<String>,
    /// Time since the running process printed its address.
    pub uptime_ms: Option<u64>,
    /// The host it runs on, when not this machine (its pid is the host's).
    pub host: Option<String>,
    /// On another host, the memory of the runtime's process group there, as its keeper last
    /// measured it (here, Diagnostics measures the process tree itself).
    pub host_memory: Option<HostMemory>,
}

/// A runtime's process group measured on its host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct HostMemory {
    pub rss_bytes: u64,
    pub processes: u32,
}

/// A family's own error, kept as the source of a [`RuntimeError`].
#[derive(Clone)]
pub struct Cause(Arc<dyn StdError + Send + Sync>);

impl Cause {
    pub fn new(e: impl StdError + Send + Sync + 'static) -> Self {
        Self(Arc::new(e))
    }
}

impl fmt::Debug for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl StdError for Cause {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.0)
    }
}

/// Why a runtime call failed: one variant per kind of failure, the family's error as the source.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RuntimeError {
    #[error("The runtime could not start: {0}")]
    Start(Cause),
    #[error("The runtime stopped unexpectedly ({0}).")]
    Died(String),
    #[error("The runtime did not answer: {0}")]
    Unreachable(Cause),
    #[error("The runtime refused the request: {0}")]
    Refused(Cause),
    #[error("This request cannot be sent: {0}")]
    InvalidRequest(Cause),
    #[error("This conversation has no runtime session yet; send a message first.")]
    NoSession,
    #[error("The runtime was stopped.")]
    Disposed,
    #[error("The request was cancelled.")]
    Cancelled,
    #[error("This request is for the project at {requested}, but this runtime was opened for {bound}; the request was not sent.")]
    WrongSpace { requested: PathBuf, bound: PathBuf },
    #[error("The runtime configuration changed and the new runtime is not running; open the project again to start it.")]
    Replaced,
    /// The family cannot do this at all (an ACP agent has no way to forget turns).
    #[error("{runtime} cannot {what}.")]
    Unsupported { runtime: String, what: &'static str },
}

impl RuntimeError {
    /// The failure kind a turn ending with this error reports.
    pub fn failure_kind(&self) -> FailureKind {
        match self {
            RuntimeError::Start(_) => FailureKind::Start,
            RuntimeError::Died(_) => FailureKind::RuntimeDied,
            RuntimeError::Unreachable(_) => FailureKind::Unreachable,
            RuntimeError::Refused(_) | RuntimeError::NoSession | RuntimeError::WrongSpace { .. } | RuntimeError::Unsupported { .. } => FailureKind::Refused,
            RuntimeError::InvalidRequest(_) => FailureKind::InvalidRequest,
            RuntimeError::Disposed | RuntimeError::Replaced | RuntimeError::Cancelled => FailureKind::Disposed,
        }
    }

    /// The turn end this error means (a cancellation is not a failure).
    pub fn turn_end(&self) -> TurnEnd {
        match self {
            RuntimeError::Cancelled => TurnEnd::Cancelled,
            other => TurnEnd::Failed(TurnFailure { kind: other.failure_kind(), message: other.to_string() }),
        }
    }
}

pub type EventStream = Pin<Box<dyn Stream<Item = RuntimeEvent> + Send>>;

/// A run's events as the contract hands them out: they end with its terminal event, and dropping
/// the stream drops `guard` (which cancels the run). Every family's `run` returns one of these.
pub fn event_stream(rx: tokio::sync::mpsc::UnboundedReceiver<RuntimeEvent>, guard: tokio_util::sync::DropGuard) -> EventStream {
    Box::pin(futures::stream::unfold((rx, guard, false), |(mut rx, guard, ended)| async move {
        if ended {
            return None;
        }
        let ev = rx.recv().await?;
        let end = ev.is_terminal();
        Some((ev, (rx, guard, end)))
    }))
}

/// The runtime contract. Implemented by each family's process-owning runtime and by the workspace
/// facades the registry hands out (which delegate to it).
#[async_trait::async_trait]
pub trait AgentRuntime: Send + Sync {
    /// Start a run; the stream ends after its `Ended` event. Cancelling the token aborts the run in
    /// the runtime and ends it as `Cancelled`.
    fn run(&self, request: RunRequest, cancel: CancellationToken) -> EventStream;
    async fn compact_conversation(&self, request: CompactRequest, cancel: CancellationToken) -> Result<CompactOutcome, RuntimeError>;
    async fn reply_permission(&self, space: &ExecutionSpace, permission_id: &str, reply: PermissionReply) -> Result<(), RuntimeError>;
    /// Prepare `space` now (start the runtime, make its per-project instance) so the first prompt
    /// there does not pay for it.
    async fn warm(&self, space: &ExecutionSpace) -> Result<(), RuntimeError>;
    async fn test_connection(&self) -> Result<ConnectionInfo, RuntimeError>;
    /// Forget the conversation's native session mapping (the conversation was deleted or reset).
    async fn release_conversation(&self, conversation_id: &str) -> Result<(), RuntimeError>;
    /// Make the session forget its turns from the user message `native_message_id` on, for the
    /// next prompt (undo). Until a prompt is sent, `restore_history` brings them back; the prompt
    /// drops them for good. Files are not the runtime's to touch: Hearth restores them (`changes/`).
    async fn rewind_history(&self, space: &ExecutionSpace, native_session: &str, native_message_id: &str) -> Result<(), RuntimeError>;
    /// Bring back what `rewind_history` made the session forget (redo).
    async fn restore_history(&self, space: &ExecutionSpace, native_session: &str) -> Result<(), RuntimeError>;
    /// A new native session holding this one's history before the user message `before` (all of
    /// it when `None`); the original is untouched. Returns the new session's id.
    async fn fork_session(&self, space: &ExecutionSpace, native_session: &str, before: Option<&str>) -> Result<String, RuntimeError>;
    /// The plan the agent keeps for the session; empty when it keeps none.
    async fn plan(&self, space: &ExecutionSpace, native_session: &str) -> Result<Vec<PlanStep>, RuntimeError>;
    fn status(&self) -> RuntimeStatus;
    async fn dispose(&self);
}

/// Why a run's tool grant could not follow it into the runtime.
#[derive(Debug, Clone, thiserror::Error)]
#[error("The run's tool grant could not be attached: {0}")]
pub struct GrantRefused(pub Cause);

/// What one native session of an agent that connects to MCP servers itself (ACP) sends to Hearth's
/// gateway: a random secret, valid only for calls made while a request runs on that session, and
/// only under that request's grant.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionCredential {
    /// Names the credential to Hearth (a short hash of the secret, safe for logs).
    pub id: String,
    /// The bearer value the agent sends.
    pub secret: String,
}

impl fmt::Debug for SessionCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionCredential").field("id", &self.id).finish_non_exhaustive()
    }
}

/// Told when a run's native session is known — before its prompt is sent —, when the runtime
/// starts a subagent session for it, and when the run ends. This is how a per-request grant
/// follows a run into the tool calls the runtime makes for it.
pub trait RunHooks: Send + Sync {
    /// Refusing fails the run before anything reaches the model.
    fn session_ready(&self, request_id: &str, session_id: &str) -> Result<(), GrantRefused>;
    /// The runtime created `child_session_id` under the run's own session (a `task` subagent):
    /// the child acts for the same request.
    fn child_session(&self, request_id: &str, parent_session_id: &str, child_session_id: &str);
    fn run_ended(&self, request_id: &str);
    /// A fresh credential for a session about to be opened by an agent that reaches the gateway
    /// itself; `None` when there is no gateway (the session then gets no Hearth tools).
    fn issue_credential(&self) -> Option<SessionCredential> {
        None
    }
    /// The session the credential was given to is `session_id`: calls carrying it act for the
    /// request running on that session, if any.
    fn bind_credential(&self, _credential_id: &str, _session_id: &str) {}
    /// The session is gone (closed, or its agent stopped): the credential opens nothing any more.
    fn revoke_credential(&self, _credential_id: &str) {}
}
