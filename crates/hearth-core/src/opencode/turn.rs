//! One turn's view of its session: turns the runtime's typed events (and, after a gap in the event
//! stream, its stored messages) into the contract's `RuntimeEvent`s, and decides when the turn is
//! over and how. Pure (no I/O), so it is tested with the event shapes the real runtime sends.
//!
//! A turn knows exactly which stored messages are its own: Hearth names the user message of the
//! prompt itself, and every model step answering it is an assistant message whose `parentID` is
//! that name. Messages older than it belong to earlier turns, whatever arrives late.

use std::collections::{BTreeMap, HashSet};

use super::wire::{ErrorInfo, Event, MessageInfo, Part, Role, SessionStatus, StoredMessage, ToolPart, ToolState};
use crate::runtime::{FailureKind, RuntimeEvent, TurnFailure, Usage};

/// Provider retries surfaced before the turn is aborted with an error (the runtime itself retries
/// connection errors forever, with back-off, and reports no error).
pub const MAX_PROVIDER_RETRIES: u32 = 3;

/// What one event did to the turn.
#[derive(Debug, Default, PartialEq)]
pub struct Update {
    pub events: Vec<RuntimeEvent>,
    /// Abort the session in the runtime (too many retries).
    pub abort: bool,
}

/// What an idle session says about the turn.
#[derive(Debug, Clone, PartialEq)]
pub enum Settled {
    /// Every step of the turn is over: this is how it ended.
    Over(Result<(), TurnFailure>),
    /// Steps of the turn are still running (the runtime reports idle once before it stores a
    /// failed step, and again after): wait for more events.
    Running,
    /// The turn has no step yet: the idle may be an earlier turn's, or the prompt was lost. Ask the
    /// runtime what it stored.
    Unknown,
}

#[derive(Debug, Clone, Default)]
struct Step {
    complete: bool,
    error: Option<ErrorInfo>,
}

#[derive(Debug)]
pub struct TurnTracker {
    /// The user message this turn's prompt stored (Hearth names it).
    user_message: String,
    max_retries: u32,
    /// The session went busy after the prompt: an idle before that belongs to an earlier turn.
    busy_seen: bool,
    /// The runtime stored the prompt.
    prompt_stored: bool,
    /// This turn's model steps (assistant messages answering the prompt), by id.
    steps: BTreeMap<String, Step>,
    /// Text parts in the order they were first seen, with their text so far.
    texts: Vec<(String, String)>,
    /// Text parts whose text was caught up from the stored messages past what streamed: deltas
    /// still in flight for them may repeat what is already there, so only their full updates
    /// count from then on.
    caught_up: HashSet<String>,
    started_tools: HashSet<String>,
    finished_tools: HashSet<String>,
    /// Step-finish parts already counted.
    usage_parts: HashSet<String>,
    /// A `session.error` for this turn that no step carries (it failed before a step was stored).
    session_error: Option<ErrorInfo>,
    /// The runtime kept retrying past the limit: the turn was stopped with this sentence.
    retry_failure: Option<String>,
}

impl TurnTracker {
    pub fn new(user_message: impl Into<String>, max_retries: u32) -> Self {
        Self {
            user_message: user_message.into(),
            max_retries,
            busy_seen: false,
            prompt_stored: false,
            steps: BTreeMap::new(),
            texts: Vec::new(),
            caught_up: HashSet::new(),
            started_tools: HashSet::new(),
            finished_tools: HashSet::new(),
            usage_parts: HashSet::new(),
            session_error: None,
            retry_failure: None,
        }
    }

    /// The reply's text so far: every text part of this turn's steps, in order.
    pub fn text(&self) -> String {
        self.texts.iter().map(|(_, t)| t.as_str()).collect()
    }

    pub fn has_started(&self) -> bool {
        self.busy_seen || self.prompt_stored || !self.steps.is_empty()
    }

    /// A message this turn may read: one of its steps, or a newer message whose parent is not
    /// known yet. Ids sort by creation time; anything older than the prompt is an earlier turn's.
    fn is_ours(&self, message_id: &str) -> bool {
        self.steps.contains_key(message_id) || message_id > self.user_message.as_str()
    }

    fn on_message(&mut self, info: &MessageInfo) {
        match info.role {
            Role::User if info.id == self.user_message => self.prompt_stored = true,
            Role::Assistant if info.parent_id.as_deref() == Some(self.user_message.as_str()) => {
                let step = self.steps.entry(info.id.clone()).or_default();
                step.complete |= info.is_complete();
                if info.error.is_some() {
                    step.error = info.error.clone();
                }
            }
            _ => {}
        }
    }

    fn push_text(&mut self, part_id: &str, delta: &str, out: &mut Vec<RuntimeEvent>) {
        if delta.is_empty() {
            return;
        }
        match self.texts.iter_mut().find(|(id, _)| id == part_id) {
            Some((_, text)) => text.push_str(delta),
            None => self.texts.push((part_id.to_owned(), delta.to_owned())),
        }
        out.push(RuntimeEvent::TextDelta { text: delta.to_owned() });
    }

    /// A part as the runtime stored it: emit what the stream did not carry, once. `from_store`:
    /// read from the stored messages after a gap, not from the stream.
    fn on_part(&mut self, part: &Part, from_store: bool, out: &mut Vec<RuntimeEvent>) {
        if !self.is_ours(part.message_id()) {
            return;
        }
        match part {
            Part::Text(t) if !t.synthetic => {
                let seen = self.texts.iter().find(|(id, _)| *id == t.id).map_or("", |(_, s)| s.as_str());
                if t.text.len() > seen.len() && t.text.starts_with(seen) {
                    let rest = t.text[seen.len()..].to_owned();
                    self.push_text(&t.id, &rest, out);
                    if from_store {
                        self.caught_up.insert(t.id.clone());
                    }
                }
            }
            Part::Tool(tool) => self.on_tool(tool, out),
            Part::StepFinish(s) if self.usage_parts.insert(s.id.clone()) => {
                let n = |v: f64| v.max(0.0) as u64;
                out.push(RuntimeEvent::Usage(Usage {
                    input_tokens: n(s.tokens.input),
                    output_tokens: n(s.tokens.output),
                    reasoning_tokens: n(s.tokens.reasoning),
                    cache_read_tokens: n(s.tokens.cache.read),
                }));
            }
            _ => {}
        }
    }

    fn on_tool(&mut self, tool: &ToolPart, out: &mut Vec<RuntimeEvent>) {
        let input = tool.state.input().clone();
        let started = !matches!(tool.state, ToolState::Pending { .. });
        if started && self.started_tools.insert(tool.call_id.clone()) {
            out.push(RuntimeEvent::ToolStarted { call_id: tool.call_id.clone(), tool: tool.tool.clone(), input: input.clone() });
        }
        let (output, error) = match &tool.state {
            ToolState::Completed { output, .. } => (output.clone(), None),
            ToolState::Error { error, .. } => (String::new(), Some(error.clone())),
            _ => return,
        };
        if self.finished_tools.insert(tool.call_id.clone()) {
            out.push(RuntimeEvent::ToolFinished { call_id: tool.call_id.clone(), tool: tool.tool.clone(), input, output, error });
        }
    }

    /// One event of the turn's session.
    pub fn on_event(&mut self, event: &Event) -> Update {
        let mut up = Update::default();
        match event {
            Event::SessionStatus(s) => match &s.status {
                SessionStatus::Busy => self.busy_seen = true,
                SessionStatus::Retry { attempt, message } => {
                    self.busy_seen = true;
                    up.events.push(RuntimeEvent::Retrying { attempt: *attempt, message: message.clone() });
                    if *attempt > self.max_retries && self.retry_failure.is_none() {
                        up.abort = true;
                        self.retry_failure = Some(format!(
                            "The model provider kept failing ({attempt} attempts), so the turn was stopped: {message}"
                        ));
                    }
                }
                SessionStatus::Idle => {}
            },
            Event::MessageUpdated(m) => self.on_message(&m.info),
            Event::PartUpdated(p) => self.on_part(&p.part, false, &mut up.events),
            Event::PartDelta(d) if d.field == "text" && self.is_ours(&d.message_id) && !self.caught_up.contains(&d.part_id) => {
                self.push_text(&d.part_id, &d.delta, &mut up.events);
            }
            Event::PermissionAsked(p) => up.events.push(RuntimeEvent::PermissionAsked {
                permission_id: p.id.clone(),
                permission: p.permission.clone(),
                patterns: p.patterns.clone(),
            }),
            // An abort is the turn's own doing (cancel, or the retry limit) or an earlier turn's.
            Event::SessionError(e) if self.busy_seen => {
                if let Some(err) = e.error.as_ref().filter(|err| !err.is_abort()) {
                    self.session_error = Some(err.clone());
                }
            }
            _ => {}
        }
        up
    }

    /// What an idle session means for this turn.
    pub fn on_idle(&self) -> Settled {
        if !self.busy_seen {
            return Settled::Unknown;
        }
        if self.steps.values().any(|s| !s.complete) {
            return Settled::Running;
        }
        if self.steps.is_empty() {
            return match &self.session_error {
                Some(e) => Settled::Over(Err(failure_of(e))),
                None => Settled::Unknown,
            };
        }
        Settled::Over(self.outcome())
    }

    fn outcome(&self) -> Result<(), TurnFailure> {
        if let Some(sentence) = &self.retry_failure {
            return Err(TurnFailure { kind: FailureKind::Model, message: sentence.clone() });
        }
        let error = self.steps.values().filter_map(|s| s.error.as_ref()).find(|e| !e.is_abort()).or(self.session_error.as_ref());
        match error {
            Some(e) => Err(failure_of(e)),
            None => Ok(()),
        }
    }

    /// Catch up from the session's stored messages after a gap in the event stream: emit what the
    /// stream did not deliver (text, tools, usage), once.
    pub fn reconcile(&mut self, messages: &[StoredMessage]) -> Vec<RuntimeEvent> {
        let mut out = Vec::new();
        for message in messages {
            self.on_message(&message.info);
            if message.info.role == Role::Assistant && self.steps.contains_key(&message.info.id) {
                for part in &message.parts {
                    self.on_part(part, true, &mut out);
                }
            }
        }
        out
    }

    /// After a reconcile, with the session not busy: is the turn over?
    pub fn settled_after_reconcile(&self) -> Settled {
        if self.steps.is_empty() {
            return match &self.session_error {
                Some(e) => Settled::Over(Err(failure_of(e))),
                None => Settled::Unknown,
            };
        }
        if self.steps.values().any(|s| !s.complete) {
            return Settled::Running;
        }
        Settled::Over(self.outcome())
    }
}

/// The user's sentence for one of the runtime's errors.
pub fn failure_of(e: &ErrorInfo) -> TurnFailure {
    let msg = e.message();
    let (kind, message) = match e.name.as_str() {
        "ProviderAuthError" => (FailureKind::ProviderAuth, format!("The model provider refused the credentials: {msg}")),
        "ContextOverflowError" => (FailureKind::ContextOverflow, format!("The conversation no longer fits the model's context; compact it. ({msg})")),
        name if msg.is_empty() => (FailureKind::Model, format!("The runtime reported {name}.")),
        _ => (FailureKind::Model, format!("The model run failed: {msg}")),
    };
    TurnFailure { kind, message }
}

#[cfg(test)]
#[path = "turn_tests.rs"]
mod tests;
