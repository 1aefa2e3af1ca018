//! What the scripted model saw: one recorded chat-completion request, its kind, and helpers to read
//! an OpenAI-style `messages` array the way OpenCode writes it.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use serde_json::Value;

/// Why OpenCode called the model. Decided from the body alone (see [`classify`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RequestKind {
    /// Title generation: OpenCode's title agent sends no tools.
    Title,
    /// Native compaction (summarize): no tools, and the prompt asks for a summary to continue from.
    Compaction,
    /// A turn of the agent loop: it carries tools.
    Agent,
}

/// Tool names that do not make a request an agent turn. OpenCode adds `_noop` for proxies that
/// insist on a tools array when the history has tool calls (compaction of such a session).
const PLACEHOLDER_TOOLS: &[&str] = &["_noop"];

/// Classify a chat-completion body. Order matters: the title prompt itself mentions "summarizing",
/// so title signals are checked before summary signals.
pub fn classify(body: &Value) -> RequestKind {
    if tool_names_of(body).iter().any(|name| !PLACEHOLDER_TOOLS.contains(&name.as_str())) {
        return RequestKind::Agent;
    }
    let system = system_text_of(body).to_lowercase();
    let last_user = last_user_text_of(body).to_lowercase();
    if system.contains("title generator") || system.contains("thread title") || last_user.starts_with("generate a title") {
        return RequestKind::Title;
    }
    // OpenCode's compaction user prompt starts with this sentence in every 1.x release; its system
    // prompt has varied ("tasked with summarizing conversations", "summarizing a conversation ...").
    let compaction = last_user.contains("prompt for continuing our conversation")
        || system.contains("summarizing conversations")
        || system.contains("summarizing a conversation")
        || last_user.contains("summarize")
        || last_user.contains("summarise")
        || last_user.contains("summary");
    if compaction {
        RequestKind::Compaction
    } else {
        RequestKind::Title
    }
}

/// One chat-completion request as received. Cloning is cheap: the body is shared.
#[derive(Debug, Clone)]
pub struct ObservedRequest {
    /// 1-based arrival order on this server.
    pub seq: u64,
    pub kind: RequestKind,
    /// OpenCode's session id, from the `x-session-id` header (or `x-session-affinity`).
    pub session_id: Option<String>,
    pub stream: bool,
    pub model: Option<String>,
    /// The parsed body: `messages`, `tools`, `stream_options`, …
    pub body: Arc<Value>,
    /// The body exactly as it arrived.
    pub body_bytes: Bytes,
    pub received_at: Instant,
}

impl ObservedRequest {
    /// Build a record from a parsed body (the server fills `seq` and `session_id`).
    pub fn new(seq: u64, session_id: Option<String>, body: Value, body_bytes: Bytes) -> Self {
        let kind = classify(&body);
        let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
        let model = body.get("model").and_then(Value::as_str).map(str::to_owned);
        Self { seq, kind, session_id, stream, model, body: Arc::new(body), body_bytes, received_at: Instant::now() }
    }

    pub fn messages(&self) -> &[Value] {
        messages_of(&self.body)
    }

    /// Text of the last `user` message (text parts joined by newlines); empty when there is none.
    pub fn last_user_text(&self) -> String {
        last_user_text_of(&self.body)
    }

    /// Text of every `user` message, in order.
    pub fn user_texts(&self) -> Vec<String> {
        self.messages().iter().filter(|m| role(m) == Some("user")).map(|m| content_text(m.get("content"))).collect()
    }

    /// Text of all `system` messages, joined by newlines.
    pub fn system_text(&self) -> String {
        system_text_of(&self.body)
    }

    /// Contents of the `tool` messages after the last `user` message, in order: the results the
    /// model has not answered yet.
    pub fn tool_results_after_last_user(&self) -> Vec<String> {
        let messages = self.messages();
        let start = messages.iter().rposition(|m| role(m) == Some("user")).map_or(0, |i| i + 1);
        messages[start..].iter().filter(|m| role(m) == Some("tool")).map(|m| content_text(m.get("content"))).collect()
    }

    /// Names of the tools offered to the model.
    pub fn tool_names(&self) -> Vec<String> {
        tool_names_of(&self.body)
    }

    pub fn has_tool(&self, name: &str) -> bool {
        self.tool_names().iter().any(|n| n == name)
    }

    /// Whether `needle` occurs anywhere in the raw body, as written or JSON-escaped (so text with
    /// quotes, backslashes or newlines is found inside a JSON string too).
    pub fn contains_text(&self, needle: &str) -> bool {
        if memchr::memmem::find(&self.body_bytes, needle.as_bytes()).is_some() {
            return true;
        }
        let escaped = serde_json::to_string(needle).unwrap_or_default();
        let escaped = escaped.get(1..escaped.len().saturating_sub(1)).unwrap_or_default();
        escaped != needle && !escaped.is_empty() && memchr::memmem::find(&self.body_bytes, escaped.as_bytes()).is_some()
    }

    /// Whether the client asked for a final usage chunk in the stream.
    pub fn wants_usage(&self) -> bool {
        self.body.pointer("/stream_options/include_usage").and_then(Value::as_bool).unwrap_or(false)
    }
}

fn messages_of(body: &Value) -> &[Value] {
    body.get("messages").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

fn role(message: &Value) -> Option<&str> {
    message.get("role").and_then(Value::as_str)
}

/// `content` is a string or an array of parts; only text parts count.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| match part {
                Value::String(text) => Some(text.as_str()),
                _ => part.get("text").and_then(Value::as_str),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn last_user_text_of(body: &Value) -> String {
    let last = messages_of(body).iter().rev().find(|m| role(m) == Some("user"));
    last.map(|m| content_text(m.get("content"))).unwrap_or_default()
}

fn system_text_of(body: &Value) -> String {
    let system = messages_of(body).iter().filter(|m| matches!(role(m), Some("system") | Some("developer")));
    system.map(|m| content_text(m.get("content"))).collect::<Vec<_>>().join("\n")
}

fn tool_names_of(body: &Value) -> Vec<String> {
    let tools = body.get("tools").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    tools
        .iter()
        .filter_map(|tool| tool.pointer("/function/name").or_else(|| tool.get("name")).and_then(Value::as_str))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn tool(name: &str) -> Value {
        json!({"type": "function", "function": {"name": name, "description": "", "parameters": {"type": "object"}}})
    }

    /// Shaped like OpenCode 1.x's title request: title system prompt, no tools.
    pub(crate) fn title_body() -> Value {
        json!({"model": "scripted", "stream": true, "stream_options": {"include_usage": true}, "max_tokens": 32000,
            "messages": [
                {"role": "system", "content": "You are a title generator. You output ONLY a thread title. Nothing else. ... the user message you are summarizing"},
                {"role": "user", "content": "Generate a title for this conversation:\n"},
                {"role": "user", "content": [{"type": "text", "text": "Read marker.txt for wave 0"}]}
            ]})
    }

    /// Shaped like OpenCode 1.x's summarize request: history, then the continuation prompt, no tools.
    pub(crate) fn compaction_body() -> Value {
        json!({"model": "scripted", "stream": true, "stream_options": {"include_usage": true},
            "messages": [
                {"role": "system", "content": "You are summarizing a conversation for continuation by another agent."},
                {"role": "user", "content": [{"type": "text", "text": "Read marker.txt"}]},
                {"role": "assistant", "content": "PROJECT_0"},
                {"role": "user", "content": [{"type": "text", "text": "Provide a detailed prompt for continuing our conversation above.\nFocus on information that would be helpful"}]}
            ]})
    }

    pub(crate) fn agent_body(prompt: &str) -> Value {
        json!({"model": "scripted", "stream": true, "tool_choice": "auto", "stream_options": {"include_usage": true},
            "tools": [tool("read"), tool("bash"), tool("skill")],
            "messages": [
                {"role": "system", "content": "You are opencode, an interactive CLI tool."},
                {"role": "user", "content": [{"type": "text", "text": prompt}]}
            ]})
    }

    fn observed(body: Value) -> ObservedRequest {
        let bytes = Bytes::from(serde_json::to_vec(&body).unwrap());
        ObservedRequest::new(1, None, body, bytes)
    }

    #[test]
    fn classifies_opencode_shaped_bodies() {
        assert_eq!(classify(&title_body()), RequestKind::Title);
        assert_eq!(classify(&compaction_body()), RequestKind::Compaction);
        assert_eq!(classify(&agent_body("hello")), RequestKind::Agent);
        // The older compaction system prompt, and a compaction carrying only the proxy placeholder tool.
        let mut older = compaction_body();
        older["messages"][0]["content"] = json!("You are a helpful AI assistant tasked with summarizing conversations.");
        older["tools"] = json!([tool("_noop")]);
        assert_eq!(classify(&older), RequestKind::Compaction);
        // Without tools and without a summary request, it is the title agent.
        let plain = json!({"messages": [{"role": "user", "content": "hello"}]});
        assert_eq!(classify(&plain), RequestKind::Title);
    }

    #[test]
    fn reads_messages_like_opencode_writes_them() {
        let mut body = agent_body("Read marker.txt");
        let messages = body["messages"].as_array_mut().unwrap();
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": "call_1", "content": "<file>\n00001| PROJECT_3\n</file>"}));
        let request = observed(body);
        assert_eq!(request.last_user_text(), "Read marker.txt");
        assert_eq!(request.tool_results_after_last_user(), vec!["<file>\n00001| PROJECT_3\n</file>".to_owned()]);
        assert_eq!(request.tool_names(), vec!["read", "bash", "skill"]);
        assert!(request.has_tool("skill"));
        assert!(request.system_text().starts_with("You are opencode"));
        assert!(request.wants_usage() && request.stream);
        assert_eq!(request.model.as_deref(), Some("scripted"));
    }

    #[test]
    fn tool_results_before_the_last_user_message_are_answered_already() {
        let body = json!({"messages": [
            {"role": "user", "content": "one"},
            {"role": "tool", "content": "old"},
            {"role": "user", "content": "two"}
        ]});
        assert!(observed(body).tool_results_after_last_user().is_empty());
    }

    #[test]
    fn contains_text_finds_raw_and_json_escaped_text() {
        let request = observed(json!({"messages": [{"role": "user", "content": "say \"hi\"\nthen go"}]}));
        assert!(request.contains_text("then go"));
        assert!(request.contains_text("say \"hi\"\nthen"));
        assert!(!request.contains_text("absent"));
    }
}
