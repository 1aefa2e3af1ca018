//! The tracker fed with what the real runtime sent and stored (`fixtures/opencode-wire/`, recorded
//! by the example `record_wire_events`), whole and cut at every point.

use super::*;
use crate::opencode::wire::{Envelope, PartEvent, SessionRef, StatusEvent};

const EVENTS: &str = include_str!("../../../../fixtures/opencode-wire/events.jsonl");
const MESSAGES_TOOL: &str = include_str!("../../../../fixtures/opencode-wire/messages-tool.json");
const MESSAGES_FAIL: &str = include_str!("../../../../fixtures/opencode-wire/messages-fail.json");

/// One recorded turn: its session's events in order and the id of its prompt.
struct Recorded {
    events: Vec<Event>,
    user_message: String,
}

/// The recorded turn whose prompt contains `prompt`.
fn turn(prompt: &str) -> Recorded {
    let all: Vec<Event> = EVENTS.lines().map(|l| Envelope::decode(l).unwrap().payload).collect();
    let session = all
        .iter()
        .find_map(|e| match e {
            Event::PartUpdated(PartEvent { part: Part::Text(t) }) if t.text.contains(prompt) => Some(t.session_id.clone()),
            _ => None,
        })
        .expect("the recorded prompt");
    let events: Vec<Event> = all.into_iter().filter(|e| e.session_id() == Some(session.as_str())).collect();
    let user_message = events
        .iter()
        .find_map(|e| match e {
            Event::MessageUpdated(m) if m.info.role == Role::User => Some(m.info.id.clone()),
            _ => None,
        })
        .unwrap();
    Recorded { events, user_message }
}

/// Feed events; the outcome at the first idle that settles the turn.
fn feed(tracker: &mut TurnTracker, events: &[Event], out: &mut Vec<RuntimeEvent>) -> Option<Result<(), TurnFailure>> {
    for e in events {
        let up = tracker.on_event(e);
        out.extend(up.events);
        if matches!(e, Event::SessionIdle(_)) {
            if let Settled::Over(end) = tracker.on_idle() {
                return Some(end);
            }
        }
    }
    None
}

fn tool_events(events: &[RuntimeEvent]) -> Vec<&RuntimeEvent> {
    events.iter().filter(|e| matches!(e, RuntimeEvent::ToolStarted { .. } | RuntimeEvent::ToolFinished { .. })).collect()
}

#[test]
fn a_tool_step_then_text_ends_done_with_the_stored_text() {
    let rec = turn("read marker.txt");
    let mut t = TurnTracker::new(&rec.user_message, MAX_PROVIDER_RETRIES);
    let mut out = Vec::new();
    assert_eq!(feed(&mut t, &rec.events, &mut out), Some(Ok(())));
    assert_eq!(t.text(), "PROJECT_7");
    let tools = tool_events(&out);
    assert_eq!(tools.len(), 2, "{tools:?}");
    assert!(matches!(tools[0], RuntimeEvent::ToolStarted { tool, input, .. } if tool == "read" && input["filePath"] == "marker.txt"));
    assert!(matches!(tools[1], RuntimeEvent::ToolFinished { output, error: None, .. } if output.contains("PROJECT_7")));
    assert_eq!(out.iter().filter(|e| matches!(e, RuntimeEvent::Usage(_))).count(), 2, "one usage per step");
    let text: String = out.iter().filter_map(|e| match e { RuntimeEvent::TextDelta { text } => Some(text.as_str()), _ => None }).collect();
    assert_eq!(text, "PROJECT_7", "each character streamed once");
}

#[test]
fn a_failed_step_ends_at_the_idle_after_it_is_stored_not_the_first() {
    let rec = turn("FAIL please");
    let idles = rec.events.iter().filter(|e| matches!(e, Event::SessionIdle(_))).count();
    assert_eq!(idles, 2, "the runtime reports idle before and after storing the failed step");
    let mut t = TurnTracker::new(&rec.user_message, MAX_PROVIDER_RETRIES);
    let first_idle = rec.events.iter().position(|e| matches!(e, Event::SessionIdle(_))).unwrap();
    let mut out = Vec::new();
    for e in &rec.events[..first_idle] {
        t.on_event(e);
    }
    assert_eq!(t.on_idle(), Settled::Running, "the failed step is not stored yet at the first idle");
    let end = feed(&mut t, &rec.events[first_idle + 1..], &mut out).expect("settled at the second idle");
    let failure = end.unwrap_err();
    assert_eq!((failure.kind, failure.message.as_str()), (FailureKind::Model, "The model run failed: model not found"));
}

#[test]
fn an_aborted_turn_is_not_a_failure_of_its_own_and_its_late_events_do_not_end_the_next_turn() {
    let cancelled = turn("HOLD this");
    let mut t = TurnTracker::new(&cancelled.user_message, MAX_PROVIDER_RETRIES);
    assert_eq!(feed(&mut t, &cancelled.events, &mut Vec::new()), Some(Ok(())), "an abort alone reads as no error");

    // The next turn of that session starts while the aborted one still reports: none of its events
    // (older messages, its idles, its abort) may end or feed the new turn.
    let next_prompt = "msg_ffffffffffffzzzzzzzzzzzzzz";
    let mut next = TurnTracker::new(next_prompt, MAX_PROVIDER_RETRIES);
    let busy = Event::SessionStatus(StatusEvent { session_id: "s".into(), status: SessionStatus::Busy });
    next.on_event(&busy);
    let mut out = Vec::new();
    for e in &cancelled.events {
        out.extend(next.on_event(e).events);
        if matches!(e, Event::SessionIdle(_)) {
            assert_eq!(next.on_idle(), Settled::Unknown, "a late idle of the earlier turn ended this one");
        }
    }
    assert!(out.iter().all(|e| !matches!(e, RuntimeEvent::TextDelta { .. } | RuntimeEvent::ToolStarted { .. })), "{out:?}");
}

#[test]
fn a_refused_permission_ends_the_turn_with_the_tool_error_shown() {
    let rec = turn("OUTSIDE read");
    let mut t = TurnTracker::new(&rec.user_message, MAX_PROVIDER_RETRIES);
    let mut out = Vec::new();
    assert_eq!(feed(&mut t, &rec.events, &mut out), Some(Ok(())));
    assert!(out.iter().any(|e| matches!(e, RuntimeEvent::PermissionAsked { permission, .. } if permission == "external_directory")));
    assert!(out.iter().any(|e| matches!(e, RuntimeEvent::ToolFinished { error: Some(_), .. })));
}

/// The stream drops at every point of the turn; the turn catches up from the stored messages and
/// ends with exactly the stored reply: the text once, each tool once.
#[test]
fn a_gap_anywhere_in_the_stream_is_filled_from_the_stored_messages_without_duplicates() {
    let rec = turn("read marker.txt");
    let stored: Vec<StoredMessage> = serde_json::from_str(MESSAGES_TOOL).unwrap();
    let settling_idle = rec.events.iter().position(|e| matches!(e, Event::SessionIdle(_))).unwrap();
    for cut in 0..=settling_idle {
        for resume in cut..=rec.events.len() {
            let mut t = TurnTracker::new(&rec.user_message, MAX_PROVIDER_RETRIES);
            let mut out = Vec::new();
            // Before the gap; then the gap (events cut..resume are lost); then a reconnect.
            let ended_early = feed(&mut t, &rec.events[..cut], &mut out);
            assert_eq!(ended_early, None, "ended before the gap at {cut}");
            out.extend(t.reconcile(&stored));
            let settled = t.settled_after_reconcile();
            assert_eq!(settled, Settled::Over(Ok(())), "cut {cut}..{resume}");
            // Events delivered after the reconnect (the tail) change nothing.
            for e in &rec.events[resume..] {
                out.extend(t.on_event(e).events);
            }
            assert_eq!(t.text(), "PROJECT_7", "cut {cut}..{resume}");
            let text: String = out.iter().filter_map(|e| match e { RuntimeEvent::TextDelta { text } => Some(text.as_str()), _ => None }).collect();
            assert_eq!(text, "PROJECT_7", "text streamed twice or not at all, cut {cut}..{resume}");
            assert_eq!(tool_events(&out).len(), 2, "cut {cut}..{resume}: {out:?}");
            assert_eq!(out.iter().filter(|e| matches!(e, RuntimeEvent::Usage(_))).count(), 2, "cut {cut}..{resume}");
        }
    }
}

#[test]
fn an_error_stored_during_a_gap_is_the_turns_end() {
    let rec = turn("FAIL please");
    let stored: Vec<StoredMessage> = serde_json::from_str(MESSAGES_FAIL).unwrap();
    let mut t = TurnTracker::new(&rec.user_message, MAX_PROVIDER_RETRIES);
    // The stream dropped right after the prompt went out: nothing was seen.
    assert!(t.reconcile(&stored).is_empty());
    let Settled::Over(Err(failure)) = t.settled_after_reconcile() else { panic!("{:?}", t.settled_after_reconcile()) };
    assert_eq!(failure.message, "The model run failed: model not found");
}

#[test]
fn nothing_stored_yet_is_not_an_end() {
    let rec = turn("read marker.txt");
    let t = TurnTracker::new(&rec.user_message, MAX_PROVIDER_RETRIES);
    assert_eq!(t.settled_after_reconcile(), Settled::Unknown, "a prompt the runtime has not stored yet must not end as done");
    assert_eq!(t.on_idle(), Settled::Unknown);
    assert_eq!(t.text(), "");
}

#[test]
fn retries_are_surfaced_then_the_turn_is_stopped_with_a_sentence() {
    let mut t = TurnTracker::new("msg_0", 2);
    let status = |s: SessionStatus| Event::SessionStatus(StatusEvent { session_id: "s".into(), status: s });
    let retry = |n: u32| status(SessionStatus::Retry { attempt: n, message: "Connection refused".into() });
    assert!(!t.on_event(&retry(1)).abort);
    assert!(!t.on_event(&retry(2)).abort);
    let up = t.on_event(&retry(3));
    assert!(up.abort);
    assert_eq!(up.events, vec![RuntimeEvent::Retrying { attempt: 3, message: "Connection refused".into() }]);
    let step = MessageInfo {
        id: "msg_1".into(),
        session_id: "s".into(),
        role: Role::Assistant,
        parent_id: Some("msg_0".into()),
        time: Default::default(),
        error: Some(ErrorInfo { name: crate::opencode::wire::ABORTED_ERROR.into(), data: Default::default() }),
        finish: None,
        summary: None,
    };
    t.on_event(&Event::MessageUpdated(crate::opencode::wire::MessageEvent { info: step }));
    t.on_event(&Event::SessionIdle(SessionRef { session_id: "s".into() }));
    let Settled::Over(Err(f)) = t.on_idle() else { panic!() };
    assert!(f.message.contains("kept failing (3 attempts)") && f.message.contains("Connection refused"), "{}", f.message);
}
