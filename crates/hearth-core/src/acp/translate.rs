//! An ACP session's updates as the runtime contract's events: text chunks become `TextDelta`, a
//! tool call and its updates become one `ToolStarted` and one `ToolFinished` with its input and
//! output, context usage becomes `Usage`, and the agent's plan is kept for `plan()`. Pure: the
//! run feeds it updates in order and sends what it returns.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{
    ContentBlock, PlanEntryStatus, ToolCall, ToolCallContent, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use agent_client_protocol::v1::schema::SessionUpdate;
use serde_json::Value;

use crate::runtime::{PlanStatus, PlanStep, RuntimeEvent, Usage};

/// What the run knows of one tool call so far.
#[derive(Debug, Clone, Default)]
struct Tool {
    name: String,
    input: Value,
    finished: bool,
}

/// One turn's updates, read in order.
#[derive(Debug, Default)]
pub struct Translator {
    text: String,
    tools: HashMap<String, Tool>,
    /// The order tool calls started in (the stored reply lists them so).
    order: Vec<String>,
    plan: Option<Vec<PlanStep>>,
}

impl Translator {
    /// The reply's text so far: what the agent streamed, which is what it keeps for the turn.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The plan the agent sent last in this turn, if it sent one.
    pub fn plan(&self) -> Option<&[PlanStep]> {
        self.plan.as_deref()
    }

    /// Tool calls that started and never finished (the turn was cancelled or failed under them):
    /// each ends with `error`, so no card stays spinning.
    pub fn unfinished(&mut self, error: &str) -> Vec<RuntimeEvent> {
        let mut events = Vec::new();
        for id in &self.order {
            let tool = self.tools.get_mut(id).expect("ordered ids are known");
            if !tool.finished {
                tool.finished = true;
                events.push(RuntimeEvent::ToolFinished {
                    call_id: id.clone(),
                    tool: tool.name.clone(),
                    input: tool.input.clone(),
                    output: String::new(),
                    error: Some(error.to_string()),
                });
            }
        }
        events
    }

    pub fn on_update(&mut self, update: SessionUpdate) -> Vec<RuntimeEvent> {
        match update {
            SessionUpdate::AgentMessageChunk(chunk) => match chunk.content {
                ContentBlock::Text(t) if !t.text.is_empty() => {
                    self.text.push_str(&t.text);
                    vec![RuntimeEvent::TextDelta { text: t.text }]
                }
                _ => vec![],
            },
            SessionUpdate::ToolCall(call) => self.on_tool_call(call),
            SessionUpdate::ToolCallUpdate(update) => self.on_tool_update(update),
            SessionUpdate::Plan(plan) => {
                self.plan = Some(
                    plan.entries
                        .into_iter()
                        .map(|e| PlanStep {
                            content: e.content,
                            status: match e.status {
                                PlanEntryStatus::InProgress => PlanStatus::InProgress,
                                PlanEntryStatus::Completed => PlanStatus::Completed,
                                _ => PlanStatus::Pending,
                            },
                        })
                        .collect(),
                );
                vec![]
            }
            // What the context holds now: the closest ACP has to a step's token counts.
            SessionUpdate::UsageUpdate(u) => vec![RuntimeEvent::Usage(Usage { input_tokens: u.used, ..Default::default() })],
            _ => vec![],
        }
    }

    fn on_tool_call(&mut self, call: ToolCall) -> Vec<RuntimeEvent> {
        let id = call.tool_call_id.0.to_string();
        let name = tool_name(call.name.as_deref(), &call.kind, &call.title);
        let input = call.raw_input.clone().unwrap_or_else(|| Value::Object(Default::default()));
        let mut events = Vec::new();
        if !self.tools.contains_key(&id) {
            self.order.push(id.clone());
            self.tools.insert(id.clone(), Tool { name: name.clone(), input: input.clone(), finished: false });
            events.push(RuntimeEvent::ToolStarted { call_id: id.clone(), tool: name, input });
        }
        let fields = ToolCallUpdateFields::new()
            .status(call.status)
            .content(call.content)
            .raw_output(call.raw_output);
        events.extend(self.finish_if_done(&id, fields));
        events
    }

    fn on_tool_update(&mut self, update: ToolCallUpdate) -> Vec<RuntimeEvent> {
        let id = update.tool_call_id.0.to_string();
        let fields = update.fields;
        let mut events = Vec::new();
        if !self.tools.contains_key(&id) {
            // An update for a call never announced: announce it now.
            let kind = fields.kind.unwrap_or(ToolKind::Other);
            let name = tool_name(fields.name.as_deref(), &kind, fields.title.as_deref().unwrap_or("tool"));
            let input = fields.raw_input.clone().unwrap_or_else(|| Value::Object(Default::default()));
            self.order.push(id.clone());
            self.tools.insert(id.clone(), Tool { name: name.clone(), input: input.clone(), finished: false });
            events.push(RuntimeEvent::ToolStarted { call_id: id.clone(), tool: name, input });
        } else if let Some(input) = fields.raw_input.clone().filter(|v| !is_empty(v)) {
            // Agents send a call's input in a later update (the first says only that it started).
            self.tools.get_mut(&id).expect("checked").input = input;
        }
        events.extend(self.finish_if_done(&id, fields));
        events
    }

    fn finish_if_done(&mut self, id: &str, fields: ToolCallUpdateFields) -> Vec<RuntimeEvent> {
        let failed = match fields.status {
            Some(ToolCallStatus::Completed) => false,
            Some(ToolCallStatus::Failed) => true,
            _ => return vec![],
        };
        let tool = self.tools.get_mut(id).expect("the caller registered the call");
        if tool.finished {
            return vec![];
        }
        tool.finished = true;
        let output = output_text(fields.content.as_deref().unwrap_or(&[]), fields.raw_output.as_ref());
        let error = failed.then(|| if output.is_empty() { "The tool failed.".to_string() } else { output.clone() });
        vec![RuntimeEvent::ToolFinished { call_id: id.to_string(), tool: tool.name.clone(), input: tool.input.clone(), output, error }]
    }
}

fn is_empty(v: &Value) -> bool {
    matches!(v, Value::Null) || v.as_object().is_some_and(|o| o.is_empty())
}

/// The tool's name as Hearth shows it: the agent's kind where it names one (`read`, `edit`,
/// `execute`…, the same words whatever the agent), else the tool's own name or title.
fn tool_name(name: Option<&str>, kind: &ToolKind, title: &str) -> String {
    match kind {
        ToolKind::Other => name.unwrap_or(title).to_string(),
        kind => serde_json::to_value(kind).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_else(|| title.to_string()),
    }
}

/// What a finished tool call produced, as text: its text content, a line per diff, else its raw
/// output.
fn output_text(content: &[ToolCallContent], raw: Option<&Value>) -> String {
    let mut parts = Vec::new();
    for c in content {
        match c {
            ToolCallContent::Content(c) => {
                if let ContentBlock::Text(t) = &c.content {
                    parts.push(t.text.clone());
                }
            }
            ToolCallContent::Diff(d) => parts.push(format!("{}: {}", d.path.display(), if d.old_text.is_none() { "created" } else { "edited" })),
            _ => {}
        }
    }
    if !parts.is_empty() {
        return parts.join("\n");
    }
    match raw {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Object(o)) => match o.get("output").or_else(|| o.get("stdout")).or_else(|| o.get("formatted_output")) {
            Some(Value::String(s)) => s.clone(),
            _ => Value::Object(o.clone()).to_string(),
        },
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// The paths a permission request is about: its locations, and any path-like value of its input.
pub fn paths_of(call: &ToolCallUpdateFields) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = call.locations.iter().flatten().map(|l| l.path.clone()).collect();
    if let Some(Value::Object(input)) = &call.raw_input {
        for (key, value) in input {
            let k = key.to_ascii_lowercase();
            if k.contains("path") || k.contains("file") || k == "parentdir" || k == "cwd" {
                if let Some(s) = value.as_str().filter(|s| s.starts_with('/')) {
                    paths.push(PathBuf::from(s));
                }
            }
        }
    }
    paths.sort();
    paths.dedup();
    paths
}

/// Is `path` inside `root`? Relative paths are the agent's own (inside its working folder).
pub fn inside(path: &Path, root: &Path) -> bool {
    if path.is_relative() {
        return !path.components().any(|c| matches!(c, std::path::Component::ParentDir));
    }
    let clean: PathBuf = path.components().fold(PathBuf::new(), |mut acc, c| {
        match c {
            std::path::Component::ParentDir => {
                acc.pop();
            }
            std::path::Component::CurDir => {}
            other => acc.push(other),
        }
        acc
    });
    clean.starts_with(root)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn update(v: Value) -> SessionUpdate {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_read_turn_of_opencode_acp_is_text_and_one_tool_card() {
        // Recorded from `opencode acp` 1.18.33.
        let mut t = Translator::default();
        let mut events = Vec::new();
        for u in [
            json!({"sessionUpdate":"tool_call","toolCallId":"call_c6","title":"read","kind":"read","status":"pending","locations":[],"rawInput":{}}),
            json!({"sessionUpdate":"tool_call_update","toolCallId":"call_c6","status":"in_progress","kind":"read","title":"read","locations":[{"path":"/w/marker.txt"}],"rawInput":{"filePath":"/w/marker.txt"}}),
            json!({"sessionUpdate":"tool_call_update","toolCallId":"call_c6","status":"completed","title":"w/marker.txt","content":[{"type":"content","content":{"type":"text","text":"MARKER-ONE"}}],"rawOutput":{"output":"<content>1: MARKER-ONE</content>"}}),
            json!({"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"MARKER"}}),
            json!({"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"-ONE"}}),
            json!({"sessionUpdate":"usage_update","used":10,"size":128000}),
        ] {
            events.extend(t.on_update(update(u)));
        }
        assert_eq!(t.text(), "MARKER-ONE");
        assert_eq!(events[0], RuntimeEvent::ToolStarted { call_id: "call_c6".into(), tool: "read".into(), input: json!({}) });
        assert_eq!(
            events[1],
            RuntimeEvent::ToolFinished { call_id: "call_c6".into(), tool: "read".into(), input: json!({"filePath": "/w/marker.txt"}), output: "MARKER-ONE".into(), error: None }
        );
        assert_eq!(events[2], RuntimeEvent::TextDelta { text: "MARKER".into() });
        assert_eq!(events.last(), Some(&RuntimeEvent::Usage(Usage { input_tokens: 10, ..Default::default() })));
        assert!(t.unfinished("stopped").is_empty());
    }

    #[test]
    fn a_failed_call_carries_its_error_and_an_unfinished_one_is_ended() {
        let mut t = Translator::default();
        t.on_update(update(json!({"sessionUpdate":"tool_call","toolCallId":"a","title":"Write x","kind":"edit","status":"pending"})));
        let failed = t.on_update(update(json!({"sessionUpdate":"tool_call_update","toolCallId":"a","status":"failed","content":[{"type":"content","content":{"type":"text","text":"User refused permission"}}]})));
        assert!(matches!(&failed[0], RuntimeEvent::ToolFinished { error: Some(e), tool, .. } if e == "User refused permission" && tool == "edit"));
        t.on_update(update(json!({"sessionUpdate":"tool_call","toolCallId":"b","title":"pwd","kind":"execute","status":"in_progress"})));
        let ended = t.unfinished("Stopped before it finished.");
        assert_eq!(ended.len(), 1);
        assert!(matches!(&ended[0], RuntimeEvent::ToolFinished { call_id, error: Some(_), .. } if call_id == "b"));
    }

    #[test]
    fn a_plan_is_kept_and_diffs_and_raw_output_become_text() {
        let mut t = Translator::default();
        t.on_update(update(json!({"sessionUpdate":"plan","entries":[{"content":"one","priority":"medium","status":"completed"},{"content":"two","priority":"low","status":"in_progress"}]})));
        assert_eq!(t.plan().unwrap()[1], PlanStep { content: "two".into(), status: PlanStatus::InProgress });
        let done = t.on_update(update(json!({"sessionUpdate":"tool_call","toolCallId":"e","title":"Edit a","kind":"edit","status":"completed","content":[{"type":"diff","path":"/w/a.txt","oldText":null,"newText":"x"}]})));
        assert!(matches!(&done[1], RuntimeEvent::ToolFinished { output, .. } if output == "/w/a.txt: created"));
        let shell = t.on_update(update(json!({"sessionUpdate":"tool_call","toolCallId":"s","title":"cat","kind":"execute","status":"completed","rawOutput":{"stdout":"hi\n","exit_code":0}})));
        assert!(matches!(&shell[1], RuntimeEvent::ToolFinished { output, .. } if output == "hi\n"));
    }

    #[test]
    fn paths_inside_and_outside_a_root() {
        let root = Path::new("/p/proj");
        assert!(inside(Path::new("/p/proj/a/b.txt"), root));
        assert!(inside(Path::new("src/x"), root));
        assert!(!inside(Path::new("/p/proj/../other/x"), root));
        assert!(!inside(Path::new("../x"), root));
        assert!(!inside(Path::new("/p/project2/x"), root));
        let fields = ToolCallUpdateFields::new().raw_input(json!({"filepath": "/etc/passwd", "parentDir": "/etc", "content": "/not/a/path/key"}));
        assert_eq!(paths_of(&fields), vec![PathBuf::from("/etc"), PathBuf::from("/etc/passwd")]);
    }
}
