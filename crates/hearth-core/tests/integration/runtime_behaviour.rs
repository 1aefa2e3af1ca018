//! The real runtime under bad input and user actions: cancel, a refusing model endpoint, a deleted
//! project, mislabelled images, read-only mode, and the agent reaching outside its project.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use hearth_core::opencode::config::{Authentication, ModelProfile, Protocol};
use hearth_core::opencode::OpenCodeRuntime;
use hearth_core::runtime::*;
use hearth_core::scripted_model::{default_reply, HoldRule, Reply, Script, ScriptedModelServer};
use hearth_core::space::{resolve_local, ExecutionSpace};
use support::{kit::Finished, run_request as request, TURN_TIMEOUT};
use tokio_util::sync::CancellationToken;

const REFUSED_PROFILE: &str = "refused";
/// A cancelled turn ends at once (the runtime aborts in ~100 ms).
const CANCEL_BOUND: Duration = Duration::from_secs(10);

async fn collect(rt: &OpenCodeRuntime, req: RunRequest, cancel: CancellationToken) -> Finished {
    support::run_to_end(rt, req, cancel, TURN_TIMEOUT).await.expect("the run ended")
}

fn failure(f: &Finished) -> &str {
    match &f.end {
        TurnEnd::Failed(TurnFailure { message, .. }) => message,
        other => panic!("expected a failure, got {other:?} after {:?}", f.events),
    }
}

fn read_outside(events: &[RuntimeEvent]) -> (Option<String>, String) {
    let read = events.iter().find_map(|e| match e {
        RuntimeEvent::ToolFinished { tool, error, output, .. } if tool == "read" => Some((error.clone(), output.clone())),
        _ => None,
    });
    read.expect("the read tool ran")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_real_runtime_handles_bad_input_and_user_actions() {
    let Some(found) = support::require_runtime().await else { return };
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().canonicalize().unwrap().join("project");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(project.join("marker.txt"), "PROJECT_42").unwrap();
    let space = resolve_local(&project).unwrap();

    let model = ScriptedModelServer::start(Script::custom(|r| {
        if r.last_user_text().contains("OUTSIDE") && r.tool_results_after_last_user().is_empty() {
            return Reply::tool_call("read", serde_json::json!({ "filePath": "/etc/hostname" }));
        }
        default_reply(r)
    }))
    .unwrap();
    let mut config = support::scripted_config(&found, &model, true);
    // A second profile whose endpoint refuses connections: nothing listens on this port.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    config.profiles.push(ModelProfile {
        id: REFUSED_PROFILE.into(),
        name: "Refusing endpoint".into(),
        protocol: Protocol::OpenAiChatCompletions,
        base_url: format!("http://127.0.0.1:{closed}/v1"),
        model: "nothing".into(),
        authentication: Authentication::None,
        image_input: false,
    });
    let rt = OpenCodeRuntime::new(config, tmp.path().join("rt"), RuntimeHost::default());

    // 1. Cancel a turn held at the model; the conversation then goes on normally.
    let hold = model.hold(HoldRule::any().with_predicate(|r| r.last_user_text().contains("HOLD-ME")));
    let cancel = CancellationToken::new();
    let held_run = tokio::spawn({
        let (rt, req, cancel) = (rt.clone(), request("cancel", "HOLD-ME please", &space), cancel.clone());
        async move { collect(&rt, req, cancel).await }
    });
    assert!(hold.wait_until_held(1, TURN_TIMEOUT).await, "the turn never reached the model");
    let t0 = std::time::Instant::now();
    cancel.cancel();
    let cancelled = held_run.await.unwrap();
    assert_eq!(cancelled.end, TurnEnd::Cancelled);
    assert!(t0.elapsed() < CANCEL_BOUND, "cancel took {:?}", t0.elapsed());
    hold.release();
    let next = collect(&rt, request("cancel", "Read marker.txt", &space), CancellationToken::new()).await;
    assert_eq!(next.done_text(), Some("PROJECT_42"), "{:?}", next.events);

    // 2. Read-only mode: the runtime is not given edit or shell tools at all.
    let mut ask = request("ask", "Read marker.txt ASK-MODE", &space);
    ask.work_mode = WorkMode::Ask;
    let asked_turn = collect(&rt, ask, CancellationToken::new()).await;
    assert_eq!(asked_turn.done_text(), Some("PROJECT_42"), "{:?}", asked_turn.events);
    let asked: Vec<_> = model.requests().into_iter().filter(|r| r.last_user_text().contains("ASK-MODE")).collect();
    assert!(!asked.is_empty());
    for r in &asked {
        assert!(r.has_tool("read"), "reading stays allowed");
        for denied in ["bash", "edit", "write", "task"] {
            assert!(!r.has_tool(denied), "ask mode offered `{denied}`: {:?}", r.tool_names());
        }
    }
    // ... and Execute mode gives them back in the same conversation.
    let execute = collect(&rt, request("ask", "Read marker.txt EXECUTE-AGAIN", &space), CancellationToken::new()).await;
    assert_eq!(execute.done_text(), Some("PROJECT_42"));
    let again = model.requests().into_iter().find(|r| r.last_user_text().contains("EXECUTE-AGAIN")).unwrap();
    assert!(again.has_tool("bash") && again.has_tool("edit"), "{:?}", again.tool_names());

    // 3. Reaching outside the project is refused by the session's ruleset, in either mode.
    for mode in [WorkMode::Execute, WorkMode::Ask] {
        let mut outside = request(&format!("outside-{mode:?}"), "OUTSIDE: read a system file", &space);
        outside.work_mode = mode;
        let turn = collect(&rt, outside, CancellationToken::new()).await;
        let (error, output) = read_outside(&turn.events);
        assert!(error.is_some(), "{mode:?}: reading /etc/hostname from a project must be refused, got output {output:?}");
        assert!(!turn.events.iter().any(|e| matches!(e, RuntimeEvent::PermissionAsked { .. })), "the ruleset decides; nobody is asked");
    }

    // 4. A model endpoint that refuses connections: retries are surfaced, then a clear error.
    let mut refused = request("refused", "hello", &space);
    refused.profile_id = Some(REFUSED_PROFILE.into());
    let turn = collect(&rt, refused, CancellationToken::new()).await;
    let retries = turn.events.iter().filter(|e| matches!(e, RuntimeEvent::Retrying { .. })).count();
    assert!(retries >= 1, "retries not surfaced: {:?}", turn.events);
    assert!(failure(&turn).contains("kept failing"), "{:?}", turn.end);

    // 5. An image that is not what its media type says never reaches the model...
    let mut lie = request("images", "look", &space);
    let lie_id = lie.request_id.clone();
    lie.images = vec![ImageInput { name: "x.jpg".into(), media_type: "image/jpeg".into(), bytes: Arc::new(support::png(3)) }];
    let turn = collect(&rt, lie, CancellationToken::new()).await;
    assert!(failure(&turn).contains("says it is image/jpeg but its content is image/png"), "{:?}", turn.end);
    assert!(!model.requests().iter().any(|r| r.contains_text(&lie_id)));
    // ... nor does one sent to a profile without image input.
    let mut no_images = request("images", "look", &space);
    no_images.profile_id = Some(REFUSED_PROFILE.into());
    no_images.images = vec![ImageInput { name: "x.png".into(), media_type: "image/png".into(), bytes: Arc::new(support::png(3)) }];
    let turn = collect(&rt, no_images, CancellationToken::new()).await;
    assert!(failure(&turn).contains("does not accept images"), "{:?}", turn.end);

    // 6. A project folder deleted while open.
    let doomed = tmp.path().join("doomed");
    std::fs::create_dir(&doomed).unwrap();
    let doomed_space: ExecutionSpace = resolve_local(&doomed).unwrap();
    std::fs::remove_dir(&doomed).unwrap();
    let turn = collect(&rt, request("doomed", "hello", &doomed_space), CancellationToken::new()).await;
    assert!(matches!(&turn.end, TurnEnd::Failed(f) if f.kind == FailureKind::ProjectMissing && f.message.contains("is gone")), "{:?}", turn.end);

    // 7. With the project's "ask" policy, the same reach outside is surfaced and answered by the user.
    let mut asking = request("asking", "OUTSIDE: read a system file", &space);
    asking.outside_project = OutsideProject::Ask;
    let mut stream = rt.run(asking, CancellationToken::new());
    let mut events = Vec::new();
    let answered = tokio::time::timeout(TURN_TIMEOUT, async {
        use futures::StreamExt;
        while let Some(ev) = stream.next().await {
            if let RuntimeEvent::PermissionAsked { permission_id, permission, .. } = &ev {
                assert_eq!(permission, "external_directory");
                rt.reply_permission(&space, permission_id, PermissionReply::Once).await.unwrap();
            }
            events.push(ev);
        }
    })
    .await;
    assert!(answered.is_ok(), "run did not finish after the permission was answered: {events:?}");
    assert!(events.iter().any(|e| matches!(e, RuntimeEvent::PermissionAsked { .. })), "{events:?}");
    let (error, _) = read_outside(&events);
    assert!(error.is_none(), "after `once`, the read went through: {events:?}");
    assert!(matches!(events.last(), Some(RuntimeEvent::Ended { end: TurnEnd::Done { .. } })), "{events:?}");

    // The runtime kept running through all of it, in one process.
    assert!(rt.test_connection().await.unwrap().healthy);
    assert_eq!(rt.status().launches, 1);
    let pid = rt.status().pid.unwrap();
    rt.dispose().await;
    assert!(support::gone_within(pid, Duration::from_secs(10)).await);
    model.shutdown().await;
}
