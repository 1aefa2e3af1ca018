//! The OpenAI chat-completions wire format of a reply (the Anthropic one is in [`super::anthropic`]): SSE chunks for `stream: true`, one
//! `chat.completion` object otherwise. Tool calls are streamed the way OpenCode's
//! `@ai-sdk/openai-compatible` provider accepts them: name first, then argument pieces.

use serde_json::{json, Value};

use super::request::ObservedRequest;

/// At most this many content deltas per streamed text (long texts are cut in this many pieces).
pub const MAX_TEXT_DELTAS: usize = 3;
/// Streamed tool arguments are sent in this many pieces at most.
pub const MAX_ARGUMENT_DELTAS: usize = 2;
/// Rough bytes per token for the usage the scripted model reports.
pub(super) const BYTES_PER_TOKEN: usize = 4;

/// What a model message carries, before encoding.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Text(String),
    ToolCall { id: String, name: String, arguments: String },
}

impl Message {
    fn finish_reason(&self) -> &'static str {
        match self {
            Message::Text(_) => "stop",
            Message::ToolCall { .. } => "tool_calls",
        }
    }

    pub(super) fn output_len(&self) -> usize {
        match self {
            Message::Text(text) => text.len(),
            Message::ToolCall { name, arguments, .. } => name.len() + arguments.len(),
        }
    }
}

/// Identity of one completion: shared by all its chunks.
struct Envelope<'a> {
    id: String,
    model: &'a str,
    created: u64,
}

impl<'a> Envelope<'a> {
    fn new(request: &'a ObservedRequest, default_model: &'a str) -> Self {
        let created = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        Self { id: format!("chatcmpl-scripted-{}", request.seq), model: request.model.as_deref().unwrap_or(default_model), created }
    }

    fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> Value {
        json!({"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})
    }
}

fn usage(request: &ObservedRequest, message: &Message) -> Value {
    let prompt = request.body_bytes.len().div_ceil(BYTES_PER_TOKEN);
    let completion = message.output_len().div_ceil(BYTES_PER_TOKEN).max(1);
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})
}

/// Cut `text` into at most `pieces` non-empty parts on character boundaries.
pub(super) fn split(text: &str, pieces: usize) -> Vec<&str> {
    let chars = text.chars().count();
    if chars == 0 {
        return vec![text];
    }
    let per = chars.div_ceil(pieces.max(1));
    let mut parts = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let cut = rest.char_indices().nth(per).map_or(rest.len(), |(i, _)| i);
        parts.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    parts
}

/// The SSE events of a streamed completion, each a full `data: …\n\n` line, ending with `[DONE]`.
pub fn stream_events(request: &ObservedRequest, message: &Message, default_model: &str) -> Vec<String> {
    stream_events_in(request, message, MAX_TEXT_DELTAS, default_model)
}

/// [`stream_events`] with the text cut into at most `deltas` deltas.
pub fn stream_events_in(request: &ObservedRequest, message: &Message, deltas: usize, default_model: &str) -> Vec<String> {
    events_with_pieces(request, message, &text_pieces(message, deltas), default_model)
}

/// A message's text in at most `deltas` pieces (a tool call streams none), for either protocol.
pub(super) fn text_pieces(message: &Message, deltas: usize) -> Vec<&str> {
    match message {
        Message::Text(text) => split(text, deltas),
        Message::ToolCall { .. } => Vec::new(),
    }
}

/// A text streamed as `before` then `after`: the events up to and including the `before` delta, and
/// the rest.
pub fn paused_events(request: &ObservedRequest, before: &str, after: &str, default_model: &str) -> (Vec<String>, Vec<String>) {
    let mut head = events_with_pieces(request, &Message::Text(format!("{before}{after}")), &[before, after], default_model);
    let tail = head.split_off(1);
    (head, tail)
}

fn events_with_pieces(request: &ObservedRequest, message: &Message, pieces: &[&str], default_model: &str) -> Vec<String> {
    let envelope = Envelope::new(request, default_model);
    let mut chunks = Vec::new();
    match message {
        Message::Text(_) => {
            for (i, piece) in pieces.iter().enumerate() {
                let delta = if i == 0 { json!({"role": "assistant", "content": piece}) } else { json!({"content": piece}) };
                chunks.push(envelope.chunk(delta, None));
            }
        }
        Message::ToolCall { id, name, arguments } => {
            let head = json!({"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}});
            chunks.push(envelope.chunk(json!({"role": "assistant", "content": null, "tool_calls": [head]}), None));
            for piece in split(arguments, MAX_ARGUMENT_DELTAS) {
                let part = json!({"index": 0, "function": {"arguments": piece}});
                chunks.push(envelope.chunk(json!({"tool_calls": [part]}), None));
            }
        }
    }
    chunks.push(envelope.chunk(json!({}), Some(message.finish_reason())));
    if request.wants_usage() {
        let mut last = envelope.chunk(json!({}), None);
        last["choices"] = json!([]);
        last["usage"] = usage(request, message);
        chunks.push(last);
    }
    let mut events: Vec<String> = chunks.iter().map(|chunk| format!("data: {chunk}\n\n")).collect();
    events.push("data: [DONE]\n\n".to_owned());
    events
}

/// The `chat.completion` object of a non-streamed completion.
pub fn completion(request: &ObservedRequest, message: &Message, default_model: &str) -> Value {
    let envelope = Envelope::new(request, default_model);
    let assistant = match message {
        Message::Text(text) => json!({"role": "assistant", "content": text}),
        Message::ToolCall { id, name, arguments } => json!({"role": "assistant", "content": null,
            "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}]}),
    };
    json!({"id": envelope.id, "object": "chat.completion", "created": envelope.created, "model": envelope.model,
        "choices": [{"index": 0, "message": assistant, "finish_reason": message.finish_reason()}],
        "usage": usage(request, message)})
}

#[cfg(test)]
mod tests {
    use super::super::request::tests::agent_body;
    use super::*;

    fn observed() -> ObservedRequest {
        let body = agent_body("hi");
        let bytes = serde_json::to_vec(&body).unwrap().into();
        ObservedRequest::new(7, None, body, bytes)
    }

    fn parse(events: &[String]) -> Vec<Value> {
        assert_eq!(events.last().map(String::as_str), Some("data: [DONE]\n\n"));
        events[..events.len() - 1]
            .iter()
            .map(|e| serde_json::from_str(e.strip_prefix("data: ").unwrap().strip_suffix("\n\n").unwrap()).unwrap())
            .collect()
    }

    #[test]
    fn splits_on_char_boundaries() {
        assert_eq!(split("héllo wörld", 3).concat(), "héllo wörld");
        assert!(split("héllo wörld", 3).len() <= 3);
        assert_eq!(split("", 3), vec![""]);
        assert_eq!(split("ab", 3), vec!["a", "b"]);
    }

    #[test]
    fn text_streams_in_deltas_then_stop_then_usage() {
        let chunks = parse(&stream_events(&observed(), &Message::Text("PROJECT_1 is the answer".into()), "scripted"));
        let text: String = chunks.iter().filter_map(|c| c.pointer("/choices/0/delta/content")?.as_str()).collect();
        assert_eq!(text, "PROJECT_1 is the answer");
        assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
        let finish = &chunks[chunks.len() - 2];
        assert_eq!(finish["choices"][0]["finish_reason"], "stop");
        let usage = &chunks[chunks.len() - 1];
        assert!(usage["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
        assert_eq!(usage["choices"], json!([]));
        assert!(chunks.iter().all(|c| c["object"] == "chat.completion.chunk" && c["id"] == "chatcmpl-scripted-7"));
    }

    #[test]
    fn tool_call_streams_name_first_then_arguments() {
        let message = Message::ToolCall { id: "call_1".into(), name: "read".into(), arguments: r#"{"filePath":"marker.txt"}"#.into() };
        let chunks = parse(&stream_events(&observed(), &message, "scripted"));
        let head = &chunks[0]["choices"][0]["delta"]["tool_calls"][0];
        assert_eq!(head, &json!({"index": 0, "id": "call_1", "type": "function", "function": {"name": "read", "arguments": ""}}));
        let arguments: String =
            chunks.iter().skip(1).filter_map(|c| c.pointer("/choices/0/delta/tool_calls/0/function/arguments")?.as_str()).collect();
        assert_eq!(arguments, r#"{"filePath":"marker.txt"}"#);
        assert_eq!(chunks[chunks.len() - 2]["choices"][0]["finish_reason"], "tool_calls");
    }

    #[test]
    fn non_streamed_completion() {
        let value = completion(&observed(), &Message::Text("hello".into()), "scripted");
        assert_eq!(value["object"], "chat.completion");
        assert_eq!(value["choices"][0]["message"]["content"], "hello");
        assert_eq!(value["choices"][0]["finish_reason"], "stop");
    }
}
