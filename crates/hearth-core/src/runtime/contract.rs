//! The runtime contract: one trait, the requests it takes and the events it streams.

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
    pub images: Vec<ImageInput>,
    /// Model profile to use; `None` = the runtime configuration's default.
    pub profile_id: Option<String>,
    pub space: ExecutionSpace,
}

#[derive(Debug, Clone)]
pub struct CompactRequest {
    pub request_id: String,
    pub conversation_id: String,
    pub profile_id: Option<String>,
    pub space: ExecutionSpace,
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

/// What a run streams, in order. Exactly one of `Done` or `Error` ends every run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, specta::Type)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum RuntimeEvent {
    /// The native session serving this conversation (first event of a run).
    #[serde(rename_all = "camelCase")]
    Session { native_session_id: String },
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
    /// The run failed; `message` is a sentence for the user.
    #[serde(rename_all = "camelCase")]
    Error { message: String },
    /// The run finished; `text` is the final answer's text.
    #[serde(rename_all = "camelCase")]
    Done { native_session_id: String, text: String },
}

impl RuntimeEvent {
    pub fn is_terminal(&self) -> bool {
        matches!(self, RuntimeEvent::Done { .. } | RuntimeEvent::Error { .. })
    }
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

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeStatus {
    pub running: bool,
    pub pid: Option<u32>,
    /// Base URL without credentials.
    pub url: Option<String>,
    pub version: Option<String>,
    pub launches: u32,
    pub active_runs: u32,
    pub open_instances: Vec<String>,
    /// Time since the running process printed its address.
    pub uptime_ms: Option<u64>,
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum RuntimeError {
    #[error("{0}")]
    Launch(String),
    #[error("The runtime did not answer: {0}")]
    Unreachable(String),
    #[error("The runtime refused the request: {0}")]
    Api(String),
    #[error("This conversation has no runtime session yet; send a message first.")]
    NoSession,
    #[error("The runtime was stopped.")]
    Disposed,
    #[error("Cancelled.")]
    Cancelled,
    #[error("{0}")]
    Space(String),
}

pub type EventStream = Pin<Box<dyn Stream<Item = RuntimeEvent> + Send>>;

/// The runtime contract. Implemented by the process-owning OpenCode runtime and by the workspace
/// facades the registry hands out (which delegate to it).
#[async_trait::async_trait]
pub trait AgentRuntime: Send + Sync {
    /// Start a run; the stream ends after its `Done` or `Error` event. Cancelling the token aborts
    /// the run in the runtime and ends the stream with an `Error`.
    fn run(&self, request: RunRequest, cancel: CancellationToken) -> EventStream;
    async fn compact_conversation(&self, request: CompactRequest, cancel: CancellationToken) -> Result<CompactOutcome, RuntimeError>;
    async fn reply_permission(&self, space: &ExecutionSpace, permission_id: &str, reply: PermissionReply) -> Result<(), RuntimeError>;
    async fn test_connection(&self) -> Result<ConnectionInfo, RuntimeError>;
    /// Forget the conversation's native session mapping (the conversation was deleted or reset).
    async fn release_conversation(&self, conversation_id: &str) -> Result<(), RuntimeError>;
    fn status(&self) -> RuntimeStatus;
    async fn dispose(&self);
}

/// Told when a run's native session is known — before its prompt is sent — and when the run ends.
/// This is how a per-request grant follows a run into the tool calls the runtime makes for it.
pub trait RunHooks: Send + Sync {
    /// Refusing fails the run with the returned sentence, before anything reaches the model.
    fn session_ready(&self, request_id: &str, session_id: &str) -> Result<(), String>;
    /// The runtime created `child_session_id` under the run's own session (a `task` subagent):
    /// the child acts for the same request.
    fn child_session(&self, _request_id: &str, _parent_session_id: &str, _child_session_id: &str) {}
    fn run_ended(&self, request_id: &str);
}
