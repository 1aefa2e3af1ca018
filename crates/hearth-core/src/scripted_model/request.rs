//! What the scripted model saw: one recorded request, read through ONE model whichever API it
//! came in — turns of text, images, tool calls and tool results, and the tools offered — so a
//! [`super::Script`] answers OpenCode (chat completions) and Claude Code (Anthropic Messages) alike.
//! The chat-completions reading lives here; the Anthropic one in [`super::anthropic`].

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use serde_json::{Map, Value};

/// The wire API a request came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Api {
    /// OpenAI chat completions (`POST /v1/chat/completions`), as OpenCode speaks it.
    ChatCompletions,
    /// Anthropic Messages (`POST /v1/messages`), as Claude Code speaks it.
    AnthropicMessages,
}

/// Why the agent called the model. Decided from the body alone (see [`classify`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RequestKind {
    /// Title generation: the title agent sends no tools.
    Title,
    /// Native compaction (summarize): no tools, and the prompt asks for a summary to continue from.
    Compaction,
    /// A turn of the agent loop: it carries tools.
    Agent,
}

/// Who speaks in a [`Turn`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Instructions and context from the agent, not the user: system prompts, `role:"system"`
    /// entries among the messages, Claude Code's `<system-reminder>` blocks.
    System,
    User,
    Assistant,
    /// Tool results handed back to the model (and whatever came along with them).
    Tool,
}

/// One image in a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Image<'a> {
    Base64 { media_type: &'a str, data: &'a str },
    Url(&'a str),
}

impl Image<'_> {
    /// The base64 payload of an inline image.
    pub fn base64(&self) -> Option<&str> {
        match self {
            Image::Base64 { data, .. } => Some(data),
            Image::Url(_) => None,
        }
    }
}

/// One piece of a turn. Borrowed from the recorded body wherever the wire allows.
#[derive(Debug, Clone, PartialEq)]
pub enum Part<'a> {
    Text(Cow<'a, str>),
    Image(Image<'a>),
    /// `arguments` is JSON text.
    ToolCall { id: Cow<'a, str>, name: Cow<'a, str>, arguments: Cow<'a, str> },
    ToolResult { id: Cow<'a, str>, output: Cow<'a, str> },
}

/// One message of the conversation, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn<'a> {
    pub role: Role,
    pub parts: Vec<Part<'a>>,
}

impl Turn<'_> {
    /// The text parts joined by newlines.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self.parts.iter().filter_map(|p| if let Part::Text(t) = p { Some(t.as_ref()) } else { None }).collect();
        texts.join("\n")
    }
}

/// One tool offered to the model, with its parameter schema.
#[derive(Debug, Clone, Copy)]
pub struct ToolOffer<'a> {
    pub name: &'a str,
    pub schema: Option<&'a Value>,
}

/// Parameter names that mean the same thing to different agents' tools (OpenCode's `read` takes a
/// `filePath`, Claude Code's `Read` a `file_path`; a skill is `name` to one, `skill` to the other).
const PARAMETER_ALIASES: &[&[&str]] = &[&["filePath", "file_path", "path", "absolute_path"], &["name", "skill"]];

impl ToolOffer<'_> {
    /// Names of the schema's parameters.
    pub fn parameters(&self) -> Vec<&str> {
        self.properties().map(|p| p.keys().map(String::as_str).collect()).unwrap_or_default()
    }

    fn properties(&self) -> Option<&Map<String, Value>> {
        self.schema?.get("properties")?.as_object()
    }

    /// `arguments` (an object) with each key renamed to the parameter this tool's schema calls it,
    /// ignoring case and `_`/`-` (`oldString` → `old_string`) or by [`PARAMETER_ALIASES`]. Keys the
    /// schema does not know (or a tool without a schema) are kept as written.
    pub fn adapt(&self, arguments: Value) -> Value {
        let (Some(properties), Value::Object(given)) = (self.properties(), &arguments) else { return arguments };
        let renamed = given.iter().map(|(key, value)| {
            let name = if properties.contains_key(key) {
                key.clone()
            } else {
                properties.keys().find(|p| same_parameter(p, key)).cloned().unwrap_or_else(|| key.clone())
            };
            (name, value.clone())
        });
        Value::Object(renamed.collect())
    }
}

fn same_parameter(a: &str, b: &str) -> bool {
    let plain = |s: &str| s.chars().filter(|c| *c != '_' && *c != '-').collect::<String>().to_ascii_lowercase();
    plain(a) == plain(b) || PARAMETER_ALIASES.iter().any(|group| group.contains(&a) && group.contains(&b))
}

/// Tool names that do not make a request an agent turn. OpenCode adds `_noop` for proxies that
/// insist on a tools array when the history has tool calls (compaction of such a session).
const PLACEHOLDER_TOOLS: &[&str] = &["_noop"];

/// Classify a body of the given API. Order matters: the title prompt itself mentions "summarizing",
/// so title signals are checked before summary signals.
pub fn classify(api: Api, body: &Value) -> RequestKind {
    classify_parsed(&tools_of(api, body), &turns_of(api, body), output_schema_of(api, body))
}

fn classify_parsed(tools: &[ToolOffer<'_>], turns: &[Turn<'_>], output_schema: Option<&Value>) -> RequestKind {
    if tools.iter().any(|tool| !PLACEHOLDER_TOOLS.contains(&tool.name)) {
        return RequestKind::Agent;
    }
    // Claude Code asks for its title as structured output: `{"title": …}`.
    if output_schema.and_then(|s| s.pointer("/properties/title")).is_some() {
        return RequestKind::Title;
    }
    let system = system_text(turns).to_lowercase();
    let last_user = last_user(turns).map(|t| t.text()).unwrap_or_default().to_lowercase();
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

/// One request as received. Cloning is cheap: the body is shared.
#[derive(Debug, Clone)]
pub struct ObservedRequest {
    /// 1-based arrival order on this server.
    pub seq: u64,
    pub api: Api,
    pub kind: RequestKind,
    /// The agent's session id, from `x-session-id` / `x-session-affinity` (OpenCode) or
    /// `x-claude-code-session-id` (Claude Code).
    pub session_id: Option<String>,
    pub stream: bool,
    pub model: Option<String>,
    /// The parsed body, in its API's shape. Read it through the methods, which are the same for
    /// every API.
    pub body: Arc<Value>,
    /// The body exactly as it arrived.
    pub body_bytes: Bytes,
    pub received_at: Instant,
}

impl ObservedRequest {
    /// A chat-completions request (the server fills `seq` and `session_id`).
    pub fn new(seq: u64, session_id: Option<String>, body: Value, body_bytes: Bytes) -> Self {
        Self::new_for(Api::ChatCompletions, seq, session_id, body, body_bytes)
    }

    /// A request of the given API.
    pub fn new_for(api: Api, seq: u64, session_id: Option<String>, body: Value, body_bytes: Bytes) -> Self {
        let kind = classify(api, &body);
        let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
        let model = body.get("model").and_then(Value::as_str).map(str::to_owned);
        Self { seq, api, kind, session_id, stream, model, body: Arc::new(body), body_bytes, received_at: Instant::now() }
    }

    /// The conversation, in order.
    pub fn turns(&self) -> Vec<Turn<'_>> {
        turns_of(self.api, &self.body)
    }

    /// Text of the last user turn (text parts joined by newlines); empty when there is none.
    pub fn last_user_text(&self) -> String {
        last_user(&self.turns()).map(|t| t.text()).unwrap_or_default()
    }

    /// Text of every user turn, in order.
    pub fn user_texts(&self) -> Vec<String> {
        self.turns().iter().filter(|t| t.role == Role::User).map(Turn::text).collect()
    }

    /// Text of all system turns, joined by newlines.
    pub fn system_text(&self) -> String {
        system_text(&self.turns())
    }

    /// Outputs of the tool results after the last user turn, in order: the results the model has
    /// not answered yet.
    pub fn tool_results_after_last_user(&self) -> Vec<String> {
        let turns = self.turns();
        let start = turns.iter().rposition(|t| t.role == Role::User).map_or(0, |i| i + 1);
        let results = turns[start..].iter().flat_map(|t| &t.parts);
        results.filter_map(|p| if let Part::ToolResult { output, .. } = p { Some(output.to_string()) } else { None }).collect()
    }

    /// Every image in the request, in order (the user's and those returned by tools).
    pub fn images(&self) -> Vec<Image<'_>> {
        let turns = self.turns();
        turns.into_iter().flat_map(|t| t.parts).filter_map(|p| if let Part::Image(image) = p { Some(image) } else { None }).collect()
    }

    /// The tools offered to the model.
    pub fn tools(&self) -> Vec<ToolOffer<'_>> {
        tools_of(self.api, &self.body)
    }

    /// Names of the tools offered to the model.
    pub fn tool_names(&self) -> Vec<String> {
        self.tools().iter().map(|t| t.name.to_owned()).collect()
    }

    /// Whether a tool of exactly this name is offered.
    pub fn has_tool(&self, name: &str) -> bool {
        self.tools().iter().any(|t| t.name == name)
    }

    /// The offered tool with this name, ignoring ASCII case: `read` finds OpenCode's `read` and
    /// Claude Code's `Read`.
    pub fn find_tool(&self, name: &str) -> Option<ToolOffer<'_>> {
        let tools = self.tools();
        tools.iter().find(|t| t.name == name).or_else(|| tools.iter().find(|t| t.name.eq_ignore_ascii_case(name))).copied()
    }

    /// The JSON schema the reply must follow, when the client asks for structured output.
    pub fn output_schema(&self) -> Option<&Value> {
        output_schema_of(self.api, &self.body)
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

    /// Whether the client asked for a final usage chunk in the stream (chat completions).
    pub fn wants_usage(&self) -> bool {
        self.body.pointer("/stream_options/include_usage").and_then(Value::as_bool).unwrap_or(false)
    }
}

fn last_user<'t, 'a>(turns: &'t [Turn<'a>]) -> Option<&'t Turn<'a>> {
    turns.iter().rev().find(|t| t.role == Role::User)
}

fn system_text(turns: &[Turn<'_>]) -> String {
    turns.iter().filter(|t| t.role == Role::System).map(Turn::text).collect::<Vec<_>>().join("\n")
}

fn turns_of(api: Api, body: &Value) -> Vec<Turn<'_>> {
    match api {
        Api::ChatCompletions => chat_turns(body),
        Api::AnthropicMessages => super::anthropic::turns(body),
    }
}

fn tools_of(api: Api, body: &Value) -> Vec<ToolOffer<'_>> {
    let tools = body.get("tools").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    tools.iter().filter_map(|tool| tool_offer(api, tool)).collect()
}

fn tool_offer(api: Api, tool: &Value) -> Option<ToolOffer<'_>> {
    let (name, schema) = match api {
        Api::ChatCompletions => {
            let function = tool.get("function").unwrap_or(tool);
            (function.get("name"), function.get("parameters"))
        }
        Api::AnthropicMessages => (tool.get("name"), tool.get("input_schema")),
    };
    Some(ToolOffer { name: name?.as_str()?, schema })
}

fn output_schema_of(api: Api, body: &Value) -> Option<&Value> {
    match api {
        Api::ChatCompletions => {
            let format = body.get("response_format")?;
            (format.get("type")?.as_str()? == "json_schema").then(|| format.pointer("/json_schema/schema")).flatten()
        }
        Api::AnthropicMessages => super::anthropic::output_schema(body),
    }
}

/// The chat-completions `messages`, one turn each; `developer` counts as system.
fn chat_turns(body: &Value) -> Vec<Turn<'_>> {
    let messages = body.get("messages").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    messages.iter().map(chat_turn).collect()
}

fn chat_turn(message: &Value) -> Turn<'_> {
    let role = match message.get("role").and_then(Value::as_str) {
        Some("system" | "developer") => Role::System,
        Some("assistant") => Role::Assistant,
        Some("tool") => Role::Tool,
        _ => Role::User,
    };
    let content = message.get("content");
    if role == Role::Tool {
        let id = message.get("tool_call_id").and_then(Value::as_str).unwrap_or_default();
        let output = match content {
            Some(Value::String(text)) => Cow::Borrowed(text.as_str()),
            other => Cow::Owned(Turn { role, parts: chat_content(other) }.text()),
        };
        return Turn { role, parts: vec![Part::ToolResult { id: id.into(), output }] };
    }
    let mut parts = chat_content(content);
    let calls = message.get("tool_calls").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    for call in calls {
        let text = |pointer: &str| call.pointer(pointer).and_then(Value::as_str).unwrap_or_default();
        parts.push(Part::ToolCall { id: text("/id").into(), name: text("/function/name").into(), arguments: text("/function/arguments").into() });
    }
    Turn { role, parts }
}

/// `content` is a string or an array of parts: text (or bare strings) and `image_url`s.
fn chat_content(content: Option<&Value>) -> Vec<Part<'_>> {
    match content {
        Some(Value::String(text)) => vec![Part::Text(text.as_str().into())],
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| match part {
                Value::String(text) => Some(Part::Text(text.as_str().into())),
                _ => match part.get("type").and_then(Value::as_str) {
                    Some("image_url") => part.pointer("/image_url/url").or_else(|| part.get("image_url")).and_then(Value::as_str).map(|url| Part::Image(data_url_image(url))),
                    _ => part.get("text").and_then(Value::as_str).map(|text| Part::Text(text.into())),
                },
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// `data:<media type>;base64,<data>` as an inline image; any other URL as it is.
fn data_url_image(url: &str) -> Image<'_> {
    url.strip_prefix("data:")
        .and_then(|rest| rest.split_once(";base64,"))
        .map_or(Image::Url(url), |(media_type, data)| Image::Base64 { media_type, data })
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
        let classify = |body: &Value| classify(Api::ChatCompletions, body);
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
        // A structured-output request for a title is one, whatever the prompt says.
        let schema = json!({"messages": [{"role": "user", "content": "a summary of the day"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "t", "schema": {"type": "object", "properties": {"title": {"type": "string"}}}}}});
        assert_eq!(classify(&schema), RequestKind::Title);
    }

    #[test]
    fn reads_messages_like_opencode_writes_them() {
        let mut body = agent_body("Read marker.txt");
        let messages = body["messages"].as_array_mut().unwrap();
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": "call_1", "content": "<file>\n00001| PROJECT_3\n</file>"}));
        let request = observed(body);
        assert_eq!(request.api, Api::ChatCompletions);
        assert_eq!(request.last_user_text(), "Read marker.txt");
        assert_eq!(request.tool_results_after_last_user(), vec!["<file>\n00001| PROJECT_3\n</file>".to_owned()]);
        assert_eq!(request.tool_names(), vec!["read", "bash", "skill"]);
        assert!(request.has_tool("skill"));
        assert!(request.system_text().starts_with("You are opencode"));
        assert!(request.wants_usage() && request.stream);
        assert_eq!(request.model.as_deref(), Some("scripted"));
        let roles: Vec<Role> = request.turns().iter().map(|t| t.role).collect();
        assert_eq!(roles, [Role::System, Role::User, Role::Assistant, Role::Tool]);
        assert_eq!(request.turns()[2].parts[0], Part::ToolCall { id: "call_1".into(), name: "read".into(), arguments: "{}".into() });
    }

    #[test]
    fn reads_images_from_data_urls() {
        let body = json!({"messages": [{"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}}
        ]}]});
        let request = observed(body);
        assert_eq!(request.images(), vec![Image::Base64 { media_type: "image/png", data: "AAAA" }, Image::Url("https://example.com/x.png")]);
        assert_eq!(request.images()[0].base64(), Some("AAAA"));
        assert_eq!(request.last_user_text(), "look");
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
    fn finds_tools_ignoring_case_and_adapts_arguments_to_their_schema() {
        let claude_read = json!({"type": "function", "function": {"name": "Read", "parameters": {"type": "object",
            "properties": {"file_path": {"type": "string"}, "offset": {"type": "integer"}}}}});
        let edit = json!({"type": "function", "function": {"name": "Edit", "parameters": {"properties": {"file_path": {}, "old_string": {}, "new_string": {}}}}});
        let skill = json!({"type": "function", "function": {"name": "Skill", "parameters": {"properties": {"skill": {}, "args": {}}}}});
        let mut body = agent_body("x");
        body["tools"] = json!([claude_read, edit, skill, tool("read_more")]);
        let request = observed(body);
        let read = request.find_tool("read").unwrap();
        assert_eq!(read.name, "Read");
        assert_eq!(read.parameters(), vec!["file_path", "offset"]);
        assert_eq!(read.adapt(json!({"filePath": "/a"})), json!({"file_path": "/a"}));
        let edit = request.find_tool("edit").unwrap();
        assert_eq!(
            edit.adapt(json!({"filePath": "a", "oldString": "x", "newString": "y"})),
            json!({"file_path": "a", "old_string": "x", "new_string": "y"})
        );
        assert_eq!(request.find_tool("skill").unwrap().adapt(json!({"name": "alpha"})), json!({"skill": "alpha"}));
        // Without a schema the arguments stay as written; an exact name wins over a case-insensitive one.
        assert_eq!(request.find_tool("read_more").unwrap().adapt(json!({"filePath": "a"})), json!({"filePath": "a"}));
        assert!(request.find_tool("bash").is_none());
        assert!(!request.has_tool("read"), "has_tool stays exact");
    }

    #[test]
    fn contains_text_finds_raw_and_json_escaped_text() {
        let request = observed(json!({"messages": [{"role": "user", "content": "say \"hi\"\nthen go"}]}));
        assert!(request.contains_text("then go"));
        assert!(request.contains_text("say \"hi\"\nthen"));
        assert!(!request.contains_text("absent"));
    }
}
