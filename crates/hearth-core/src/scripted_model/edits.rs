//! The scripted model's file edits: a prompt whose lines are `write <path> <text>`,
//! `edit <path> <old> -> <new>`, `run <shell command>` or `plan: [x] done; [~] doing; [ ] to do`
//! becomes the runtime's own `write`, `edit`, `bash` and `todowrite` tool calls, one per model
//! step, so changes, undo and the plan can be tried without an account. `\n`, `\t` and `\\` in a
//! written or edited text stand for a newline, a tab and a backslash; a command is passed to the
//! shell as written.

use serde_json::{json, Value};

use super::request::ObservedRequest;
use super::script::Reply;

/// One edit command of a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditCommand {
    Write { path: String, content: String },
    Edit { path: String, old: String, new: String },
    Run { command: String },
    Plan { items: Vec<(String, &'static str)> },
}

impl EditCommand {
    /// The tool calls that carry this command out, in order. The runtime refuses to edit a file the
    /// session has not read, so an edit reads it first.
    fn calls(&self) -> Vec<(&'static str, Value)> {
        match self {
            EditCommand::Write { path, content } => vec![("write", json!({ "filePath": path, "content": content }))],
            EditCommand::Edit { path, old, new } => vec![
                ("read", json!({ "filePath": path })),
                ("edit", json!({ "filePath": path, "oldString": old, "newString": new })),
            ],
            EditCommand::Run { command } => vec![("bash", json!({ "command": command, "description": "Run a command" }))],
            EditCommand::Plan { items } => {
                let todos: Vec<Value> = items
                    .iter()
                    .enumerate()
                    .map(|(i, (content, status))| json!({ "id": (i + 1).to_string(), "content": content, "status": status, "priority": "medium" }))
                    .collect();
                vec![("todowrite", json!({ "todos": todos }))]
            }
        }
    }

    fn describe(&self) -> String {
        match self {
            EditCommand::Write { path, .. } => format!("wrote {path}"),
            EditCommand::Edit { path, .. } => format!("edited {path}"),
            EditCommand::Run { command } => format!("ran `{command}`"),
            EditCommand::Plan { items } => format!("planned {} steps", items.len()),
        }
    }
}

/// The edit commands of a prompt, one per line; `None` when a line is not one (the prompt is then
/// not an edit request at all).
pub fn edit_commands(prompt: &str) -> Option<Vec<EditCommand>> {
    let lines: Vec<&str> = prompt.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    if lines.is_empty() {
        return None;
    }
    lines.into_iter().map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<EditCommand> {
    let (word, rest) = line.split_once(char::is_whitespace)?;
    let rest = rest.trim_start();
    match word.to_ascii_lowercase().as_str() {
        "write" => {
            let (path, text) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            (!path.is_empty()).then(|| EditCommand::Write { path: path.into(), content: unescape(text) })
        }
        "edit" => {
            let (path, change) = rest.split_once(char::is_whitespace)?;
            let (old, new) = change.split_once(" -> ")?;
            (!old.is_empty()).then(|| EditCommand::Edit { path: path.into(), old: unescape(old), new: unescape(new) })
        }
        "run" => (!rest.is_empty()).then(|| EditCommand::Run { command: rest.to_owned() }),
        "plan:" | "plan" => {
            let items: Vec<(String, &'static str)> = rest.trim_start_matches(':').split(';').map(str::trim).filter(|i| !i.is_empty()).map(plan_item).collect();
            (!items.is_empty()).then_some(EditCommand::Plan { items })
        }
        _ => None,
    }
}

fn plan_item(item: &str) -> (String, &'static str) {
    for (mark, status) in [("[x]", "completed"), ("[~]", "in_progress"), ("[ ]", "pending")] {
        if let Some(rest) = item.strip_prefix(mark) {
            return (rest.trim().to_owned(), status);
        }
    }
    (item.to_owned(), "pending")
}

fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('\\') => out.push('\\'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// The next step of an edit request: the next tool call, or the closing sentence once every call
/// has its result. `None` when the prompt is not an edit request or the tools are not offered.
/// Tools are found by name ignoring case, their arguments named as the agent's schema names them
/// (OpenCode's `edit` takes `oldString`, Claude Code's `Edit` `old_string`).
pub fn edit_reply(request: &ObservedRequest) -> Option<Reply> {
    let commands = edit_commands(&request.last_user_text())?;
    let calls: Vec<(&str, Value)> = commands.iter().flat_map(EditCommand::calls).collect();
    let tools: Vec<_> = calls.iter().map(|(tool, _)| request.find_tool(tool)).collect::<Option<_>>()?;
    let done = request.tool_results_after_last_user().len();
    if let Some(((_, arguments), tool)) = calls.get(done).zip(tools.get(done)) {
        return Some(Reply::tool_call(tool.name, tool.adapt(arguments.clone())));
    }
    let summary: Vec<String> = commands.iter().map(EditCommand::describe).collect();
    Some(Reply::Text(format!("Done: {}.", summary.join(", "))))
}

#[cfg(test)]
mod tests {
    use super::super::request::tests::{agent_body, tool};
    use super::*;
    use bytes::Bytes;

    fn observed(body: Value) -> ObservedRequest {
        let bytes = Bytes::from(serde_json::to_vec(&body).unwrap());
        ObservedRequest::new(1, Some("ses_1".into()), body, bytes)
    }

    fn with_tools(prompt: &str, results: usize) -> Value {
        let mut body = agent_body(prompt);
        body["tools"] = json!([tool("read"), tool("write"), tool("edit"), tool("bash"), tool("todowrite")]);
        let messages = body["messages"].as_array_mut().unwrap();
        for i in 0..results {
            messages.push(json!({"role": "assistant", "tool_calls": [{"id": format!("c{i}"), "type": "function", "function": {"name": "write", "arguments": "{}"}}]}));
            messages.push(json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": "ok"}));
        }
        body
    }

    #[test]
    fn parses_writes_edits_and_plans() {
        let commands = edit_commands("write a.txt one\\ntwo\nedit src/c.rs let x -> let y\nplan: [x] look; [~] change; test").unwrap();
        assert_eq!(commands[0], EditCommand::Write { path: "a.txt".into(), content: "one\ntwo".into() });
        assert_eq!(commands[1], EditCommand::Edit { path: "src/c.rs".into(), old: "let x".into(), new: "let y".into() });
        assert_eq!(commands[2], EditCommand::Plan { items: vec![("look".into(), "completed"), ("change".into(), "in_progress"), ("test".into(), "pending")] });
        assert_eq!(edit_commands("write empty.txt").unwrap()[0], EditCommand::Write { path: "empty.txt".into(), content: String::new() });
        assert_eq!(edit_commands("write a.txt x\nplease"), None, "a line that is no command makes it no edit request");
        assert_eq!(edit_commands("edit a.txt no arrow"), None);
        assert_eq!(edit_commands("read marker.txt"), None);
        assert_eq!(edit_commands("run echo hi > x.txt").unwrap()[0], EditCommand::Run { command: "echo hi > x.txt".into() });
    }

    #[test]
    fn steps_through_the_calls_then_says_what_it_did() {
        let prompt = "write a.txt A\nedit c.txt old -> new";
        let step = |n| edit_reply(&observed(with_tools(prompt, n))).unwrap();
        assert_eq!(step(0), Reply::tool_call("write", json!({"filePath": "a.txt", "content": "A"})));
        assert_eq!(step(1), Reply::tool_call("read", json!({"filePath": "c.txt"})));
        assert_eq!(step(2), Reply::tool_call("edit", json!({"filePath": "c.txt", "oldString": "old", "newString": "new"})));
        assert_eq!(step(3), Reply::text("Done: wrote a.txt, edited c.txt."));
    }

    #[test]
    fn claude_codes_tools_get_their_own_argument_names() {
        use super::super::anthropic::tests::{claude_body, observed as claude, with_tool_result};
        let prompt = "write a.txt A\nedit c.txt old -> new\nrun ls";
        let mut body = claude_body(prompt);
        let mut steps = Vec::new();
        for _ in 0..5 {
            let reply = edit_reply(&claude(body.clone())).unwrap();
            if let Reply::ToolCall { name, .. } = &reply {
                body = with_tool_result(body, name, json!("ok"));
            }
            steps.push(reply);
        }
        assert_eq!(
            steps,
            [
                Reply::tool_call("Write", json!({"file_path": "a.txt", "content": "A"})),
                Reply::tool_call("Read", json!({"file_path": "c.txt"})),
                Reply::tool_call("Edit", json!({"file_path": "c.txt", "old_string": "old", "new_string": "new"})),
                Reply::tool_call("Bash", json!({"command": "ls", "description": "Run a command"})),
                Reply::text("Done: wrote a.txt, edited c.txt, ran `ls`."),
            ]
        );
        // Claude Code offers no todo tool in its first request: a plan is no edit request there.
        assert_eq!(edit_reply(&claude(claude_body("plan: [ ] one"))), None);
    }

    #[test]
    fn without_the_tools_it_is_no_edit_request() {
        let mut body = agent_body("write a.txt A");
        body["tools"] = json!([tool("read")]);
        assert_eq!(edit_reply(&observed(body)), None);
    }
}
