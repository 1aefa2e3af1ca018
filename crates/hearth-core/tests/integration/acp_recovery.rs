//! An ACP agent killed in the middle of a turn (`opencode acp`, Claude Code): the turn ends with a
//! sentence within seconds, the user's message is kept, the next message starts the agent again
//! and continues the conversation's own native session, and nothing of the dead agent is left.

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_core::app::*;
use hearth_core::runtime::RuntimeChoice;
use hearth_core::scripted_model::{HoldRule, RequestKind};
use hearth_core::store::MessageStatus;

use support::{app_options as options, Recorder, TURN_TIMEOUT};

/// From the kill until the reply says so.
const DEATH_NOTICED_WITHIN: Duration = Duration::from_secs(5);

async fn a_killed_agent_is_a_sentence_and_the_next_turn_continues(agent: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("project");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("marker.txt"), "PROJECT_404").unwrap();
    let events = Arc::new(Recorder::default());
    let hearth = Hearth::open(options(&tmp.path().join("data"), support::app_locate_inputs()), events.clone()).await.unwrap();
    let project = hearth.store().add_project(&dir).unwrap();
    let choice = RuntimeChoice::Acp { agent: agent.into() };
    hearth.set_project_runtime(project.id.clone(), choice.clone()).await.unwrap();
    let conv = hearth.store().create_conversation(&project.id, "c").unwrap();
    hearth.send_message(&conv.id, "read marker.txt".into(), vec![]).await.unwrap();
    assert!(events.finished(&conv.id, 1).await.text.contains("PROJECT_404"));
    let session = hearth.store().get_conversation(&conv.id).unwrap().native_session_id.unwrap();
    let slot = choice.as_stored();
    let pid = hearth.runtime_statuses().iter().find(|r| r.slot == slot).and_then(|r| r.runtime.pid).unwrap();
    let tree = hearth_core::host::procinfo::descendants(pid).unwrap_or_default();

    // Killed while its model request is held: the turn fails at once, with a sentence.
    let model = hearth.builtin_model().unwrap();
    let hold = model.hold(HoldRule::kind(RequestKind::Agent).with_predicate(|r| r.last_user_text().contains("before the kill")));
    hearth.send_message(&conv.id, "read marker.txt before the kill".into(), vec![]).await.unwrap();
    assert!(hold.wait_until_held(1, TURN_TIMEOUT).await, "{agent}: the turn reached the model");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL).unwrap();
    let killed = Instant::now();
    let failed = events.finished(&conv.id, 2).await;
    assert!(killed.elapsed() < DEATH_NOTICED_WITHIN, "{agent}: noticed after {:?}", killed.elapsed());
    hold.release();
    assert_eq!(failed.status, MessageStatus::Error, "{agent}: {failed:?}");
    assert!(failed.error.as_deref().unwrap_or("").contains("stopped unexpectedly"), "{agent}: {failed:?}");
    let messages = hearth.store().list_messages(&conv.id).unwrap();
    assert!(messages.iter().any(|m| m.text == "read marker.txt before the kill"), "{agent}: the message is kept");

    // The next message: a new agent process, the same native session, the history still there.
    hearth.send_message(&conv.id, "read marker.txt after the kill".into(), vec![]).await.unwrap();
    let after = events.finished(&conv.id, 3).await;
    assert_eq!(after.status, MessageStatus::Done, "{agent}: {after:?}");
    assert!(after.text.contains("PROJECT_404"), "{agent}: {after:?}");
    assert_eq!(hearth.store().get_conversation(&conv.id).unwrap().native_session_id.as_deref(), Some(session.as_str()), "{agent}: the same session");
    let new_pid = hearth.runtime_statuses().iter().find(|r| r.slot == slot).and_then(|r| r.runtime.pid).unwrap();
    assert_ne!(new_pid, pid, "{agent}: a new process");
    assert!(
        model.requests().iter().any(|r| r.last_user_text().contains("after the kill") && r.session_id.as_deref() == Some(session.as_str())),
        "{agent}: the model request belongs to the conversation's session"
    );
    // What the dead agent had started (Claude Code's per-session processes) is gone too.
    for p in tree {
        assert!(support::gone_within(p, Duration::from_secs(10)).await, "{agent}: process {p} of the dead agent was left");
    }
    hearth.shutdown().await;
    assert!(support::gone_within(new_pid, Duration::from_secs(10)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn opencode_acp_killed_mid_turn() {
    if support::require_runtime().await.is_none() {
        return;
    }
    a_killed_agent_is_a_sentence_and_the_next_turn_continues("opencode").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claude_code_killed_mid_turn() {
    if support::require_runtime().await.is_none() || support::require_claude_agent().is_none() {
        return;
    }
    a_killed_agent_is_a_sentence_and_the_next_turn_continues("claude-code").await;
}
