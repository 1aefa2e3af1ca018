//! The Anthropic Messages API, as Claude Code speaks it: reading a request into the one request
//! model ([`super::request`]), and writing a reply as Messages SSE events (or one message object).
//!
//! Reading: the top-level `system` and any `role:"system"` entries among the `messages` (Claude
//! Code puts its environment block there) and `<system-reminder>` text blocks become system turns,
//! not user turns, so "the last user turn" is what the user typed. A user message carrying
//! `tool_result` blocks is a tool turn. Writing: `message_start`, one content block (text deltas,
//! or a `tool_use` with `input_json_delta` pieces), `message_delta` with the stop reason,
//! `message_stop`.

use std::borrow::Cow;

use serde_json::{json, Value};

use super::request::{Image, ObservedRequest, Part, Role, Turn};
use super::wire::{split, Message, BYTES_PER_TOKEN, MAX_ARGUMENT_DELTAS, MAX_TEXT_DELTAS};

/// The reply's tool-use id for request `seq` of server `instance` (Claude Code echoes it back in the
/// `tool_result`).
pub(super) fn tool_use_id(instance: &str, seq: u64) -> String {
    format!("toolu_scripted_{instance}_{seq}")
}

// ---- Reading ----

pub(super) fn turns(body: &Value) -> Vec<Turn<'_>> {
    let mut turns = Vec::new();
    if let Some(system) = body.get("system") {
        let parts = text_blocks(system);
        if !parts.is_empty() {
            turns.push(Turn { role: Role::System, parts });
        }
    }
    let messages = body.get("messages").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    for message in messages {
        let content = message.get("content");
        match message.get("role").and_then(Value::as_str) {
            Some("system") => turns.push(Turn { role: Role::System, parts: content.map(text_blocks).unwrap_or_default() }),
            Some("assistant") => turns.push(Turn { role: Role::Assistant, parts: assistant_parts(content) }),
            _ => user_turns(content, &mut turns),
        }
    }
    turns
}

/// The JSON schema of a structured-output request (`output_config.format`, or the older
/// `output_format`).
pub(super) fn output_schema(body: &Value) -> Option<&Value> {
    let format = body.pointer("/output_config/format").or_else(|| body.get("output_format"))?;
    (format.get("type")?.as_str()? == "json_schema").then(|| format.get("schema")).flatten()
}

/// `content` as a list of blocks (a string is one text block).
fn blocks(content: Option<&Value>) -> &[Value] {
    match content {
        Some(Value::Array(blocks)) => blocks,
        Some(text @ Value::String(_)) => std::slice::from_ref(text),
        _ => &[],
    }
}

fn block_text(block: &Value) -> Option<&str> {
    match block {
        Value::String(text) => Some(text),
        _ if block.get("type").and_then(Value::as_str) == Some("text") => block.get("text").and_then(Value::as_str),
        _ => None,
    }
}

fn text_blocks(content: &Value) -> Vec<Part<'_>> {
    blocks(Some(content)).iter().filter_map(block_text).map(|text| Part::Text(text.into())).collect()
}

fn is_system_reminder(text: &str) -> bool {
    let text = text.trim();
    text.starts_with("<system-reminder>") && text.ends_with("</system-reminder>")
}

fn image(block: &Value) -> Option<Image<'_>> {
    let source = block.get("source")?;
    let text = |key: &str| source.get(key).and_then(Value::as_str);
    match text("type")? {
        "base64" => Some(Image::Base64 { media_type: text("media_type").unwrap_or_default(), data: text("data")? }),
        "url" => Some(Image::Url(text("url")?)),
        _ => None,
    }
}

/// One user message: its reminders as a system turn, the rest as a user turn — or a tool turn when
/// it hands back tool results.
fn user_turns<'a>(content: Option<&'a Value>, turns: &mut Vec<Turn<'a>>) {
    let (mut reminders, mut parts, mut results) = (Vec::new(), Vec::new(), false);
    for block in blocks(content) {
        if let Some(text) = block_text(block) {
            if is_system_reminder(text) { &mut reminders } else { &mut parts }.push(Part::Text(text.into()));
            continue;
        }
        match block.get("type").and_then(Value::as_str) {
            Some("image") => parts.extend(image(block).map(Part::Image)),
            Some("tool_result") => {
                results = true;
                let id = block.get("tool_use_id").and_then(Value::as_str).unwrap_or_default();
                let inner = block.get("content");
                let output = match inner {
                    Some(Value::String(text)) => Cow::Borrowed(text.as_str()),
                    _ => Cow::Owned(blocks(inner).iter().filter_map(block_text).collect::<Vec<_>>().join("\n")),
                };
                parts.push(Part::ToolResult { id: id.into(), output });
                parts.extend(blocks(inner).iter().filter_map(image).map(Part::Image));
            }
            _ => {}
        }
    }
    if !reminders.is_empty() {
        turns.push(Turn { role: Role::System, parts: reminders });
    }
    if !parts.is_empty() {
        turns.push(Turn { role: if results { Role::Tool } else { Role::User }, parts });
    }
}

fn assistant_parts(content: Option<&Value>) -> Vec<Part<'_>> {
    blocks(content).iter().filter_map(assistant_part).collect()
}

fn assistant_part(block: &Value) -> Option<Part<'_>> {
    if let Some(text) = block_text(block) {
        return Some(Part::Text(text.into()));
    }
    if block.get("type").and_then(Value::as_str) != Some("tool_use") {
        return None; // thinking and other blocks say nothing a script reads
    }
    let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
    let arguments = block.get("input").map_or_else(|| "{}".to_owned(), Value::to_string);
    Some(Part::ToolCall { id: text("id").into(), name: text("name").into(), arguments: arguments.into() })
}

// ---- Writing ----

fn stop_reason(message: &Message) -> &'static str {
    match message {
        Message::Text(_) => "end_turn",
        Message::ToolCall { .. } => "tool_use",
    }
}

fn input_tokens(request: &ObservedRequest) -> usize {
    request.body_bytes.len().div_ceil(BYTES_PER_TOKEN)
}

fn output_tokens(message: &Message) -> usize {
    message.output_len().div_ceil(BYTES_PER_TOKEN).max(1)
}

fn event(value: Value) -> String {
    let kind = value.get("type").and_then(Value::as_str).unwrap_or("message").to_owned();
    format!("event: {kind}\ndata: {value}\n\n")
}

/// The SSE events of a streamed reply, each a full `event: …\ndata: …\n\n`.
pub fn stream_events(request: &ObservedRequest, message: &Message, default_model: &str) -> Vec<String> {
    stream_events_in(request, message, MAX_TEXT_DELTAS, default_model)
}

/// [`stream_events`] with the text cut into at most `deltas` deltas.
pub fn stream_events_in(request: &ObservedRequest, message: &Message, deltas: usize, default_model: &str) -> Vec<String> {
    events_with_pieces(request, message, &super::wire::text_pieces(message, deltas), default_model)
}

/// A text streamed as `before` then `after`: the events up to and including the `before` delta, and
/// the rest.
pub fn paused_events(request: &ObservedRequest, before: &str, after: &str, default_model: &str) -> (Vec<String>, Vec<String>) {
    let mut head = events_with_pieces(request, &Message::Text(format!("{before}{after}")), &[before, after], default_model);
    // message_start, content_block_start, the first delta.
    let tail = head.split_off(3);
    (head, tail)
}

fn events_with_pieces(request: &ObservedRequest, message: &Message, pieces: &[&str], default_model: &str) -> Vec<String> {
    let model = request.model.as_deref().unwrap_or(default_model);
    let usage = json!({"input_tokens": input_tokens(request), "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0});
    let mut events = vec![json!({"type": "message_start", "message": {"id": format!("msg_scripted_{}", request.seq), "type": "message",
        "role": "assistant", "model": model, "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage}})];
    match message {
        Message::Text(_) => {
            events.push(json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}));
            for piece in pieces {
                events.push(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}));
            }
        }
        Message::ToolCall { id, name, arguments } => {
            events.push(json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}));
            for piece in split(arguments, MAX_ARGUMENT_DELTAS) {
                events.push(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": piece}}));
            }
        }
    }
    events.push(json!({"type": "content_block_stop", "index": 0}));
    events.push(json!({"type": "message_delta", "delta": {"stop_reason": stop_reason(message), "stop_sequence": null},
        "usage": {"output_tokens": output_tokens(message)}}));
    events.push(json!({"type": "message_stop"}));
    events.into_iter().map(event).collect()
}

/// The message object of a reply that is not streamed.
pub fn message_object(request: &ObservedRequest, message: &Message, default_model: &str) -> Value {
    let content = match message {
        Message::Text(text) => json!([{"type": "text", "text": text}]),
        Message::ToolCall { id, name, arguments } => {
            let input = serde_json::from_str::<Value>(arguments).unwrap_or_else(|_| json!({}));
            json!([{"type": "tool_use", "id": id, "name": name, "input": input}])
        }
    };
    json!({"id": format!("msg_scripted_{}", request.seq), "type": "message", "role": "assistant",
        "model": request.model.as_deref().unwrap_or(default_model), "content": content,
        "stop_reason": stop_reason(message), "stop_sequence": null,
        "usage": {"input_tokens": input_tokens(request), "output_tokens": output_tokens(message)}})
}

/// `count_tokens`: a rough count from the body's size.
pub fn token_count(body_bytes: usize) -> Value {
    json!({"input_tokens": body_bytes.div_ceil(BYTES_PER_TOKEN)})
}

/// An Anthropic-shaped error body (`type` is e.g. `authentication_error`).
pub fn error_body(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::request::{Api, RequestKind};
    use super::*;
    use bytes::Bytes;

    pub(crate) const PNG_A: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

    fn tool(name: &str, properties: Value) -> Value {
        json!({"name": name, "description": "", "input_schema": {"type": "object", "properties": properties}})
    }

    /// Shaped like Claude Code 2.1's main request: billing and agent system blocks, the prompt after
    /// a reminder, then the environment as a `role:"system"` entry.
    pub(crate) fn claude_body(prompt: &str) -> Value {
        json!({"model": "claude-opus-5-5", "max_tokens": 128000, "stream": true, "thinking": {"type": "adaptive"},
            "output_config": {"effort": "medium"},
            "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.318"}, {"type": "text", "text": "You are a Claude agent, built on Anthropic's Claude Agent SDK."}],
            "tools": [tool("Bash", json!({"command": {}, "description": {}})), tool("Read", json!({"file_path": {}, "offset": {}})),
                      tool("Skill", json!({"skill": {}, "args": {}})), tool("Write", json!({"file_path": {}, "content": {}})),
                      tool("Edit", json!({"file_path": {}, "old_string": {}, "new_string": {}})),
                      tool("mcp__hearth__knowledge_search", json!({"query": {}}))],
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "<system-reminder>\nRead the attribution rules before you commit.\n</system-reminder>\n"},
                    {"type": "text", "text": prompt}]},
                {"role": "system", "content": [{"type": "text", "text": "# Environment\n - Primary working directory: /work/p"}]}
            ]})
    }

    /// Claude Code's title request: no tools, structured output `{title}`.
    pub(crate) fn claude_title_body(prompt: &str) -> Value {
        json!({"model": "claude-opus-5-5", "max_tokens": 128000, "stream": true, "tools": [],
            "system": [{"type": "text", "text": "You are naming a coding session so the user can pick it out of a long list."}],
            "output_config": {"effort": "medium", "format": {"type": "json_schema", "schema": {"type": "object",
                "properties": {"title": {"type": "string"}}, "required": ["title"], "additionalProperties": false}}},
            "messages": [{"role": "user", "content": [{"type": "text", "text": format!("<session>\n{prompt}\n</session>\n\nWrite the title in the predominant language of the session.")}]}]})
    }

    /// `body` with the model's tool call and its result appended, as Claude Code sends them back.
    pub(crate) fn with_tool_result(mut body: Value, name: &str, output: Value) -> Value {
        let messages = body["messages"].as_array_mut().unwrap();
        let id = format!("toolu_{}", messages.len());
        messages.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": name, "input": {"file_path": "/work/p/marker.txt"}}]}));
        messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": output, "cache_control": {"type": "ephemeral"}}]}));
        body
    }

    pub(crate) fn observed(body: Value) -> ObservedRequest {
        let bytes = Bytes::from(serde_json::to_vec(&body).unwrap());
        ObservedRequest::new_for(Api::AnthropicMessages, 5, Some("ses_c".into()), body, bytes)
    }

    #[test]
    fn reads_a_claude_request_into_the_one_model() {
        let request = observed(claude_body("read marker.txt"));
        assert_eq!(request.kind, RequestKind::Agent);
        assert_eq!(request.last_user_text(), "read marker.txt", "the reminder is no user text");
        let system = request.system_text();
        assert!(system.contains("Claude Agent SDK") && system.contains("Primary working directory: /work/p") && system.contains("attribution rules"), "{system}");
        assert_eq!(request.tool_names(), ["Bash", "Read", "Skill", "Write", "Edit", "mcp__hearth__knowledge_search"]);
        assert_eq!(request.find_tool("read").unwrap().parameters(), ["file_path", "offset"]);
        assert!(request.tool_results_after_last_user().is_empty());
        assert!(request.stream);
        assert_eq!(request.model.as_deref(), Some("claude-opus-5-5"));
    }

    #[test]
    fn system_entries_in_messages_are_skipped_as_turns() {
        // The environment entry comes after the prompt; it must not hide the prompt or the results.
        let mut body = with_tool_result(claude_body("read marker.txt"), "Read", json!("1\tPROJECT_9\n"));
        body["messages"].as_array_mut().unwrap().push(json!({"role": "system", "content": "late context"}));
        let request = observed(body);
        let roles: Vec<Role> = request.turns().iter().map(|t| t.role).collect();
        assert_eq!(roles, [Role::System, Role::System, Role::User, Role::System, Role::Assistant, Role::Tool, Role::System]);
        assert_eq!(request.last_user_text(), "read marker.txt");
        assert!(request.user_texts().iter().all(|t| !t.contains("Environment") && !t.contains("late context")));
    }

    #[test]
    fn tool_results_come_back_as_the_last_tool_turn() {
        let blocks = json!([{"type": "text", "text": "1\tPROJECT_9"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_A}}]);
        let request = observed(with_tool_result(claude_body("read marker.txt"), "Read", blocks));
        assert_eq!(request.tool_results_after_last_user(), ["1\tPROJECT_9"]);
        let turns = request.turns();
        let call = turns.iter().find(|t| t.role == Role::Assistant).unwrap();
        assert_eq!(call.parts, [Part::ToolCall { id: "toolu_2".into(), name: "Read".into(), arguments: r#"{"file_path":"/work/p/marker.txt"}"#.into() }]);
        assert_eq!(request.images(), [Image::Base64 { media_type: "image/png", data: PNG_A }], "an image a tool returned");
    }

    #[test]
    fn images_are_recorded_per_request() {
        let mut body = claude_body("what is in this picture?");
        body["messages"][0]["content"].as_array_mut().unwrap().push(json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_A}}));
        let request = observed(body);
        assert_eq!(request.images(), [Image::Base64 { media_type: "image/png", data: PNG_A }]);
        assert!(request.contains_text(PNG_A));
        assert_eq!(request.last_user_text(), "what is in this picture?");
        assert!(observed(claude_body("no picture")).images().is_empty());
    }

    #[test]
    fn the_title_request_asks_for_json() {
        let request = observed(claude_title_body("read marker.txt"));
        assert_eq!(request.kind, RequestKind::Title);
        assert!(request.output_schema().unwrap().pointer("/properties/title").is_some());
        assert!(observed(claude_body("x")).output_schema().is_none());
    }

    /// Parse SSE text back into (event name, data) pairs, checking each event names its data's type.
    pub(crate) fn parse_events(text: &str) -> Vec<Value> {
        text.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let (name, data) = e.strip_prefix("event: ").unwrap().split_once("\ndata: ").unwrap();
                let data: Value = serde_json::from_str(data).unwrap();
                assert_eq!(data["type"], name);
                data
            })
            .collect()
    }

    /// The reply the events carry: its text, or its tool call (name, input), and stop reason.
    pub(crate) fn reassemble(events: &[Value]) -> (String, Option<(String, Value)>, String) {
        let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(types.first(), Some(&"message_start"));
        assert_eq!(&types[types.len() - 3..], ["content_block_stop", "message_delta", "message_stop"]);
        let text = events.iter().filter_map(|e| e.pointer("/delta/text")?.as_str()).collect();
        let json: String = events.iter().filter_map(|e| e.pointer("/delta/partial_json")?.as_str()).collect();
        let call = events.iter().find_map(|e| {
            let block = e.get("content_block").filter(|b| b["type"] == "tool_use")?;
            Some((block["name"].as_str()?.to_owned(), serde_json::from_str(&json).unwrap()))
        });
        let stop = events[events.len() - 2]["delta"]["stop_reason"].as_str().unwrap().to_owned();
        (text, call, stop)
    }

    #[test]
    fn streamed_events_parse_back_into_the_same_reply() {
        let request = observed(claude_body("hi"));
        let text = Message::Text("PROJECT_1 is the answer".into());
        let events = parse_events(&stream_events(&request, &text, "scripted").concat());
        assert_eq!(reassemble(&events), ("PROJECT_1 is the answer".into(), None, "end_turn".into()));
        assert!(events.iter().filter(|e| e.pointer("/delta/text").is_some()).count() > 1, "streamed in deltas");
        assert_eq!(events[0]["message"]["id"], "msg_scripted_5");
        assert_eq!(events[0]["message"]["model"], "claude-opus-5-5");
        assert!(events[0]["message"]["usage"]["input_tokens"].as_u64().unwrap() > 0);

        let call = Message::ToolCall { id: tool_use_id("a1b2c3d4", 5), name: "Read".into(), arguments: r#"{"file_path":"/work/p/marker.txt"}"#.into() };
        let events = parse_events(&stream_events(&request, &call, "scripted").concat());
        assert_eq!(reassemble(&events), (String::new(), Some(("Read".into(), json!({"file_path": "/work/p/marker.txt"}))), "tool_use".into()));
        assert_eq!(events[1]["content_block"]["id"], "toolu_scripted_a1b2c3d4_5");
        assert_eq!(events[1]["content_block"]["input"], json!({}));

        let (head, tail) = paused_events(&request, "first half, ", "second half", "scripted");
        assert_eq!(parse_events(&head.concat()).last().unwrap()["delta"]["text"], "first half, ");
        assert_eq!(reassemble(&parse_events(&(head.concat() + &tail.concat()))).0, "first half, second half");
    }

    #[test]
    fn a_reply_not_streamed_is_one_message() {
        let request = observed(claude_body("hi"));
        let call = Message::ToolCall { id: "toolu_1".into(), name: "Read".into(), arguments: r#"{"file_path":"/a"}"#.into() };
        let value = message_object(&request, &call, "scripted");
        assert_eq!(value["content"][0], json!({"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/a"}}));
        assert_eq!(value["stop_reason"], "tool_use");
        assert_eq!(message_object(&request, &Message::Text("hey".into()), "scripted")["content"][0]["text"], "hey");
    }
}
