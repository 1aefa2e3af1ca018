//! What the scripted model answers. A [`Script`] maps each observed request to a [`Reply`]; the
//! default script is the read-a-marker agent of the runtime reuse test, made general.

use std::fmt;
use std::sync::Arc;

use serde_json::json;

use super::request::{ObservedRequest, RequestKind};

/// Longest prompt or tool-output excerpt echoed back in a default reply, in characters.
pub const MAX_ECHO_CHARS: usize = 200;
/// Longest generated title, in characters (OpenCode's own title prompt asks for at most 50).
pub const MAX_TITLE_CHARS: usize = 50;
/// Every default compaction summary starts with this, so callers can find it.
pub const SUMMARY_PREFIX: &str = "CONTEXT_SUMMARY";

/// One answer of the model.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Assistant text, finish reason `stop`.
    Text(String),
    /// One function call, finish reason `tool_calls`.
    ToolCall { name: String, arguments: serde_json::Value },
    /// A bare HTTP status, as a failing provider would send (body sent as is).
    Status { code: u16, body: String },
    /// Assistant text streamed in two halves, the second only once `gate` opens: a reply caught in
    /// the middle of its text.
    PausedText { before: String, after: String, gate: Gate },
    /// Assistant text streamed as `pieces` deltas, each after a pause of `every`: a long reply
    /// arriving at a steady pace.
    Paced { text: String, pieces: usize, every: std::time::Duration },
    /// Close the connection without answering.
    Drop,
}

/// Opened once by a test; a paused reply waits for it.
#[derive(Debug, Clone)]
pub struct Gate(Arc<tokio::sync::watch::Sender<bool>>);

impl Gate {
    pub fn new() -> Self {
        Self(Arc::new(tokio::sync::watch::channel(false).0))
    }

    pub fn open(&self) {
        self.0.send_replace(true);
    }

    pub async fn opened(&self) {
        let mut rx = self.0.subscribe();
        let _ = rx.wait_for(|open| *open).await;
    }
}

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for Gate {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Reply {
    pub fn text(text: impl Into<String>) -> Self {
        Reply::Text(text.into())
    }

    pub fn tool_call(name: impl Into<String>, arguments: serde_json::Value) -> Self {
        Reply::ToolCall { name: name.into(), arguments }
    }
}

type ScriptFn = dyn Fn(&ObservedRequest) -> Reply + Send + Sync + 'static;

/// Decides the reply to each request. Called once per request, after any hold is released, possibly
/// from many requests at once.
#[derive(Clone)]
pub struct Script(Arc<ScriptFn>);

impl Script {
    /// The built-in behaviour: see [`default_reply`].
    pub fn default_agent() -> Self {
        Script(Arc::new(default_reply))
    }

    /// Any function of the observed request; fall back to [`default_reply`] for what it doesn't script.
    pub fn custom(f: impl Fn(&ObservedRequest) -> Reply + Send + Sync + 'static) -> Self {
        Script(Arc::new(f))
    }

    pub fn reply(&self, request: &ObservedRequest) -> Reply {
        (self.0)(request)
    }
}

impl Default for Script {
    fn default() -> Self {
        Script::default_agent()
    }
}

impl fmt::Debug for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Script(..)")
    }
}

/// The default script, for any agent: tools are found by name ignoring case (OpenCode's `read`,
/// Claude Code's `Read`) and their arguments named as the tool's schema names them
/// ([`super::ToolOffer::adapt`]):
/// - title → a short title from the prompt (as JSON `{"title": …}` when the request asks for that
///   structure);
/// - compaction → a summary starting with [`SUMMARY_PREFIX`];
/// - agent asked to `write`, `edit` or `plan:` (see [`super::edits`]) → those tool calls, one per
///   step, then a sentence saying what it did;
/// - agent with unanswered tool results → the first `PROJECT_<n>` marker in them, exactly, else a
///   sentence quoting the output;
/// - agent asked to `read <path>` (with a `read` tool offered) → call it with `{"filePath": path}`;
/// - "reply with the single word: X" (a connection check) → X;
/// - "search knowledge for X" with a `…knowledge_search` tool offered (OpenCode names it
///   `hearth_knowledge_search`, Claude Code `mcp__hearth__knowledge_search`) → call it with
///   `{"query": X}`;
/// - "use skill X" with the agent's `skill` tool offered → call it with `{"name": X}`;
/// - otherwise → a deterministic reply echoing the prompt.
pub fn default_reply(request: &ObservedRequest) -> Reply {
    // A connection check ("Reply with the single word: ready") gets exactly that word.
    if let Some(word) = request.last_user_text().to_ascii_lowercase().split("reply with the single word:").nth(1).and_then(|r| r.split_whitespace().next().map(str::to_owned)) {
        if request.kind != RequestKind::Compaction {
            return Reply::Text(word.trim_end_matches(['.', '!']).to_owned());
        }
    }
    match request.kind {
        RequestKind::Title => {
            let title = title_for(&request.last_user_text());
            let structured = request.output_schema().is_some_and(|schema| schema.pointer("/properties/title").is_some());
            Reply::Text(if structured { json!({ "title": title }).to_string() } else { title })
        }
        RequestKind::Compaction => Reply::Text(summary_for(request)),
        RequestKind::Agent => {
            if let Some(reply) = super::edits::edit_reply(request) {
                return reply;
            }
            let results = request.tool_results_after_last_user();
            if !results.is_empty() {
                let joined = results.join("\n");
                return Reply::Text(match find_marker(&joined) {
                    Some(marker) => marker.to_owned(),
                    None => format!("The tool returned: {}", excerpt(results.last().map_or("", String::as_str))),
                });
            }
            let prompt = request.last_user_text();
            // "search knowledge for <words>": the knowledge tool the gateway exposes, if granted.
            if let Some(query) = prompt.to_ascii_lowercase().split("search knowledge for").nth(1).map(|q| q.trim().trim_end_matches(['.', '?', '!']).to_string()) {
                if let Some(tool) = request.tools().into_iter().find(|t| t.name.ends_with("knowledge_search")) {
                    return Reply::tool_call(tool.name, tool.adapt(json!({ "query": query })));
                }
            }
            if let Some(kib) = super::long_reply::long_reply_request(&prompt) {
                return super::long_reply::long_reply(kib);
            }
            if let Some((name, tool)) = skill_request(&prompt).zip(request.find_tool("skill")) {
                return Reply::tool_call(tool.name, tool.adapt(json!({ "name": name })));
            }
            match read_request(&prompt).zip(request.find_tool("read")) {
                Some((path, tool)) => Reply::tool_call(tool.name, tool.adapt(json!({ "filePath": path }))),
                None => Reply::Text(format!("Scripted reply to: {}", excerpt(&prompt))),
            }
        }
    }
}

/// The path in a `read <path>` request (case-insensitive `read` as a whole word), without wrapping
/// quotes or trailing sentence punctuation.
pub fn read_request(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let mut from = 0;
    while let Some(found) = lower[from..].find("read") {
        let start = from + found;
        let end = start + "read".len();
        from = end;
        let word_start = lower[..start].chars().next_back().is_none_or(|c| !c.is_alphanumeric());
        let rest = &text[end..];
        if !word_start || !rest.starts_with(char::is_whitespace) {
            continue;
        }
        let token = rest.split_whitespace().next().unwrap_or_default();
        let path = token
            .trim_start_matches(['"', '\'', '`', '('])
            .trim_end_matches(['"', '\'', '`', ')', '.', ',', ';', ':', '!', '?']);
        if !path.is_empty() {
            return Some(path.to_owned());
        }
    }
    None
}

/// The skill named in a `use skill <name>` request (case-insensitive), without wrapping quotes or
/// trailing punctuation.
pub fn skill_request(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let at = lower.find("use skill ")? + "use skill ".len();
    let token = text[at..].split_whitespace().next()?;
    let name = token.trim_matches(['"', '\'', '`']).trim_end_matches(['.', ',', ';', ':', '!', '?', '"', '\'', '`']);
    (!name.is_empty()).then(|| name.to_owned())
}

/// The first `PROJECT_<digits>` marker in `text`.
pub fn find_marker(text: &str) -> Option<&str> {
    const PREFIX: &str = "PROJECT_";
    let mut from = 0;
    while let Some(found) = text[from..].find(PREFIX) {
        let start = from + found;
        let digits = text[start + PREFIX.len()..].bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 {
            return Some(&text[start..start + PREFIX.len() + digits]);
        }
        from = start + PREFIX.len();
    }
    None
}

fn title_for(prompt: &str) -> String {
    // Claude Code wraps the prompt in `<session>` … `</session>`: skip lines that are a lone tag.
    let lone_tag = |line: &str| line.starts_with('<') && line.ends_with('>') && !line.contains(char::is_whitespace);
    let line = prompt.lines().map(str::trim).find(|line| !line.is_empty() && !lone_tag(line)).unwrap_or_default();
    let words = line.split_whitespace().collect::<Vec<_>>().join(" ");
    let title = truncate_chars(&words, MAX_TITLE_CHARS);
    if title.is_empty() {
        "Scripted conversation".to_owned()
    } else {
        title
    }
}

fn summary_for(request: &ObservedRequest) -> String {
    // The last user message is the compaction prompt itself; summarise the one before it.
    let users = request.user_texts();
    let previous = users.len().checked_sub(2).and_then(|i| users.get(i)).map_or("", String::as_str);
    format!("{SUMMARY_PREFIX}: {} messages so far; last request: {}", request.turns().len(), excerpt(previous))
}

/// One line of at most [`MAX_ECHO_CHARS`] characters.
fn excerpt(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut = truncate_chars(&flat, MAX_ECHO_CHARS);
    if cut.len() < flat.len() {
        format!("{cut}…")
    } else {
        cut
    }
}

fn truncate_chars(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::super::request::tests::{agent_body, compaction_body, title_body};
    use super::*;
    use bytes::Bytes;
    use serde_json::{json, Value};

    fn observed(body: Value) -> ObservedRequest {
        let bytes = Bytes::from(serde_json::to_vec(&body).unwrap());
        ObservedRequest::new(1, Some("ses_1".into()), body, bytes)
    }

    fn with_tool_result(mut body: Value, output: &str) -> Value {
        let messages = body["messages"].as_array_mut().unwrap();
        messages.push(json!({"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": "c", "content": output}));
        body
    }

    #[test]
    fn finds_read_requests() {
        assert_eq!(read_request("read marker.txt").as_deref(), Some("marker.txt"));
        assert_eq!(read_request("Read marker.txt for wave 0. REQUEST_x").as_deref(), Some("marker.txt"));
        assert_eq!(read_request("Please READ `src/main.rs`.").as_deref(), Some("src/main.rs"));
        assert_eq!(read_request("already read"), None);
        assert_eq!(read_request("thread safety and bread"), None);
        assert_eq!(read_request("hello"), None);
    }

    #[test]
    fn default_agent_loads_a_named_skill_when_the_tool_is_offered() {
        assert_eq!(skill_request("Please use skill `web-3d-game`.").as_deref(), Some("web-3d-game"));
        assert_eq!(skill_request("use skills"), None);
        let first = observed(agent_body("Use skill alpha now"));
        assert_eq!(default_reply(&first), Reply::tool_call("skill", json!({"name": "alpha"})));
        let mut body = agent_body("use skill alpha");
        body["tools"] = json!([super::super::request::tests::tool("read")]);
        assert!(matches!(default_reply(&observed(body)), Reply::Text(_)), "without the skill tool, text");
    }

    #[test]
    fn finds_markers() {
        assert_eq!(find_marker("<file>\n00001| PROJECT_12\n"), Some("PROJECT_12"));
        assert_eq!(find_marker("PROJECT_ then PROJECT_7x"), Some("PROJECT_7"));
        assert_eq!(find_marker("none"), None);
    }

    #[test]
    fn default_agent_reads_then_answers_the_marker() {
        let script = Script::default_agent();
        let first = observed(agent_body("Read marker.txt for wave 0"));
        assert_eq!(script.reply(&first), Reply::tool_call("read", json!({"filePath": "marker.txt"})));
        let second = observed(with_tool_result(agent_body("Read marker.txt for wave 0"), "<file>\n00001| PROJECT_4\n</file>"));
        assert_eq!(script.reply(&second), Reply::text("PROJECT_4"));
        let other = observed(with_tool_result(agent_body("read a.txt"), "plain output"));
        assert_eq!(script.reply(&other), Reply::text("The tool returned: plain output"));
    }

    #[test]
    fn default_agent_echoes_a_bounded_prompt_without_read_request() {
        let reply = default_reply(&observed(agent_body(&"x".repeat(5000))));
        let Reply::Text(text) = reply else { panic!("text expected") };
        assert!(text.starts_with("Scripted reply to: xxx"));
        assert!(text.chars().count() <= MAX_ECHO_CHARS + 30);
        // Without a read tool, a read request is answered in text.
        let mut body = agent_body("read marker.txt");
        body["tools"] = json!([super::super::request::tests::tool("bash")]);
        assert!(matches!(default_reply(&observed(body)), Reply::Text(_)));
    }

    #[test]
    fn default_title_and_summary() {
        let Reply::Text(title) = default_reply(&observed(title_body())) else { panic!() };
        assert_eq!(title, "Read marker.txt for wave 0");
        let Reply::Text(summary) = default_reply(&observed(compaction_body())) else { panic!() };
        assert!(summary.starts_with(SUMMARY_PREFIX), "{summary}");
        assert!(summary.contains("Read marker.txt"), "{summary}");
    }

    #[test]
    fn default_agent_calls_claude_codes_tools_by_their_schema() {
        use super::super::anthropic::tests::{claude_body, claude_title_body, observed as claude, with_tool_result};
        assert_eq!(default_reply(&claude(claude_body("read marker.txt"))), Reply::tool_call("Read", json!({"file_path": "marker.txt"})));
        let answered = with_tool_result(claude_body("read marker.txt"), "Read", json!("     1\tPROJECT_9\n"));
        assert_eq!(default_reply(&claude(answered)), Reply::text("PROJECT_9"));
        assert_eq!(default_reply(&claude(claude_body("use skill alpha"))), Reply::tool_call("Skill", json!({"skill": "alpha"})));
        assert_eq!(
            default_reply(&claude(claude_body("Search knowledge for launch dates?"))),
            Reply::tool_call("mcp__hearth__knowledge_search", json!({"query": "launch dates"}))
        );
        // Claude Code's title request wants `{"title": …}`; the `<session>` wrapper is no title.
        assert_eq!(default_reply(&claude(claude_title_body("read marker.txt"))), Reply::text(r#"{"title":"read marker.txt"}"#));
    }

    #[test]
    fn default_agent_finds_the_knowledge_tool_by_its_suffix() {
        let mut body = agent_body("search knowledge for rust");
        body["tools"].as_array_mut().unwrap().push(super::super::request::tests::tool("hearth_knowledge_search"));
        assert_eq!(default_reply(&observed(body)), Reply::tool_call("hearth_knowledge_search", json!({"query": "rust"})));
        assert!(matches!(default_reply(&observed(agent_body("search knowledge for rust"))), Reply::Text(_)), "without the tool, text");
    }

    #[test]
    fn custom_scripts_can_fall_back_to_the_default() {
        let script = Script::custom(|request| match request.kind {
            RequestKind::Agent => Reply::Status { code: 429, body: "slow down".into() },
            _ => default_reply(request),
        });
        assert!(matches!(script.reply(&observed(agent_body("hi"))), Reply::Status { code: 429, .. }));
        assert!(matches!(script.reply(&observed(title_body())), Reply::Text(_)));
    }
}
