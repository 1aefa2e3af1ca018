//! The ACP runtime family through the app: `opencode acp` (the bundled runtime binary speaking the
//! Agent Client Protocol) against the built-in scripted model, chosen per project as a user does.

use crate::support;

use std::sync::Arc;

use base64::Engine as _;
use hearth_core::app::*;
use hearth_core::runtime::RuntimeChoice;
use hearth_core::scripted_model::{HoldRule, RequestKind};
use hearth_core::store::MessageStatus;

use support::{app_options as options, Recorder};

fn opencode_acp() -> RuntimeChoice {
    RuntimeChoice::Acp { agent: "opencode".into() }
}

use support::tool_outputs as output;

/// Two projects on one `opencode acp` process: each conversation its own native session, each
/// turn reading its own project's marker with the agent's own tool; continuation, an image, a
/// knowledge search under each request's own grant (the gateway reached through the session's own
/// credential), cancel; and after a restart of Hearth the conversation continues its session.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn opencode_acp_serves_every_project_from_one_agent_process() {
    if support::require_runtime().await.is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let events = Arc::new(Recorder::default());
    let (hearth, ember, projects) = support::hearth_with_projects(tmp.path(), events.clone(), &opencode_acp(), &[("alpha", "PROJECT_70"), ("beta", "PROJECT_71")]).await;
    let a1 = hearth.store().create_conversation(&projects[0].id, "A1").unwrap();
    let a2 = hearth.store().create_conversation(&projects[0].id, "A2").unwrap();
    let b1 = hearth.store().create_conversation(&projects[1].id, "B1").unwrap();
    hearth.set_conversation_libraries(a2.id.clone(), vec![ember.id.0.to_string()]).await.unwrap();

    // Wave 1, at once: each reads its own marker.
    for conv in [&a1, &b1] {
        hearth.send_message(&conv.id, "Read marker.txt".into(), vec![]).await.unwrap();
    }
    let (ra, rb) = (events.finished(&a1.id, 1).await, events.finished(&b1.id, 1).await);
    for (reply, marker) in [(&ra, "PROJECT_70"), (&rb, "PROJECT_71")] {
        assert_eq!(reply.status, MessageStatus::Done, "{reply:?}");
        assert_eq!(reply.text, marker);
        assert!(reply.tool_calls.iter().any(|t| t.tool == "read" && t.output.as_deref().unwrap_or("").contains(marker)), "{}", output(reply));
    }
    let statuses = hearth.runtime_statuses();
    let acp: Vec<_> = statuses.iter().filter(|r| r.family == "acp").collect();
    assert_eq!(acp.len(), 1, "one agent process for every project: {statuses:?}");
    assert_eq!(acp[0].slot, "acp:opencode");
    assert!(statuses.iter().all(|r| r.family == "acp"), "OpenCode's HTTP server was never started: {statuses:?}");
    let agent_pid = acp[0].runtime.pid.expect("the agent runs");
    let sessions: Vec<String> = [&a1, &b1].iter().map(|c| hearth.store().get_conversation(&c.id).unwrap().native_session_id.unwrap()).collect();
    assert_ne!(sessions[0], sessions[1]);

    // Continuation: the model sees the first turn when the second is sent.
    hearth.send_message(&a1.id, "Read marker.txt again".into(), vec![]).await.unwrap();
    let again = events.finished(&a1.id, 2).await;
    assert_eq!(again.text, "PROJECT_70");
    let model = hearth.builtin_model().unwrap();
    assert!(
        model.requests().iter().any(|r| r.last_user_text().contains("again") && r.contains_text("PROJECT_70") && r.session_id.as_deref() == Some(sessions[0].as_str())),
        "the second turn continued the first's session"
    );

    // An image and a knowledge search in A2, held at the model while A1 — the same folder, so the
    // same OpenCode instance — searches too: A2's search runs under A2's own grant through the
    // gateway, and A1's (no library) is refused, never answered under A2's grant, which is live.
    let png = support::png(3);
    let staged = hearth.stage_attachment("shot.png".into(), base64::engine::general_purpose::STANDARD.encode(&png)).await.unwrap();
    let hold = model.hold(HoldRule::kind(RequestKind::Agent).with_predicate(|r| r.last_user_text().contains("A2 asks:") && r.tool_results_after_last_user().is_empty()));
    hearth.send_message(&a2.id, "A2 asks: search knowledge for zephyrine handshake".into(), vec![staged.id]).await.unwrap();
    assert!(hold.wait_until_held(1, support::TURN_TIMEOUT).await, "A2's request reached the model");
    hearth.send_message(&a1.id, "A1 asks: search knowledge for zephyrine handshake".into(), vec![]).await.unwrap();
    let refused = events.finished(&a1.id, 3).await;
    assert!(output(&refused).contains("No knowledge library is attached") && !output(&refused).contains("ember-protocol"), "{}", output(&refused));
    hold.release();
    let searched = events.finished(&a2.id, 1).await;
    assert_eq!(searched.status, MessageStatus::Done, "{searched:?}");
    assert!(output(&searched).contains("ember-protocol"), "A2 searched its library through the gateway: {}", output(&searched));
    assert!(model.requests().iter().any(|r| r.contains_text(&base64::engine::general_purpose::STANDARD.encode(&png))), "the image reached the model");
    // B1 has no library: its search is refused, never answered from A2's.
    hearth.send_message(&b1.id, "Search knowledge for zephyrine handshake".into(), vec![]).await.unwrap();
    let refused = events.finished(&b1.id, 2).await;
    assert!(output(&refused).contains("No knowledge library is attached") && !output(&refused).contains("ember-protocol"), "{}", output(&refused));

    // Cancel a held reply: the notice that streamed is kept, the turn ends cancelled.
    hearth.send_message(&a1.id, "[hold] take your time".into(), vec![]).await.unwrap();
    assert!(support::wait_until(support::TURN_TIMEOUT, || async { model.requests().iter().any(|r| r.last_user_text().contains("[hold]")) }).await);
    hearth.cancel_turn(&a1.id).unwrap();
    let cancelled = events.finished(&a1.id, 4).await;
    assert_eq!(cancelled.status, MessageStatus::Cancelled, "{cancelled:?}");

    // Restart: the conversation continues its stored session in a new agent process.
    let before = hearth.store().list_messages(&a1.id).unwrap();
    hearth.shutdown().await;
    drop(hearth);
    assert!(support::gone_within(agent_pid, std::time::Duration::from_secs(10)).await, "the agent stopped with Hearth");
    let events = Arc::new(Recorder::default());
    let hearth = Hearth::open(options(&data, support::app_locate_inputs()), events.clone()).await.unwrap();
    assert_eq!(hearth.store().list_messages(&a1.id).unwrap(), before);
    hearth.send_message(&a1.id, "Read marker.txt after the restart".into(), vec![]).await.unwrap();
    let after = events.finished(&a1.id, 1).await;
    assert_eq!(after.text, "PROJECT_70", "{after:?}");
    assert_eq!(hearth.store().get_conversation(&a1.id).unwrap().native_session_id.as_deref(), Some(sessions[0].as_str()), "the same native session");
    let model = hearth.builtin_model().unwrap();
    assert!(
        model.requests().iter().any(|r| r.last_user_text().contains("after the restart") && r.contains_text("Read marker.txt again")),
        "the agent loaded the conversation's history"
    );
    let new_pid = hearth.runtime_statuses().iter().find(|r| r.family == "acp").and_then(|r| r.runtime.pid).unwrap();
    hearth.shutdown().await;
    assert!(support::gone_within(new_pid, std::time::Duration::from_secs(10)).await, "no agent left after Hearth stops");
}
