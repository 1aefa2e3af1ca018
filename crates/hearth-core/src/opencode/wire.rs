//! The runtime's wire vocabulary, decoded once: the events of `GET /global/event` and the stored
//! messages of `GET /session/{id}/message`, as serde types. Everything else in `opencode/` reads
//! these types, never raw JSON. The pinned runtime version makes the shapes stable; the tests feed
//! events and messages recorded from the real runtime (`fixtures/opencode-wire/`) through them.
//!
//! Only what Hearth uses is named; unknown event types decode as [`Event::Other`] and unknown part
//! types as [`Part::Other`], so a new kind of event never breaks a run.

use serde::Deserialize;
use serde_json::Value;

/// One event of the global stream: the directory (instance) it came from and what happened.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Envelope {
    /// The project directory whose instance sent the event (absent for server-wide events).
    #[serde(default)]
    pub directory: Option<String>,
    pub payload: Event,
}

impl Envelope {
    /// Decode one `data:` line of the stream. The per-instance stream (`/event`) sends the payload
    /// bare; the global one wraps it.
    pub fn decode(data: &str) -> Result<Self, serde_json::Error> {
        let value: Value = serde_json::from_str(data)?;
        if value.get("payload").is_some() {
            serde_json::from_value(value)
        } else {
            Ok(Envelope { directory: None, payload: serde_json::from_value(value)? })
        }
    }
}

/// The events Hearth acts on.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    ServerConnected,
    ServerHeartbeat,
    SessionCreated(SessionEvent),
    SessionUpdated(SessionEvent),
    SessionStatus(StatusEvent),
    SessionIdle(SessionRef),
    SessionError(SessionErrorEvent),
    /// A compaction finished and its summary is stored.
    SessionCompacted(SessionRef),
    MessageUpdated(MessageEvent),
    PartUpdated(PartEvent),
    PartDelta(PartDelta),
    PermissionAsked(PermissionAsked),
    PermissionReplied(PermissionReplied),
    /// Everything else (`sync`, `session.diff`, `plugin.added`, …): not Hearth's concern.
    Other,
}

/// `{type, properties}` before the type picks the shape of `properties`.
#[derive(Deserialize)]
struct RawEvent {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    properties: Value,
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = RawEvent::deserialize(deserializer)?;
        let p = raw.properties;
        let typed = |p| -> Result<Event, serde_json::Error> {
            Ok(match raw.kind.as_str() {
                "server.connected" => Event::ServerConnected,
                "server.heartbeat" => Event::ServerHeartbeat,
                "session.created" => Event::SessionCreated(serde_json::from_value(p)?),
                "session.updated" => Event::SessionUpdated(serde_json::from_value(p)?),
                "session.status" => Event::SessionStatus(serde_json::from_value(p)?),
                "session.idle" => Event::SessionIdle(serde_json::from_value(p)?),
                "session.error" => Event::SessionError(serde_json::from_value(p)?),
                "session.compacted" => Event::SessionCompacted(serde_json::from_value(p)?),
                "message.updated" => Event::MessageUpdated(serde_json::from_value(p)?),
                "message.part.updated" => Event::PartUpdated(serde_json::from_value(p)?),
                "message.part.delta" => Event::PartDelta(serde_json::from_value(p)?),
                "permission.asked" => Event::PermissionAsked(serde_json::from_value(p)?),
                "permission.replied" => Event::PermissionReplied(serde_json::from_value(p)?),
                _ => Event::Other,
            })
        };
        let kind = raw.kind.clone();
        typed(p).map_err(|e| serde::de::Error::custom(format!("{kind}: {e}")))
    }
}

impl Event {
    /// The native session the event is about, if it is about one.
    pub fn session_id(&self) -> Option<&str> {
        match self {
            Event::SessionCreated(e) | Event::SessionUpdated(e) => Some(&e.info.id),
            Event::SessionStatus(e) => Some(&e.session_id),
            Event::SessionIdle(e) | Event::SessionCompacted(e) => Some(&e.session_id),
            Event::SessionError(e) => e.session_id.as_deref(),
            Event::MessageUpdated(e) => Some(&e.info.session_id),
            Event::PartUpdated(e) => Some(e.part.session_id()),
            Event::PartDelta(e) => Some(&e.session_id),
            Event::PermissionAsked(e) => Some(&e.session_id),
            Event::PermissionReplied(e) => Some(&e.session_id),
            Event::ServerConnected | Event::ServerHeartbeat | Event::Other => None,
        }
    }

    /// Caused by the model answering: streamed text, or a tool part the model asked for. (Text part
    /// updates are not counted: the prompt's own text part can arrive after the model request.)
    pub fn is_model_output(&self) -> bool {
        matches!(self, Event::PartDelta(_) | Event::PartUpdated(PartEvent { part: Part::Tool(_) }))
    }

    /// The session that spawned this one, for a `session.created` of a subagent's session.
    pub fn spawned_by(&self) -> Option<&str> {
        match self {
            Event::SessionCreated(e) => e.info.parent_id.as_deref(),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SessionRef {
    #[serde(rename = "sessionID")]
    pub session_id: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SessionEvent {
    pub info: SessionInfo,
}

/// A native session as the runtime describes it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SessionInfo {
    pub id: String,
    /// Set on a subagent's session: the session whose `task` tool made it.
    #[serde(rename = "parentID", default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub directory: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StatusEvent {
    #[serde(rename = "sessionID")]
    pub session_id: String,
    pub status: SessionStatus,
}

/// What a session is doing (`session.status`, and `GET /session/status`, which omits idle ones).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum SessionStatus {
    Idle,
    Busy,
    /// The provider failed and the runtime retries after `next` ms (it reports no error itself).
    Retry {
        #[serde(default)]
        attempt: u32,
        #[serde(default)]
        message: String,
    },
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SessionErrorEvent {
    #[serde(rename = "sessionID", default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub error: Option<ErrorInfo>,
}

/// One of the runtime's error objects: `{name, data: {message, …}}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ErrorInfo {
    pub name: String,
    #[serde(default)]
    pub data: ErrorData,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ErrorData {
    #[serde(default)]
    pub message: Option<String>,
}

/// The runtime's name for a message whose model call was aborted.
pub const ABORTED_ERROR: &str = "MessageAbortedError";

impl ErrorInfo {
    pub fn is_abort(&self) -> bool {
        self.name == ABORTED_ERROR
    }

    pub fn message(&self) -> &str {
        self.data.message.as_deref().unwrap_or("")
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct MessageEvent {
    pub info: MessageInfo,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

/// A stored message's header. An assistant message answers the user message `parent_id`; one
/// prompt may take several assistant messages (one per model step).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct MessageInfo {
    pub id: String,
    #[serde(rename = "sessionID")]
    pub session_id: String,
    pub role: Role,
    #[serde(rename = "parentID", default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub time: MessageTime,
    #[serde(default)]
    pub error: Option<ErrorInfo>,
    /// Why the model step stopped (`stop`, `tool-calls`, `length`, …); absent while it runs.
    #[serde(default)]
    pub finish: Option<String>,
    /// `true` on the assistant message a compaction wrote (a user message carries an object here).
    #[serde(default)]
    pub summary: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct MessageTime {
    #[serde(default)]
    pub created: Option<u64>,
    /// Set when the step ended, successfully or not.
    #[serde(default)]
    pub completed: Option<u64>,
}

impl MessageInfo {
    /// The step is over (it finished, failed or was aborted).
    pub fn is_complete(&self) -> bool {
        self.time.completed.is_some() || self.error.is_some()
    }

    /// The summary a compaction wrote.
    pub fn is_compaction_summary(&self) -> bool {
        self.role == Role::Assistant && self.summary == Some(Value::Bool(true))
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PartEvent {
    pub part: Part,
}

/// One part of a message.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Part {
    Text(TextPart),
    Tool(ToolPart),
    StepFinish(StepFinishPart),
    /// Marks the user message that asked for a compaction.
    Compaction(OtherPart),
    #[serde(untagged)]
    Other(OtherPart),
}

impl Part {
    pub fn session_id(&self) -> &str {
        match self {
            Part::Text(p) => &p.session_id,
            Part::Tool(p) => &p.session_id,
            Part::StepFinish(p) => &p.session_id,
            Part::Compaction(p) | Part::Other(p) => &p.session_id,
        }
    }

    pub fn message_id(&self) -> &str {
        match self {
            Part::Text(p) => &p.message_id,
            Part::Tool(p) => &p.message_id,
            Part::StepFinish(p) => &p.message_id,
            Part::Compaction(p) | Part::Other(p) => &p.message_id,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TextPart {
    pub id: String,
    #[serde(rename = "sessionID")]
    pub session_id: String,
    #[serde(rename = "messageID")]
    pub message_id: String,
    #[serde(default)]
    pub text: String,
    /// Synthetic text the runtime adds for the model, not shown as the reply.
    #[serde(default)]
    pub synthetic: bool,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ToolPart {
    pub id: String,
    #[serde(rename = "sessionID")]
    pub session_id: String,
    #[serde(rename = "messageID")]
    pub message_id: String,
    #[serde(rename = "callID")]
    pub call_id: String,
    pub tool: String,
    pub state: ToolState,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum ToolState {
    Pending {
        #[serde(default)]
        input: Value,
    },
    Running {
        #[serde(default)]
        input: Value,
    },
    Completed {
        #[serde(default)]
        input: Value,
        #[serde(default)]
        output: String,
    },
    Error {
        #[serde(default)]
        input: Value,
        #[serde(default)]
        error: String,
    },
}

impl ToolState {
    pub fn input(&self) -> &Value {
        match self {
            ToolState::Pending { input } | ToolState::Running { input } | ToolState::Completed { input, .. } | ToolState::Error { input, .. } => input,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StepFinishPart {
    pub id: String,
    #[serde(rename = "sessionID")]
    pub session_id: String,
    #[serde(rename = "messageID")]
    pub message_id: String,
    #[serde(default)]
    pub tokens: Tokens,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Tokens {
    #[serde(default)]
    pub input: f64,
    #[serde(default)]
    pub output: f64,
    #[serde(default)]
    pub reasoning: f64,
    #[serde(default)]
    pub cache: CacheTokens,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct CacheTokens {
    #[serde(default)]
    pub read: f64,
}

/// A part of a kind Hearth does not show (step-start, reasoning, patch, …).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct OtherPart {
    #[serde(rename = "sessionID")]
    pub session_id: String,
    #[serde(rename = "messageID")]
    pub message_id: String,
}

/// Streamed text appended to a part.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PartDelta {
    #[serde(rename = "sessionID")]
    pub session_id: String,
    #[serde(rename = "messageID")]
    pub message_id: String,
    #[serde(rename = "partID")]
    pub part_id: String,
    pub field: String,
    pub delta: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PermissionAsked {
    pub id: String,
    #[serde(rename = "sessionID")]
    pub session_id: String,
    pub permission: String,
    #[serde(default)]
    pub patterns: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PermissionReplied {
    #[serde(rename = "sessionID")]
    pub session_id: String,
    #[serde(rename = "requestID")]
    pub request_id: String,
    pub reply: String,
}

/// One entry of `GET /session/{id}/message`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StoredMessage {
    pub info: MessageInfo,
    #[serde(default)]
    pub parts: Vec<Part>,
}

/// `GET /session/status`: busy and retrying sessions by id (idle ones are omitted).
pub type StatusMap = std::collections::HashMap<String, SessionStatus>;

/// The id of a message the runtime would accept and sort correctly: `msg_`, 12 hex digits of
/// (milliseconds since the epoch × 4096 + a counter) cut to 48 bits, then 14 random base-62
/// characters — the runtime's own ascending-identifier format. Hearth names the user message of a
/// prompt itself, so it knows which stored messages answer it even after a gap in the event stream.
pub fn new_message_id(now_ms: u64, counter: u16) -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    const RANDOM_CHARS: usize = 14;
    const TIME_BITS_MASK: u64 = (1 << 48) - 1;
    let stamp = (now_ms.wrapping_mul(0x1000) + u64::from(counter & 0x0fff)) & TIME_BITS_MASK;
    let mut random = [0u8; RANDOM_CHARS];
    getrandom::fill(&mut random).expect("the OS random source is available");
    let suffix: String = random.iter().map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char).collect();
    format!("msg_{stamp:012x}{suffix}")
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
