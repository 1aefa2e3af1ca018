use super::*;
use crate::store::test_support::{open_at, with_conversation};
use crate::store::{MessageRole, ToolCallStatus};

fn call(id: &str, status: ToolCallStatus, output: Option<&str>) -> ToolCall {
    ToolCall {
        call_id: id.into(),
        tool: "read".into(),
        input: serde_json::json!({"filePath": "marker.txt"}),
        output: output.map(Into::into),
        error: None,
        status,
    }
}

#[test]
fn ten_thousand_deltas_make_one_correct_reply_quickly() {
    let (store, conversation, _dir) = with_conversation();
    let reply = store.begin_assistant_message(&conversation).unwrap();
    let mut expected = String::new();
    for i in 0..10_000 {
        let delta = format!("w{i} é ");
        store.append_text(&reply.id, &delta).unwrap();
        expected.push_str(&delta);
    }
    // Reads see everything, buffered or not.
    assert_eq!(store.get_message(&reply.id).unwrap().text, expected);
    store.finish(&reply.id, MessageStatus::Done, None).unwrap();
    let messages = store.list_messages(&conversation).unwrap();
    assert_eq!(messages[0].text, expected);
    assert_eq!((messages[0].role, messages[0].status), (MessageRole::Assistant, MessageStatus::Done));
}

#[test]
fn a_done_reply_reads_as_the_runtime_stored_it_whatever_streamed() {
    let (store, conversation, _dir) = with_conversation();
    let reply = store.begin_assistant_message(&conversation).unwrap();
    // A gap in the event stream: only part of the text streamed.
    store.append_text(&reply.id, "PROJ").unwrap();
    store.finish_done(&reply.id, "PROJECT_7").unwrap();
    let stored = store.get_message(&reply.id).unwrap();
    assert_eq!((stored.text.as_str(), stored.status), ("PROJECT_7", MessageStatus::Done));
    assert!(matches!(store.finish_done(&reply.id, "again"), Err(StoreError::StatusChange { .. })));
    assert_eq!(store.get_message(&reply.id).unwrap().text, "PROJECT_7");
}

#[test]
fn a_finished_reply_takes_no_more_text() {
    let (store, conversation, _dir) = with_conversation();
    let reply = store.begin_assistant_message(&conversation).unwrap();
    store.append_text(&reply.id, "Hello").unwrap();
    store.finish(&reply.id, MessageStatus::Cancelled, None).unwrap();
    let err = store.append_text(&reply.id, " late").unwrap_err();
    assert_eq!(err.to_string(), "Only a reply being written can receive text; this message is cancelled.");
    let err = store.finish(&reply.id, MessageStatus::Done, None).unwrap_err();
    assert!(matches!(err, StoreError::StatusChange { .. }));
    assert_eq!(store.get_message(&reply.id).unwrap().text, "Hello");
}

#[test]
fn a_reply_past_its_bound_is_refused_and_keeps_what_it_had() {
    let (store, conversation, _dir) = with_conversation();
    let reply = store.begin_assistant_message(&conversation).unwrap();
    let chunk = "x".repeat(MAX_REPLY_TEXT_BYTES / 4);
    for _ in 0..4 {
        store.append_text(&reply.id, &chunk).unwrap();
    }
    let err = store.append_text(&reply.id, "y").unwrap_err();
    assert_eq!(err.to_string(), "This reply passed 16.0 MB and was stopped there.");
    store.finish(&reply.id, MessageStatus::Error, Some(&err.to_string())).unwrap();
    assert_eq!(store.get_message(&reply.id).unwrap().text.len(), MAX_REPLY_TEXT_BYTES);
}

#[test]
fn tool_calls_are_updated_in_place_and_listed_in_order() {
    let (store, conversation, _dir) = with_conversation();
    let reply = store.begin_assistant_message(&conversation).unwrap();
    store.upsert_tool_call(&reply.id, &call("call_1", ToolCallStatus::Running, None)).unwrap();
    store.upsert_tool_call(&reply.id, &call("call_2", ToolCallStatus::Running, None)).unwrap();
    store.upsert_tool_call(&reply.id, &call("call_1", ToolCallStatus::Done, Some("marker-123"))).unwrap();
    let mut failed = call("call_2", ToolCallStatus::Error, None);
    failed.error = Some("File not found".into());
    store.upsert_tool_call(&reply.id, &failed).unwrap();
    let huge = "z".repeat(MAX_TOOL_TEXT_BYTES * 2);
    store.upsert_tool_call(&reply.id, &call("call_3", ToolCallStatus::Done, Some(&huge))).unwrap();
    store.set_usage(&reply.id, &Usage { input_tokens: 1200, output_tokens: 80, reasoning_tokens: 5, cache_read_tokens: 1000 }).unwrap();

    let m = store.get_message(&reply.id).unwrap();
    let ids: Vec<_> = m.tool_calls.iter().map(|c| c.call_id.as_str()).collect();
    assert_eq!(ids, ["call_1", "call_2", "call_3"]);
    assert_eq!((m.tool_calls[0].status, m.tool_calls[0].output.as_deref()), (ToolCallStatus::Done, Some("marker-123")));
    assert_eq!(m.tool_calls[0].input, serde_json::json!({"filePath": "marker.txt"}));
    assert_eq!(m.tool_calls[1].error.as_deref(), Some("File not found"));
    let cut = m.tool_calls[2].output.as_deref().unwrap();
    assert!(cut.len() <= MAX_TOOL_TEXT_BYTES && cut.ends_with(TRUNCATION_NOTE));
    assert_eq!(m.usage.unwrap().input_tokens, 1200);
}

#[test]
fn after_a_crash_the_users_message_is_kept_and_the_reply_says_what_happened() {
    let (store, conversation, dir) = with_conversation();
    let question = store.add_user_message(&conversation, "Read marker.txt please", Vec::new()).unwrap();
    store.set_status(&question.id, MessageStatus::Sending).unwrap();
    store.set_status(&question.id, MessageStatus::Done).unwrap();
    let reply = store.begin_assistant_message(&conversation).unwrap();
    store.upsert_tool_call(&reply.id, &call("call_1", ToolCallStatus::Running, None)).unwrap();
    store.append_text(&reply.id, &"partial ".repeat(APPEND_FLUSH_BYTES)).unwrap();
    store.append_text(&reply.id, "unflushed tail").unwrap();
    // A second conversation had stored a message but crashed before sending it.
    let project = store.get_conversation(&conversation).unwrap().project_id;
    let other = store.create_conversation(&project, "Other").unwrap();
    let unsent = store.add_user_message(&other.id, "never sent", Vec::new()).unwrap();
    // Crash: no Drop, no flush, no finish.
    std::mem::forget(store);

    let store = open_at(dir.path());
    assert_eq!(store.recover_interrupted().unwrap(), 2);
    let messages = store.list_messages(&conversation).unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!((messages[0].text.as_str(), messages[0].status), ("Read marker.txt please", MessageStatus::Done));
    let r = &messages[1];
    assert_eq!((r.status, r.error.as_deref()), (MessageStatus::Error, Some(INTERRUPTED_REPLY_ERROR)));
    assert!(r.text.starts_with("partial "), "text written before the crash is kept");
    assert_eq!(r.tool_calls[0].status, ToolCallStatus::Error, "a tool cannot still be running");

    let unsent = store.get_message(&unsent.id).unwrap();
    assert_eq!((unsent.text.as_str(), unsent.status, unsent.error.as_deref()), ("never sent", MessageStatus::Error, Some(INTERRUPTED_SEND_ERROR)));
    // Recovery is idempotent.
    assert_eq!(store.recover_interrupted().unwrap(), 0);
}

#[test]
fn recovery_leaves_a_reply_streaming_in_this_process_alone() {
    let (store, conversation, _dir) = with_conversation();
    let reply = store.begin_assistant_message(&conversation).unwrap();
    assert_eq!(store.recover_interrupted().unwrap(), 0);
    store.append_text(&reply.id, "still going").unwrap();
    assert_eq!(store.get_message(&reply.id).unwrap().status, MessageStatus::Streaming);
}

#[test]
fn a_clean_close_writes_buffered_text() {
    let (store, conversation, dir) = with_conversation();
    let reply = store.begin_assistant_message(&conversation).unwrap();
    store.append_text(&reply.id, "short").unwrap();
    drop(store);
    let store = open_at(dir.path());
    assert_eq!(store.get_message(&reply.id).unwrap().text, "short");
}

#[test]
fn bounded_cuts_on_a_character_boundary() {
    let text = "é".repeat(100);
    let cut = bounded(&text, TRUNCATION_NOTE.len() + 5);
    assert!(cut.ends_with(TRUNCATION_NOTE) && cut.len() <= TRUNCATION_NOTE.len() + 5);
    assert_eq!(bounded("short", 100), "short");
}
