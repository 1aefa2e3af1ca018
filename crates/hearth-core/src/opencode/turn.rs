//! One run's view of its session's events: turns the runtime's event vocabulary into
//! `RuntimeEvent`s and decides when the run is over. Pure (no I/O), so it is tested with the event
//! shapes the real runtime sends.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::runtime::{RuntimeEvent, Usage};

/// Provider retries surfaced before the run is aborted with an error (the runtime itself retries
/// connection errors forever, with back-off, and reports no error).
pub const MAX_PROVIDER_RETRIES: u32 = 3;

/// The runtime's name for an aborted message.
const ABORTED: &str = "MessageAbortedError";

/// What one event did to the run.
#[derive(Debug, Default, PartialEq)]
pub struct Update {
    pub events: Vec<RuntimeEvent>,
    /// The run is over: `Ok(())` finished, `Err(sentence)` failed.
    pub finished: Option<Result<(), String>>,
    /// Abort the session in the runtime (too many retries).
    pub abort: bool,
}

#[derive(Debug)]
pub struct Turn {
    max_retries: u32,
    user_messages: HashSet<String>,
    /// Text of each assistant text part, as streamed so far.
    texts: HashMap<String, String>,
    text: String,
    started_tools: HashSet<String>,
    finished_tools: HashSet<String>,
    error: Option<String>,
    retry_abort: bool,
    /// The session went busy with this turn. An idle or error before that belongs to the previous
    /// turn (an aborted one can report late) and must not end this one.
    busy_seen: bool,
}

impl Turn {
    pub fn new(max_retries: u32) -> Self {
        Self {
            max_retries,
            user_messages: HashSet::new(),
            texts: HashMap::new(),
            text: String::new(),
            started_tools: HashSet::new(),
            finished_tools: HashSet::new(),
            error: None,
            retry_abort: false,
            busy_seen: false,
        }
    }

    /// All text streamed in this run.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Append text to a part, emitting what is new.
    fn push_text(&mut self, part: &str, delta: &str, out: &mut Vec<RuntimeEvent>) {
        if delta.is_empty() {
            return;
        }
        self.texts.entry(part.to_string()).or_default().push_str(delta);
        self.text.push_str(delta);
        out.push(RuntimeEvent::TextDelta { text: delta.to_string() });
    }

    pub fn on_event(&mut self, kind: &str, p: &Value) -> Update {
        let mut up = Update::default();
        if kind == "session.status" && matches!(p["status"]["type"].as_str(), Some("busy" | "retry")) {
            self.busy_seen = true;
        }
        if !self.busy_seen && matches!(kind, "session.idle" | "session.error") {
            return up;
        }
        match kind {
            "message.updated" => {
                if p["info"]["role"] == "user" {
                    if let Some(id) = p["info"]["id"].as_str() {
                        self.user_messages.insert(id.into());
                    }
                }
                if let Some(err) = p["info"]["error"].as_object() {
                    // An abort is reported by the run that aborted (see `session.error` below).
                    if err.get("name").and_then(Value::as_str) != Some(ABORTED) {
                        self.error.get_or_insert_with(|| error_sentence(&Value::Object(err.clone())));
                    }
                }
            }
            "message.part.delta" if p["field"] == "text" && !self.user_messages.contains(p["messageID"].as_str().unwrap_or("")) => {
                let part = p["partID"].as_str().unwrap_or("").to_string();
                self.push_text(&part, p["delta"].as_str().unwrap_or(""), &mut up.events);
            }
            "message.part.updated" => self.on_part(&p["part"], &mut up),
            "permission.asked" => up.events.push(RuntimeEvent::PermissionAsked {
                permission_id: p["id"].as_str().unwrap_or("").into(),
                permission: p["permission"].as_str().unwrap_or("").into(),
                patterns: p["patterns"].as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()).unwrap_or_default(),
            }),
            "session.status" if p["status"]["type"] == "retry" => {
                let attempt = p["status"]["attempt"].as_u64().unwrap_or(0) as u32;
                let message = p["status"]["message"].as_str().unwrap_or("the model provider failed").to_string();
                up.events.push(RuntimeEvent::Retrying { attempt, message: message.clone() });
                if attempt > self.max_retries && !self.retry_abort {
                    self.retry_abort = true;
                    up.abort = true;
                    self.error = Some(format!(
                        "The model provider kept failing ({attempt} attempts), so the turn was stopped: {message}"
                    ));
                }
            }
            "session.error" => {
                let e = &p["error"];
                // This run's own abort (cancel) ends it directly; an abort reported here belongs to an
                // earlier, cancelled turn whose model call only now returned — not to this one.
                if !self.retry_abort && e["name"] != ABORTED {
                    self.error = Some(error_sentence(e));
                }
            }
            "session.idle" => {
                up.finished = Some(match self.error.take() {
                    Some(e) => Err(e),
                    None => Ok(()),
                });
            }
            _ => {}
        }
        up
    }

    fn on_part(&mut self, part: &Value, up: &mut Update) {
        let message = part["messageID"].as_str().unwrap_or("");
        if self.user_messages.contains(message) {
            return;
        }
        match part["type"].as_str().unwrap_or("") {
            "text" => {
                // The full text: emit whatever the deltas did not carry (e.g. after a reconnect).
                let id = part["id"].as_str().unwrap_or("").to_string();
                let full = part["text"].as_str().unwrap_or("");
                let seen = self.texts.get(&id).map(String::len).unwrap_or(0);
                if full.len() > seen && full.is_char_boundary(seen) && full.starts_with(self.texts.get(&id).map(String::as_str).unwrap_or("")) {
                    let rest = full[seen..].to_string();
                    self.push_text(&id, &rest, &mut up.events);
                }
            }
            "tool" => {
                let call = part["callID"].as_str().unwrap_or("").to_string();
                let tool = part["tool"].as_str().unwrap_or("").to_string();
                let state = &part["state"];
                let input = state["input"].clone();
                let status = state["status"].as_str().unwrap_or("");
                if matches!(status, "running" | "completed" | "error") && self.started_tools.insert(call.clone()) {
                    up.events.push(RuntimeEvent::ToolStarted { call_id: call.clone(), tool: tool.clone(), input: input.clone() });
                }
                if matches!(status, "completed" | "error") && self.finished_tools.insert(call.clone()) {
                    up.events.push(RuntimeEvent::ToolFinished {
                        call_id: call,
                        tool,
                        input,
                        output: state["output"].as_str().unwrap_or("").into(),
                        error: state["error"].as_str().map(String::from),
                    });
                }
            }
            "step-finish" => {
                let t = &part["tokens"];
                let n = |v: &Value| v.as_f64().unwrap_or(0.0) as u64;
                up.events.push(RuntimeEvent::Usage(Usage {
                    input_tokens: n(&t["input"]),
                    output_tokens: n(&t["output"]),
                    reasoning_tokens: n(&t["reasoning"]),
                    cache_read_tokens: n(&t["cache"]["read"]),
                }));
            }
            _ => {}
        }
    }
}

/// A sentence from one of the runtime's error objects (`{name, data:{message}}`).
pub fn error_sentence(e: &Value) -> String {
    let name = e["name"].as_str().unwrap_or("UnknownError");
    let msg = e["data"]["message"].as_str().unwrap_or("");
    match name {
        "MessageAbortedError" => "Cancelled.".into(),
        "ProviderAuthError" => format!("The model provider refused the credentials: {msg}"),
        "ContextOverflowError" => format!("The conversation no longer fits the model's context; compact it. ({msg})"),
        _ if msg.is_empty() => format!("The runtime reported {name}."),
        _ => format!("The model run failed: {msg}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn feed(turn: &mut Turn, events: &[(&str, Value)]) -> Vec<Update> {
        events.iter().map(|(k, p)| turn.on_event(k, p)).collect()
    }

    /// The event sequence the real runtime sent for "Read marker.txt" (recorded, trimmed).
    #[test]
    fn a_tool_turn_yields_tool_events_text_and_done() {
        let mut t = Turn::new(MAX_PROVIDER_RETRIES);
        let ups = feed(&mut t, &[
            ("message.updated", json!({"info": {"id": "msg_u", "role": "user"}})),
            ("message.part.updated", json!({"part": {"type": "text", "text": "Read marker.txt", "messageID": "msg_u", "id": "prt_u"}})),
            ("session.status", json!({"status": {"type": "busy"}})),
            ("message.part.updated", json!({"part": {"type": "tool", "tool": "read", "callID": "c1", "messageID": "msg_a", "state": {"status": "pending", "input": {}}}})),
            ("message.part.updated", json!({"part": {"type": "tool", "tool": "read", "callID": "c1", "messageID": "msg_a", "state": {"status": "running", "input": {"filePath": "marker.txt"}}}})),
            ("message.part.updated", json!({"part": {"type": "tool", "tool": "read", "callID": "c1", "messageID": "msg_a", "state": {"status": "completed", "input": {"filePath": "marker.txt"}, "output": "1: PROJECT_7"}}})),
            ("message.part.updated", json!({"part": {"type": "step-finish", "messageID": "msg_a", "tokens": {"input": 10, "output": 2, "reasoning": 0, "cache": {"read": 1, "write": 0}}}})),
            ("message.part.updated", json!({"part": {"type": "text", "text": "", "messageID": "msg_b", "id": "prt_t"}})),
            ("message.part.delta", json!({"messageID": "msg_b", "partID": "prt_t", "field": "text", "delta": "PROJECT_7"})),
            ("message.part.updated", json!({"part": {"type": "text", "text": "PROJECT_7", "messageID": "msg_b", "id": "prt_t"}})),
            ("session.idle", json!({})),
        ]);
        let events: Vec<_> = ups.iter().flat_map(|u| u.events.clone()).collect();
        assert_eq!(events, vec![
            RuntimeEvent::ToolStarted { call_id: "c1".into(), tool: "read".into(), input: json!({"filePath": "marker.txt"}) },
            RuntimeEvent::ToolFinished { call_id: "c1".into(), tool: "read".into(), input: json!({"filePath": "marker.txt"}), output: "1: PROJECT_7".into(), error: None },
            RuntimeEvent::Usage(Usage { input_tokens: 10, output_tokens: 2, reasoning_tokens: 0, cache_read_tokens: 1 }),
            RuntimeEvent::TextDelta { text: "PROJECT_7".into() },
        ]);
        assert_eq!(ups.last().unwrap().finished, Some(Ok(())));
        assert_eq!(t.text(), "PROJECT_7");
    }

    #[test]
    fn missed_deltas_are_recovered_from_the_full_part() {
        let mut t = Turn::new(3);
        t.on_event("message.part.delta", &json!({"messageID": "m", "partID": "p", "field": "text", "delta": "Hel"}));
        let up = t.on_event("message.part.updated", &json!({"part": {"type": "text", "text": "Hello", "messageID": "m", "id": "p"}}));
        assert_eq!(up.events, vec![RuntimeEvent::TextDelta { text: "lo".into() }]);
        assert_eq!(t.text(), "Hello");
    }

    #[test]
    fn retries_are_surfaced_then_the_turn_is_aborted_with_a_sentence() {
        let mut t = Turn::new(2);
        t.on_event("session.status", &json!({"status": {"type": "busy"}}));
        let retry = |n: u64| json!({"status": {"type": "retry", "attempt": n, "message": "Connection refused", "next": 1000}});
        assert!(!t.on_event("session.status", &retry(1)).abort);
        assert!(!t.on_event("session.status", &retry(2)).abort);
        let up = t.on_event("session.status", &retry(3));
        assert!(up.abort);
        assert_eq!(up.events, vec![RuntimeEvent::Retrying { attempt: 3, message: "Connection refused".into() }]);
        // The abort produces MessageAbortedError; the retry sentence stays.
        t.on_event("session.error", &json!({"error": {"name": "MessageAbortedError", "data": {"message": "aborted"}}}));
        let end = t.on_event("session.idle", &json!({}));
        let err = end.finished.unwrap().unwrap_err();
        assert!(err.contains("kept failing (3 attempts)") && err.contains("Connection refused"), "{err}");
    }

    #[test]
    fn a_late_idle_or_error_of_the_previous_turn_is_ignored() {
        let mut t = Turn::new(3);
        assert_eq!(t.on_event("session.error", &json!({"error": {"name": "MessageAbortedError"}})), Update::default());
        assert_eq!(t.on_event("session.idle", &json!({})).finished, None);
        t.on_event("session.status", &json!({"status": {"type": "busy"}}));
        t.on_event("message.part.delta", &json!({"messageID": "m", "partID": "p", "field": "text", "delta": "ok"}));
        // The cancelled turn's model call returns only now: its abort is not this turn's.
        t.on_event("message.updated", &json!({"info": {"id": "old", "role": "assistant", "error": {"name": "MessageAbortedError"}}}));
        t.on_event("session.error", &json!({"error": {"name": "MessageAbortedError", "data": {"message": "aborted"}}}));
        assert_eq!(t.on_event("session.idle", &json!({})).finished, Some(Ok(())));
        assert_eq!(t.text(), "ok");
    }

    #[test]
    fn errors_and_permissions() {
        let mut t = Turn::new(3);
        t.on_event("session.status", &json!({"status": {"type": "busy"}}));
        let up = t.on_event("permission.asked", &json!({"id": "per_1", "permission": "external_directory", "patterns": ["/etc/*"]}));
        assert_eq!(up.events, vec![RuntimeEvent::PermissionAsked { permission_id: "per_1".into(), permission: "external_directory".into(), patterns: vec!["/etc/*".into()] }]);
        t.on_event("session.error", &json!({"error": {"name": "APIError", "data": {"message": "model not found"}}}));
        assert_eq!(t.on_event("session.idle", &json!({})).finished, Some(Err("The model run failed: model not found".into())));
    }
}
