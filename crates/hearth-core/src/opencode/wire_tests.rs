//! The decoder against what the pinned runtime really sent (recorded by the example
//! `record_wire_events`: a tool step then text, a subagent, a provider error, a cancel, and a
//! permission asked and refused).

use super::*;

const EVENTS: &str = include_str!("../../../../fixtures/opencode-wire/events.jsonl");
const MESSAGES_TOOL: &str = include_str!("../../../../fixtures/opencode-wire/messages-tool.json");
const MESSAGES_FAIL: &str = include_str!("../../../../fixtures/opencode-wire/messages-fail.json");
const MESSAGES_SUBAGENT: &str = include_str!("../../../../fixtures/opencode-wire/messages-subagent.json");

fn recorded() -> Vec<Envelope> {
    EVENTS
        .lines()
        .enumerate()
        .map(|(i, line)| Envelope::decode(line).unwrap_or_else(|e| panic!("line {}: {e}: {line}", i + 1)))
        .collect()
}

#[test]
fn every_recorded_event_decodes() {
    let events = recorded();
    assert_eq!(events.len(), EVENTS.lines().count());
    let count = |f: fn(&Event) -> bool| events.iter().filter(|e| f(&e.payload)).count();
    assert_eq!(count(|e| matches!(e, Event::ServerConnected)), 1);
    assert!(count(|e| matches!(e, Event::MessageUpdated(_))) > 20);
    assert!(count(|e| matches!(e, Event::PartDelta(_))) >= 3);
    assert_eq!(count(|e| matches!(e, Event::PermissionAsked(_))), 1);
    assert_eq!(count(|e| matches!(e, Event::PermissionReplied(_))), 1);
    assert_eq!(count(|e| matches!(e, Event::SessionError(_))), 2);
    // Server-wide and bookkeeping events are decoded as Other and carry no session.
    assert!(events.iter().filter(|e| e.payload == Event::Other).all(|e| e.payload.session_id().is_none()));
    // Every session event names its session, and names the project directory it came from.
    for e in events.iter().filter(|e| !matches!(e.payload, Event::Other | Event::ServerConnected)) {
        assert!(e.payload.session_id().is_some_and(|s| s.starts_with("ses_")), "{e:?}");
        assert!(e.directory.as_deref().is_some_and(|d| d.ends_with("/project")), "{e:?}");
    }
}

#[test]
fn a_tool_step_then_text_reads_as_typed_parts() {
    let events = recorded();
    let tool = events
        .iter()
        .find_map(|e| match &e.payload {
            Event::PartUpdated(PartEvent { part: Part::Tool(t) }) if matches!(t.state, ToolState::Completed { .. }) && t.tool == "read" => Some(t.clone()),
            _ => None,
        })
        .expect("a completed read");
    assert_eq!(tool.state.input()["filePath"], "marker.txt");
    assert!(matches!(&tool.state, ToolState::Completed { output, .. } if output.contains("PROJECT_7")));
    let deltas: String = events
        .iter()
        .filter_map(|e| match &e.payload {
            Event::PartDelta(d) if d.session_id == tool.session_id => Some(d.delta.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, "PROJECT_7");
    let finished: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.payload {
            Event::MessageUpdated(m) if m.info.session_id == tool.session_id && m.info.role == Role::Assistant && m.info.is_complete() => Some(m.info.finish.clone()),
            _ => None,
        })
        .collect();
    assert!(finished.contains(&Some("tool-calls".into())) && finished.contains(&Some("stop".into())), "{finished:?}");
}

#[test]
fn statuses_errors_and_permissions_are_typed() {
    let events = recorded();
    assert!(events.iter().any(|e| matches!(&e.payload, Event::SessionStatus(s) if s.status == SessionStatus::Busy)));
    assert!(events.iter().any(|e| matches!(&e.payload, Event::SessionStatus(s) if s.status == SessionStatus::Idle)));
    let errors: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.payload {
            Event::SessionError(SessionErrorEvent { error: Some(err), .. }) => Some((err.name.clone(), err.message().to_string())),
            _ => None,
        })
        .collect();
    assert!(errors.contains(&("APIError".into(), "model not found".into())), "{errors:?}");
    assert!(errors.iter().any(|(name, _)| name == ABORTED_ERROR), "{errors:?}");
    let asked = events.iter().find_map(|e| match &e.payload {
        Event::PermissionAsked(p) => Some(p.clone()),
        _ => None,
    });
    let asked = asked.expect("a permission was asked");
    assert_eq!((asked.permission.as_str(), asked.patterns.as_slice()), ("external_directory", &["/etc/*".to_string()][..]));
    assert!(asked.id.starts_with("per_"));
    let retry: SessionStatus = serde_json::from_str(r#"{"type":"retry","attempt":2,"message":"Connection refused","next":1000}"#).unwrap();
    assert_eq!(retry, SessionStatus::Retry { attempt: 2, message: "Connection refused".into() });
}

#[test]
fn a_subagent_session_names_the_session_that_spawned_it() {
    let events = recorded();
    let children: Vec<_> = events.iter().filter_map(|e| e.payload.spawned_by().map(|p| (e.payload.session_id().unwrap().to_string(), p.to_string()))).collect();
    assert_eq!(children.len(), 1, "{children:?}");
    let (child, parent) = &children[0];
    assert_ne!(child, parent);
    // The parent ran the `task` tool; the child read the marker itself.
    let ran = |session: &str, tool: &str| {
        events.iter().any(|e| matches!(&e.payload, Event::PartUpdated(PartEvent { part: Part::Tool(t) }) if t.session_id == session && t.tool == tool))
    };
    assert!(ran(parent, "task") && ran(child, "read") && !ran(parent, "read"));
}

#[test]
fn stored_messages_tie_each_step_to_its_prompt() {
    let tool: Vec<StoredMessage> = serde_json::from_str(MESSAGES_TOOL).unwrap();
    assert_eq!(tool.len(), 3);
    let user = &tool[0].info;
    assert_eq!(user.role, Role::User);
    for step in &tool[1..] {
        assert_eq!((step.info.role, step.info.parent_id.as_deref()), (Role::Assistant, Some(user.id.as_str())));
        assert!(step.info.is_complete());
    }
    let text: String = tool[2].parts.iter().filter_map(|p| match p { Part::Text(t) => Some(t.text.as_str()), _ => None }).collect();
    assert_eq!(text, "PROJECT_7");
    assert!(tool[1].parts.iter().any(|p| matches!(p, Part::Tool(t) if t.call_id == "call_1")));
    assert!(tool[1].parts.iter().any(|p| matches!(p, Part::StepFinish(s) if s.tokens.input > 0.0)));

    let fail: Vec<StoredMessage> = serde_json::from_str(MESSAGES_FAIL).unwrap();
    let error = fail[1].info.error.as_ref().expect("the failed step keeps its error");
    assert_eq!((error.name.as_str(), error.message()), ("APIError", "model not found"));
    assert!(fail[1].info.is_complete());

    let sub: Vec<StoredMessage> = serde_json::from_str(MESSAGES_SUBAGENT).unwrap();
    assert!(sub.iter().flat_map(|m| &m.parts).any(|p| matches!(p, Part::Tool(t) if t.tool == "task" && matches!(t.state, ToolState::Completed { .. }))));
}

#[test]
fn hearth_names_messages_the_way_the_runtime_sorts_them() {
    // A message the runtime created at this millisecond (from the recording).
    let runtime_made = "msg_2322f8463001WoMw91YCcl5WEM";
    let created_ms = 1_796_138_304_611;
    let ours = new_message_id(created_ms + 1, 0);
    assert_eq!(ours.len(), runtime_made.len());
    assert!(ours.starts_with("msg_2322f8464"), "{ours}");
    assert!(ours.as_str() > runtime_made, "a later id sorts later");
    assert!(new_message_id(created_ms - 1, 0).as_str() < runtime_made);
    assert!(ours[16..].chars().all(|c| c.is_ascii_alphanumeric()));
    assert_ne!(new_message_id(created_ms, 0), new_message_id(created_ms, 0), "random suffix");
}
