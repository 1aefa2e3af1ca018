//! The real Claude Code, through its ACP adapter (`@agentclientprotocol/claude-agent-acp`), as a
//! project's runtime in Hearth, against the built-in scripted model over Anthropic Messages, fully
//! offline: an agent that is not OpenCode keeps the same promises.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use hearth_core::app::*;
use hearth_core::runtime::RuntimeChoice;
use hearth_core::scripted_model::{Api, HoldRule, RequestKind};
use hearth_core::store::MessageStatus;

use support::{app_options as options, Recorder, TURN_TIMEOUT};

fn claude() -> RuntimeChoice {
    RuntimeChoice::Acp { agent: "claude-code".into() }
}

use support::tool_outputs as output;

/// Two projects on one Claude Code adapter process: each reads its own marker with Claude's own
/// `Read`; continuation; an image; a knowledge search through the gateway under the request's own
/// grant (the session's credential reaches Claude on its `claude` process's command line, and the
/// gateway still serves only the adapter's processes); cancel closes the held model request; and
/// after a restart the conversation continues its session.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claude_code_keeps_the_promises_hearth_keeps_for_opencode() {
    if support::require_runtime().await.is_none() || support::require_claude_agent().is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let events = Arc::new(Recorder::default());
    let (hearth, ember, projects) = support::hearth_with_projects(tmp.path(), events.clone(), &claude(), &[("alpha", "PROJECT_80"), ("beta", "PROJECT_81")]).await;
    let a = hearth.store().create_conversation(&projects[0].id, "A").unwrap();
    let b = hearth.store().create_conversation(&projects[1].id, "B").unwrap();
    hearth.set_conversation_libraries(a.id.clone(), vec![ember.id.0.to_string()]).await.unwrap();

    for conv in [&a, &b] {
        hearth.send_message(&conv.id, "read marker.txt".into(), vec![]).await.unwrap();
    }
    for (conv, marker) in [(&a, "PROJECT_80"), (&b, "PROJECT_81")] {
        let reply = events.finished(&conv.id, 1).await;
        assert_eq!(reply.status, MessageStatus::Done, "{reply:?}");
        assert!(reply.text.contains(marker), "{reply:?}");
        assert!(reply.tool_calls.iter().any(|t| t.tool == "read" && t.output.as_deref().unwrap_or("").contains(marker)), "{}", output(&reply));
    }
    let statuses = hearth.runtime_statuses();
    let acp: Vec<_> = statuses.iter().filter(|r| r.slot == "acp:claude-code").collect();
    assert_eq!(acp.len(), 1, "one adapter process for both projects: {statuses:?}");
    let adapter = acp[0].runtime.pid.unwrap();
    let model = hearth.builtin_model().unwrap();
    let requests = model.requests();
    assert!(requests.iter().all(|r| r.api == Api::AnthropicMessages), "Claude Code spoke Anthropic Messages only");
    assert!(requests.iter().any(|r| r.kind == RequestKind::Title), "its title request was answered");
    let session_a = hearth.store().get_conversation(&a.id).unwrap().native_session_id.unwrap();
    assert!(requests.iter().any(|r| r.session_id.as_deref() == Some(session_a.as_str())), "the ACP session is Claude's session");

    // Continuation, with an image; then a knowledge search under A's own grant.
    let png = support::png(5);
    let staged = hearth.stage_attachment("shot.png".into(), base64::engine::general_purpose::STANDARD.encode(&png)).await.unwrap();
    hearth.send_message(&a.id, "read marker.txt again".into(), vec![staged.id]).await.unwrap();
    assert!(events.finished(&a.id, 2).await.text.contains("PROJECT_80"));
    let again = model.requests().into_iter().filter(|r| r.last_user_text().contains("again")).collect::<Vec<_>>();
    assert!(again.iter().any(|r| r.contains_text("PROJECT_80")), "the second turn saw the first");
    assert!(again.iter().any(|r| r.contains_text(&base64::engine::general_purpose::STANDARD.encode(&png))), "the image reached the model");
    hearth.send_message(&a.id, "Search knowledge for zephyrine handshake".into(), vec![]).await.unwrap();
    let searched = events.finished(&a.id, 3).await;
    assert!(output(&searched).contains("ember-protocol"), "A searched its library through the gateway: {}", output(&searched));
    hearth.send_message(&b.id, "Search knowledge for zephyrine handshake".into(), vec![]).await.unwrap();
    let refused = events.finished(&b.id, 2).await;
    assert!(!output(&refused).contains("ember-protocol") && output(&refused).contains("No knowledge library is attached"), "{}", output(&refused));

    // Cancel a reply held at the model: the turn ends cancelled and Claude drops its request.
    let hold = model.hold(HoldRule::kind(RequestKind::Agent).with_predicate(|r| r.last_user_text().contains("slowly")));
    hearth.send_message(&b.id, "read marker.txt slowly".into(), vec![]).await.unwrap();
    assert!(hold.wait_until_held(1, TURN_TIMEOUT).await, "the held prompt reached the model");
    hearth.cancel_turn(&b.id).unwrap();
    assert_eq!(events.finished(&b.id, 3).await.status, MessageStatus::Cancelled);
    assert!(support::wait_until(Duration::from_secs(20), || async { hold.held_count() == 0 }).await, "Claude Code kept its cancelled model request open");
    hold.release();

    // Restart: A continues its stored session in a new adapter process.
    hearth.shutdown().await;
    drop(hearth);
    assert!(support::gone_within(adapter, Duration::from_secs(10)).await, "the adapter stopped with Hearth");
    let events = Arc::new(Recorder::default());
    let hearth = Hearth::open(options(&data, support::app_locate_inputs()), events.clone()).await.unwrap();
    hearth.send_message(&a.id, "read marker.txt after the restart".into(), vec![]).await.unwrap();
    let after = events.finished(&a.id, 1).await;
    assert!(after.text.contains("PROJECT_80"), "{after:?}");
    assert_eq!(hearth.store().get_conversation(&a.id).unwrap().native_session_id.as_deref(), Some(session_a.as_str()));
    let model = hearth.builtin_model().unwrap();
    assert!(
        model.requests().iter().any(|r| r.last_user_text().contains("after the restart") && r.contains_text("read marker.txt again")),
        "Claude Code loaded the conversation's history"
    );
    let pid = hearth.runtime_statuses().iter().find(|r| r.slot == "acp:claude-code").and_then(|r| r.runtime.pid).unwrap();
    let children = hearth_core::host::procinfo::descendants(pid).unwrap_or_default();
    hearth.shutdown().await;
    for p in std::iter::once(pid).chain(children) {
        assert!(support::gone_within(p, Duration::from_secs(10)).await, "process {p} of the adapter was left");
    }
}
