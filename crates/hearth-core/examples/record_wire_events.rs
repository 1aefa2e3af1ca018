//! Records what the pinned runtime really sends, for the decoder tests in `opencode/wire.rs`: the
//! `/global/event` stream and the stored message list of a few representative turns (a tool step
//! then text, a subagent, a provider error, a cancel, a permission asked and answered), run against
//! the scripted model. Run it again when the pinned runtime version changes:
//! `cargo run -p hearth-core --example record_wire_events -- fixtures/opencode-wire`

use std::io::Write as _;
use std::time::Duration;

use futures::StreamExt;
use hearth_core::diagnostics::kit;
use hearth_core::opencode::OpenCodeRuntime;
use hearth_core::runtime::*;
use hearth_core::scripted_model::{default_reply, HoldRule, Reply, RequestKind, Script, ScriptedModelServer};
use hearth_core::space::resolve_local;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// How long to keep reading events after the last turn, so its trailing events are in the file.
const TRAILING_EVENTS: Duration = Duration::from_secs(2);

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let out_dir = std::path::PathBuf::from(std::env::args().nth(1).expect("usage: record_wire_events <out-dir>"));
    std::fs::create_dir_all(&out_dir).expect("output folder");
    let found = kit::locate_runtime().await.expect("the runtime and rg");
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().canonicalize().unwrap().join("project");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(project.join("marker.txt"), "PROJECT_7").unwrap();
    let space = resolve_local(&project).unwrap();

    let model = ScriptedModelServer::start(Script::custom(|r| {
        let prompt = r.last_user_text();
        let results = r.tool_results_after_last_user();
        if r.kind == RequestKind::Agent && prompt.contains("SUBAGENT") && r.has_tool("task") && results.is_empty() {
            return Reply::tool_call("task", json!({ "description": "read the marker", "prompt": "read marker.txt", "subagent_type": "general" }));
        }
        if r.kind == RequestKind::Agent && prompt.contains("FAIL") {
            return Reply::Status { code: 400, body: json!({ "error": { "message": "model not found" } }).to_string() };
        }
        if r.kind == RequestKind::Agent && prompt.contains("OUTSIDE") && results.is_empty() {
            return Reply::tool_call("read", json!({ "filePath": "/etc/hostname" }));
        }
        default_reply(r)
    }))
    .unwrap();
    let config = kit::scripted_config(&found, &model, true);
    let runtime = OpenCodeRuntime::new(config, tmp.path().join("runtime"), RuntimeHost::default());
    let client = runtime.client().await.expect("runtime launch");

    // Our own raw subscription, written line by line.
    let events_path = out_dir.join("events.jsonl");
    let mut file = std::fs::File::create(&events_path).unwrap();
    let resp = client.request(reqwest::Method::GET, "/global/event", None).timeout(Duration::from_secs(3600)).send().await.unwrap();
    let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
    let recorder = tokio::spawn(async move {
        let mut events = eventsource_stream::Eventsource::eventsource(resp.bytes_stream());
        let mut lines = Vec::new();
        loop {
            tokio::select! {
                _ = &mut stop_rx => break,
                ev = events.next() => match ev {
                    Some(Ok(ev)) => lines.push(ev.data),
                    _ => break,
                }
            }
        }
        lines
    });

    let run = |conversation: &str, prompt: &str, cancel: CancellationToken| {
        let request = kit::run_request(conversation, prompt, &space);
        runtime.run(request, cancel).collect::<Vec<_>>()
    };
    let tool_turn = run("tool", "read marker.txt", CancellationToken::new()).await;
    println!("tool turn: {:?}", tool_turn.last());
    let sub = run("subagent", "SUBAGENT: ask a helper", CancellationToken::new()).await;
    println!("subagent turn: {:?}", sub.last());
    let fail = run("fail", "FAIL please", CancellationToken::new()).await;
    println!("failed turn: {:?}", fail.last());
    let hold = model.hold(HoldRule::kind(RequestKind::Agent).with_predicate(|r| r.last_user_text().contains("HOLD")));
    let cancel = CancellationToken::new();
    let held = tokio::spawn({
        let (runtime, request, cancel) = (runtime.clone(), kit::run_request("cancel", "HOLD this", &space), cancel.clone());
        async move { runtime.run(request, cancel).collect::<Vec<_>>().await }
    });
    assert!(hold.wait_until_held(1, Duration::from_secs(60)).await);
    cancel.cancel();
    println!("cancelled turn: {:?}", held.await.unwrap().last());
    hold.release();
    let mut asking = kit::run_request("permission", "OUTSIDE read", &space);
    asking.outside_project = OutsideProject::Ask;
    let mut outside = std::pin::pin!(runtime.run(asking, CancellationToken::new()));
    while let Some(ev) = outside.next().await {
        if let RuntimeEvent::PermissionAsked { permission_id, .. } = &ev {
            runtime.reply_permission(&space, permission_id, PermissionReply::Reject).await.unwrap();
        }
        if ev.is_terminal() {
            println!("permission turn: {ev:?}");
        }
    }
    tokio::time::sleep(TRAILING_EVENTS).await;
    let _ = stop_tx.send(());
    for line in recorder.await.unwrap() {
        writeln!(file, "{line}").unwrap();
    }
    // The stored messages of the tool turn and the failed turn, as the reconcile path reads them.
    for (conversation, name) in [("tool", "messages-tool.json"), ("fail", "messages-fail.json"), ("subagent", "messages-subagent.json")] {
        let session = runtime.native_session(conversation).expect("session");
        let messages = client.messages_json(space.root_str(), &session).await.unwrap();
        std::fs::write(out_dir.join(name), serde_json::to_string_pretty(&messages).unwrap()).unwrap();
    }
    runtime.dispose().await;
    model.shutdown().await;
    println!("wrote {}", out_dir.display());
}
