//! The real runtime under bad input and user actions: cancel, a refusing model endpoint, a deleted
//! project, mislabelled images, read-only mode, and the agent reaching outside its project.

mod support;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use hearth_core::opencode::config::{Authentication, ModelProfile, Protocol};
use hearth_core::opencode::runtime::{OpenCodeRuntime, OutsideProject, RuntimeOptions, SharedOpenCode};
use hearth_core::runtime::*;
use hearth_core::scripted_model::{default_reply, HoldRule, Reply, Script, ScriptedModelServer};
use hearth_core::space::{resolve_local, ExecutionSpace};
use tokio_util::sync::CancellationToken;

const RUN_TIMEOUT: Duration = Duration::from_secs(120);
const REFUSED_PROFILE: &str = "refused";

fn request(conversation: &str, prompt: &str, space: &ExecutionSpace) -> RunRequest {
    RunRequest {
        request_id: uuid::Uuid::new_v4().to_string(),
        conversation_id: conversation.into(),
        prompt: prompt.into(),
        work_mode: WorkMode::Execute,
        images: vec![],
        profile_id: None,
        space: space.clone(),
    }
}

async fn collect(rt: &SharedOpenCode, req: RunRequest, cancel: CancellationToken) -> Vec<RuntimeEvent> {
    tokio::time::timeout(RUN_TIMEOUT, rt.run(req, cancel).collect::<Vec<_>>()).await.expect("run timed out")
}

fn last(events: &[RuntimeEvent]) -> &RuntimeEvent {
    events.last().expect("no events")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_real_runtime_handles_bad_input_and_user_actions() {
    let Some((binary, rg_dir)) = support::require_runtime().await else { return };
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
    let mut config = support::config_for(binary, rg_dir, &model, true);
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
    let rt = SharedOpenCode(OpenCodeRuntime::new(config, tmp.path().join("rt")));

    // 1. Cancel a turn held at the model; the conversation then goes on normally.
    let hold = model.hold(HoldRule::any().with_predicate(|r| r.last_user_text().contains("HOLD-ME")));
    let cancel = CancellationToken::new();
    let held_run = tokio::spawn({
        let (rt, req, cancel) = (rt.clone(), request("cancel", "HOLD-ME please", &space), cancel.clone());
        async move { collect(&rt, req, cancel).await }
    });
    assert!(hold.wait_until_held(1, RUN_TIMEOUT).await, "the turn never reached the model");
    let t0 = std::time::Instant::now();
    cancel.cancel();
    let events = held_run.await.unwrap();
    assert_eq!(last(&events), &RuntimeEvent::Error { message: "Cancelled.".into() });
    assert!(t0.elapsed() < Duration::from_secs(10), "cancel took {:?}", t0.elapsed());
    hold.release();
    let events = collect(&rt, request("cancel", "Read marker.txt", &space), CancellationToken::new()).await;
    assert!(matches!(last(&events), RuntimeEvent::Done { text, .. } if text == "PROJECT_42"), "{events:?}");

    // 2. Read-only mode: the runtime is not given edit or shell tools at all.
    let mut ask = request("ask", "Read marker.txt ASK-MODE", &space);
    ask.work_mode = WorkMode::Ask;
    let events = collect(&rt, ask, CancellationToken::new()).await;
    assert!(matches!(last(&events), RuntimeEvent::Done { text, .. } if text == "PROJECT_42"), "{events:?}");
    let asked: Vec<_> = model.requests().into_iter().filter(|r| r.last_user_text().contains("ASK-MODE")).collect();
    assert!(!asked.is_empty());
    for r in &asked {
        assert!(r.has_tool("read"), "reading stays allowed");
        for denied in ["bash", "edit", "write"] {
            assert!(!r.has_tool(denied), "ask mode offered `{denied}`: {:?}", r.tool_names());
        }
    }

    // 3. Reaching outside the project is refused by the session's ruleset.
    let events = collect(&rt, request("outside", "OUTSIDE: read a system file", &space), CancellationToken::new()).await;
    let read = events.iter().find_map(|e| match e {
        RuntimeEvent::ToolFinished { tool, error, output, .. } if tool == "read" => Some((error.clone(), output.clone())),
        _ => None,
    });
    let (error, output) = read.expect("the read tool ran");
    assert!(error.is_some(), "reading /etc/hostname from a project must be refused, got output {output:?}");
    assert!(!events.iter().any(|e| matches!(e, RuntimeEvent::PermissionAsked { .. })), "the ruleset decides; nobody is asked");

    // 4. A model endpoint that refuses connections: retries are surfaced, then a clear error.
    let mut refused = request("refused", "hello", &space);
    refused.profile_id = Some(REFUSED_PROFILE.into());
    let events = collect(&rt, refused, CancellationToken::new()).await;
    let retries = events.iter().filter(|e| matches!(e, RuntimeEvent::Retrying { .. })).count();
    assert!(retries >= 1, "retries not surfaced: {events:?}");
    assert!(matches!(last(&events), RuntimeEvent::Error { message } if message.contains("kept failing")), "{events:?}");

    // 5. An image that is not what its media type says never reaches the model.
    let mut lie = request("images", "look", &space);
    let lie_id = lie.request_id.clone();
    lie.images = vec![ImageInput { name: "x.jpg".into(), media_type: "image/jpeg".into(), bytes: Arc::new(support::png(3)) }];
    let events = collect(&rt, lie, CancellationToken::new()).await;
    assert!(matches!(last(&events), RuntimeEvent::Error { message } if message.contains("says it is image/jpeg but its content is image/png")), "{events:?}");
    assert!(!model.requests().iter().any(|r| r.contains_text(&lie_id)));
    // ... nor does one sent to a profile without image input.
    let mut no_images = request("images", "look", &space);
    no_images.profile_id = Some(REFUSED_PROFILE.into());
    no_images.images = vec![ImageInput { name: "x.png".into(), media_type: "image/png".into(), bytes: Arc::new(support::png(3)) }];
    let events = collect(&rt, no_images, CancellationToken::new()).await;
    assert!(matches!(last(&events), RuntimeEvent::Error { message } if message.contains("does not accept images")), "{events:?}");

    // 6. A project folder deleted while open.
    let doomed = tmp.path().join("doomed");
    std::fs::create_dir(&doomed).unwrap();
    let doomed_space = resolve_local(&doomed).unwrap();
    std::fs::remove_dir(&doomed).unwrap();
    let events = collect(&rt, request("doomed", "hello", &doomed_space), CancellationToken::new()).await;
    assert!(matches!(last(&events), RuntimeEvent::Error { message } if message.contains("is gone")), "{events:?}");

    // 7. With the "ask" policy, the same reach outside is surfaced and answered by the user.
    let asking = SharedOpenCode(OpenCodeRuntime::with_options(
        rt.0.config().clone(),
        tmp.path().join("rt-ask"),
        RuntimeOptions { outside_project: OutsideProject::Ask, ..Default::default() },
    ));
    let mut stream = asking.run(request("asking", "OUTSIDE: read a system file", &space), CancellationToken::new());
    let mut events = Vec::new();
    let answered = tokio::time::timeout(RUN_TIMEOUT, async {
        while let Some(ev) = stream.next().await {
            if let RuntimeEvent::PermissionAsked { permission_id, permission, .. } = &ev {
                assert_eq!(permission, "external_directory");
                asking.reply_permission(&space, permission_id, PermissionReply::Once).await.unwrap();
            }
            events.push(ev);
        }
    })
    .await;
    assert!(answered.is_ok(), "run did not finish after the permission was answered: {events:?}");
    assert!(events.iter().any(|e| matches!(e, RuntimeEvent::PermissionAsked { .. })), "{events:?}");
    let read_ok = events.iter().any(|e| matches!(e, RuntimeEvent::ToolFinished { tool, error: None, .. } if tool == "read"));
    assert!(read_ok, "after `once`, the read went through: {events:?}");
    assert!(matches!(last(&events), RuntimeEvent::Done { .. }), "{events:?}");
    asking.dispose().await;

    // The runtime kept running through all of it, in one process.
    assert!(rt.test_connection().await.unwrap().healthy);
    assert_eq!(rt.status().launches, 1);
    let pid = rt.status().pid.unwrap();
    rt.dispose().await;
    assert!(support::gone_within(pid, 10).await);
    model.shutdown().await;
}
