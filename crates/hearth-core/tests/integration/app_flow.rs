//! The app's conversation flow against the real runtime and the built-in scripted model: what a
//! user does in the window, without the window.

use crate::support;

use std::sync::Arc;

use base64::Engine as _;
use hearth_core::app::*;
use hearth_core::binaries::opencode::LocateInputs;
use hearth_core::scripted_model::{default_reply, Gate, HoldRule, Reply, RequestKind, Script};
use hearth_core::store::{Message, MessageStatus};

use support::{app_options as options, Recorder, TURN_TIMEOUT};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_conversation_streams_persists_continues_and_survives_a_restart() {
    if support::require_runtime().await.is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let project_dir = tmp.path().join("project");
    std::fs::create_dir(&project_dir).unwrap();
    std::fs::write(project_dir.join("marker.txt"), "PROJECT_9").unwrap();
    let locate = LocateInputs { anchors: vec![support::workspace_root()], ..Default::default() };

    let events = Arc::new(Recorder::default());
    let hearth = Hearth::open(options(&data, locate.clone()), events.clone()).await.unwrap();
    let project = hearth.store().add_project(&project_dir).unwrap();
    let conv = hearth.store().create_conversation(&project.id, "First").unwrap();
    hearth.open_project(&project.id).await.unwrap();

    // A turn with a tool call and an image.
    let png = base64::engine::general_purpose::STANDARD.encode(support::png(2));
    let staged = hearth.stage_attachment("shot.png".into(), png).await.unwrap();
    assert!(staged.thumbnail_data_url.starts_with("data:image/png;base64,"));
    let user = hearth.send_message(&conv.id, "Read marker.txt".into(), vec![staged.id.clone()]).await.unwrap();
    assert_eq!(user.text, "Read marker.txt");
    let reply = events.finished(&conv.id, 1).await;
    assert_eq!(reply.status, MessageStatus::Done, "{reply:?}");
    assert_eq!(reply.text, "PROJECT_9");
    assert_eq!(reply.tool_calls.len(), 1);
    assert_eq!(reply.tool_calls[0].tool, "read");
    let streamed: String = events
        .0
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match &e.kind {
            ConversationUpdateKind::Runtime { event: hearth_core::runtime::RuntimeEvent::TextDelta { text }, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, "PROJECT_9", "the reply streamed to the window");
    let model = hearth.builtin_model().expect("the built-in model served the turn");
    assert!(model.requests().iter().any(|r| r.contains_text(&base64::engine::general_purpose::STANDARD.encode(support::png(2)))), "the image reached the model");
    let session = hearth.store().get_conversation(&conv.id).unwrap().native_session_id.expect("native session stored");

    // A second turn continues the same native session.
    hearth.send_message(&conv.id, "Read marker.txt again".into(), vec![]).await.unwrap();
    let reply2 = events.finished(&conv.id, 2).await;
    assert_eq!(reply2.text, "PROJECT_9");
    assert_eq!(hearth.store().get_conversation(&conv.id).unwrap().native_session_id.as_deref(), Some(session.as_str()));

    // A view opened while a reply streams (paused half way, and at every moment of its streaming):
    // its snapshot plus the updates after it are the reply, each character once.
    let gate = Gate::new();
    model.set_script(halves_script(gate.clone()));
    let seen = events.0.lock().unwrap().len();
    hearth.send_message(&conv.id, "Answer in halves".into(), vec![]).await.unwrap();
    let mut snapshots = Vec::new();
    let deadline = tokio::time::Instant::now() + TURN_TIMEOUT;
    while deltas_after(&events, seen, 0).is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "the first half never streamed");
        tokio::time::sleep(SAMPLE_EVERY).await;
    }
    snapshots.push(hearth.conversation_snapshot(conv.id.clone()).await.unwrap());
    gate.open();
    while hearth.is_running(&conv.id) {
        snapshots.push(hearth.conversation_snapshot(conv.id.clone()).await.unwrap());
        tokio::time::sleep(SAMPLE_EVERY).await;
    }
    let halves = events.finished(&conv.id, 3).await;
    assert_eq!(halves.text, format!("{FIRST_HALF}{SECOND_HALF}"));
    for snap in &snapshots {
        let stored = snap.messages.iter().find(|m| m.id == halves.id).expect("the reply is in every snapshot");
        let later: String = deltas_after(&events, seen, snap.update_seq).into_iter().collect();
        assert_eq!(format!("{}{later}", stored.text), halves.text, "the snapshot at update {} plus the later updates", snap.update_seq);
    }
    assert!(snapshots[0].messages.iter().any(|m| m.id == halves.id && m.text == FIRST_HALF), "one snapshot was taken half way");
    model.set_script(Script::default_agent());

    // A held turn is cancelled; the user's message stays.
    let hold = model.hold(HoldRule::any().with_predicate(|r| r.last_user_text().contains("slow")));
    hearth.send_message(&conv.id, "slow please".into(), vec![]).await.unwrap();
    assert!(matches!(hearth.send_message(&conv.id, "another".into(), vec![]).await, Err(AppError::Busy)));
    assert!(hold.wait_until_held(1, TURN_TIMEOUT).await);
    hearth.cancel_turn(&conv.id).unwrap();
    let cancelled = events.finished(&conv.id, 4).await;
    assert_eq!(cancelled.status, MessageStatus::Cancelled);
    hold.release();

    let before = hearth.store().list_messages(&conv.id).unwrap();
    assert_eq!(before.len(), 8);
    assert_eq!(before[0].attachments.len(), 1, "the image is kept with the message");
    hearth.shutdown().await;
    drop(hearth);

    // Restart: everything is as it was.
    let reopened = Hearth::open(options(&data, locate), Arc::new(NoUpdates)).await.unwrap();
    let after = reopened.store().list_messages(&conv.id).unwrap();
    assert_eq!(after, before);
    reopened.shutdown().await;
}

/// How often the test looks at a streaming reply.
const SAMPLE_EVERY: std::time::Duration = std::time::Duration::from_millis(5);
const FIRST_HALF: &str = "The first half of the reply, ";
const SECOND_HALF: &str = "and the second half, sent once the test opens the gate.";

/// The built-in model's default agent, except that "in halves" is answered in two halves with
/// `gate` between them.
fn halves_script(gate: Gate) -> Script {
    Script::custom(move |r| {
        if r.kind == RequestKind::Agent && r.last_user_text().contains("in halves") {
            return Reply::PausedText { before: FIRST_HALF.into(), after: SECOND_HALF.into(), gate: gate.clone() };
        }
        default_reply(r)
    })
}

/// The text deltas recorded after the first `skip` updates whose `seq` is above `after`.
fn deltas_after(events: &Recorder, skip: usize, after: u64) -> Vec<String> {
    events.0.lock().unwrap()[skip..]
        .iter()
        .filter(|u| u.seq > after)
        .filter_map(|u| match &u.kind {
            ConversationUpdateKind::Runtime { event: hearth_core::runtime::RuntimeEvent::TextDelta { text }, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// A runtime that cannot start: the message is kept, the reply says why, and the turn's grant is
/// revoked at once (the run never started, so nothing else would end it).
#[tokio::test]
async fn a_runtime_that_cannot_start_keeps_the_message_and_explains() {
    let tmp = tempfile::tempdir().unwrap();
    let project_dir = tmp.path().join("project");
    std::fs::create_dir(&project_dir).unwrap();
    let nowhere = LocateInputs { env_path: Some(tmp.path().join("missing-opencode")), ..Default::default() };
    let events = Arc::new(Recorder::default());
    let hearth = Hearth::open(options(&tmp.path().join("data"), nowhere), events.clone()).await.unwrap();
    let project = hearth.store().add_project(&project_dir).unwrap();
    let conv = hearth.store().create_conversation(&project.id, "c").unwrap();
    hearth.send_message(&conv.id, "my precious words".into(), vec![]).await.unwrap();
    let reply = events.finished(&conv.id, 1).await;
    assert_eq!(reply.status, MessageStatus::Error);
    assert!(reply.error.as_deref().unwrap_or("").contains("missing-opencode does not exist"), "{reply:?}");
    let messages = hearth.store().list_messages(&conv.id).unwrap();
    assert_eq!(messages[0].text, "my precious words");
    assert_eq!(hearth.live_grants(), 0, "the grant of a run that never started is revoked at once");
    // The project folder vanishes: the message is refused with a sentence and no grant is left.
    std::fs::remove_dir(&project_dir).unwrap();
    let gone = hearth.send_message(&conv.id, "still there?".into(), vec![]).await.unwrap_err();
    assert!(gone.to_string().contains(&project_dir.display().to_string()), "{gone}");
    assert_eq!(hearth.live_grants(), 0);
    hearth.shutdown().await;
}

/// Two conversations of ONE project run at once, each with its own knowledge grant: each reaches
/// only its own libraries, and a conversation with none is refused, not handed another's data.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_conversations_of_one_project_see_only_their_own_libraries() {
    if support::require_runtime().await.is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let project_dir = tmp.path().join("project");
    std::fs::create_dir(&project_dir).unwrap();
    let fixtures = support::workspace_root().join("fixtures/knowledge");
    let events = Arc::new(Recorder::default());
    let locate = LocateInputs { anchors: vec![support::workspace_root()], ..Default::default() };
    let hearth = Hearth::open(options(&tmp.path().join("data"), locate), events.clone()).await.unwrap();

    let ember = hearth.create_library("Ember".into()).await.unwrap();
    let tide = hearth.create_library("Tide".into()).await.unwrap();
    hearth.import_into_library(ember.id.0, fixtures.join("ember-protocol.md").display().to_string(), |_| {}).await.unwrap();
    hearth.import_into_library(tide.id.0, fixtures.join("tidewater-ledger.txt").display().to_string(), |_| {}).await.unwrap();

    let project = hearth.store().add_project(&project_dir).unwrap();
    let a = hearth.store().create_conversation(&project.id, "A").unwrap();
    let b = hearth.store().create_conversation(&project.id, "B").unwrap();
    let c = hearth.store().create_conversation(&project.id, "C").unwrap();
    hearth.set_conversation_libraries(a.id.clone(), vec![ember.id.0.to_string()]).await.unwrap();
    hearth.set_conversation_libraries(b.id.clone(), vec![tide.id.0.to_string()]).await.unwrap();

    // The same question in all three, at once.
    for conv in [&a, &b, &c] {
        hearth.send_message(&conv.id, "Search knowledge for zephyrine handshake".into(), vec![]).await.unwrap();
    }
    let (ra, rb, rc) = (events.finished(&a.id, 1).await, events.finished(&b.id, 1).await, events.finished(&c.id, 1).await);
    let output = |m: &Message| m.tool_calls.first().map(|t| format!("{:?} {:?}", t.output, t.error)).unwrap_or_else(|| format!("no tool call: {}", m.text));
    assert!(output(&ra).contains("ember-protocol"), "A searches its own library: {}", output(&ra));
    assert!(output(&rb).contains("No results") && !output(&rb).contains("ember-protocol"), "B must not see A's library: {}", output(&rb));
    assert!(output(&rc).contains("No knowledge library is attached"), "C has no grant: {}", output(&rc));
    hearth.shutdown().await;
}
