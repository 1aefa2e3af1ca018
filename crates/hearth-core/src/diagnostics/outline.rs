//! The outline of a conversation: one line per turn (a user message and the replies after it) with
//! its tool counts. The conversation view uses it for its overview; the isolation check proves it
//! stays fast while another conversation's compaction is held.

use std::collections::BTreeMap;

use crate::opencode::wire::{Part, Role, StoredMessage, ToolState};

/// Characters of the prompt kept in an outline line.
pub const OUTLINE_PROMPT_CHARS: usize = 120;

/// How often one tool was called in a turn.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct ToolCount {
    pub tool: String,
    pub count: u32,
}

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct OutlineEntry {
    /// 0-based turn number.
    pub index: u32,
    /// The runtime's id of the user message that opened the turn.
    pub message_id: String,
    /// First line of the prompt, at most [`OUTLINE_PROMPT_CHARS`] characters; `(compaction)` for a
    /// compaction request.
    pub prompt: String,
    pub tool_calls: u32,
    /// Calls per tool, by tool name.
    pub tools: Vec<ToolCount>,
    /// Tool calls that ended in an error.
    pub tool_errors: u32,
    pub replies: u32,
}

/// The outline of a session's stored messages (oldest first). Messages before the first user
/// message have no turn and are skipped.
pub fn conversation_outline(messages: &[StoredMessage]) -> Vec<OutlineEntry> {
    let mut entries: Vec<OutlineEntry> = Vec::new();
    let mut counts: BTreeMap<String, u32> = BTreeMap::new();
    let flush = |entries: &mut Vec<OutlineEntry>, counts: &mut BTreeMap<String, u32>| {
        if let Some(last) = entries.last_mut() {
            last.tools = std::mem::take(counts).into_iter().map(|(tool, count)| ToolCount { tool, count }).collect();
        }
    };
    for message in messages {
        if message.info.role == Role::User {
            flush(&mut entries, &mut counts);
            entries.push(OutlineEntry {
                index: u32::try_from(entries.len()).unwrap_or(u32::MAX),
                message_id: message.info.id.clone(),
                prompt: prompt_line(&message.parts),
                tool_calls: 0,
                tools: Vec::new(),
                tool_errors: 0,
                replies: 0,
            });
        } else if let Some(entry) = entries.last_mut() {
            entry.replies += 1;
        }
        let Some(entry) = entries.last_mut() else { continue };
        // Tool parts count wherever the runtime stored them in the turn.
        for tool in message.parts.iter().filter_map(|p| match p {
            Part::Tool(t) => Some(t),
            _ => None,
        }) {
            entry.tool_calls += 1;
            if matches!(tool.state, ToolState::Error { .. }) {
                entry.tool_errors += 1;
            }
            *counts.entry(tool.tool.clone()).or_default() += 1;
        }
    }
    flush(&mut entries, &mut counts);
    entries
}

fn prompt_line(parts: &[Part]) -> String {
    if parts.iter().any(|p| matches!(p, Part::Compaction(_))) {
        return "(compaction)".into();
    }
    let text = parts
        .iter()
        .filter_map(|p| match p {
            Part::Text(t) if !t.synthetic => Some(t.text.as_str()),
            _ => None,
        })
        .flat_map(str::lines)
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or_default();
    text.chars().take(OUTLINE_PROMPT_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn tool(name: &str, status: &str) -> Value {
        json!({"type": "tool", "tool": name, "callID": "c", "state": {"status": status}})
    }

    /// Fill in the ids every stored part and message carries, then decode.
    fn stored(messages: Value) -> Vec<StoredMessage> {
        let mut messages = messages;
        for m in messages.as_array_mut().unwrap() {
            let id = m["info"]["id"].clone();
            m["info"]["sessionID"] = json!("ses_1");
            for (i, p) in m["parts"].as_array_mut().unwrap().iter_mut().enumerate() {
                p["id"] = json!(format!("prt_{i}"));
                p["sessionID"] = json!("ses_1");
                p["messageID"] = id.clone();
            }
        }
        serde_json::from_value(messages).unwrap()
    }

    /// Shaped like the real runtime's list for "Read marker.txt" (user; assistant with a tool;
    /// assistant with the answer), then a stored prompt, then a compaction.
    #[test]
    fn one_line_per_turn_with_its_tool_counts() {
        let messages = json!([
            {"info": {"id": "msg_1", "role": "user"}, "parts": [{"type": "text", "text": "\n  Read marker.txt\nplease"}]},
            {"info": {"id": "msg_2", "role": "assistant"}, "parts": [{"type": "step-start"}, tool("read", "completed"), {"type": "step-finish"}]},
            {"info": {"id": "msg_3", "role": "assistant"}, "parts": [tool("read", "error"), tool("bash", "completed"), {"type": "text", "text": "PROJECT_1"}]},
            {"info": {"id": "msg_4", "role": "user"}, "parts": [{"type": "text", "text": "x".repeat(500)}]},
            {"info": {"id": "msg_5", "role": "user"}, "parts": [{"type": "compaction", "auto": false}]},
            {"info": {"id": "msg_6", "role": "assistant", "summary": true}, "parts": [{"type": "text", "text": "summary"}]}
        ]);
        let outline = conversation_outline(&stored(messages));
        assert_eq!(outline.len(), 3);
        assert_eq!(outline[0].prompt, "Read marker.txt");
        assert_eq!(outline[0].message_id, "msg_1");
        assert_eq!((outline[0].tool_calls, outline[0].tool_errors, outline[0].replies), (3, 1, 2));
        assert_eq!(
            outline[0].tools,
            vec![ToolCount { tool: "bash".into(), count: 1 }, ToolCount { tool: "read".into(), count: 2 }]
        );
        assert_eq!(outline[1].prompt.chars().count(), OUTLINE_PROMPT_CHARS);
        assert_eq!((outline[1].index, outline[1].tool_calls, outline[1].replies), (1, 0, 0));
        assert!(outline[1].tools.is_empty());
        assert_eq!((outline[2].prompt.as_str(), outline[2].replies), ("(compaction)", 1));
    }

    #[test]
    fn tool_parts_stored_on_the_user_message_count_for_its_turn() {
        let messages = json!([
            {"info": {"id": "msg_0", "role": "assistant"}, "parts": [tool("read", "completed")]},
            {"info": {"id": "msg_1", "role": "user"}, "parts": [{"type": "text", "text": "turn"}, tool("read", "completed")]}
        ]);
        let outline = conversation_outline(&stored(messages));
        assert_eq!(outline.len(), 1, "no turn before the first user message");
        assert_eq!(outline[0].tools, vec![ToolCount { tool: "read".into(), count: 1 }]);
        assert!(conversation_outline(&[]).is_empty());
    }
}
