//! The project's outside-folder setting on ACP agents (`opencode acp`, Claude Code), against the
//! built-in scripted model: under "Ask me" the agent's `session/request_permission` becomes the
//! prompt the window shows, and the user's answer decides; under "Refuse" nobody is asked and the
//! file is not read.

use crate::support;

use std::sync::Arc;

use hearth_core::app::*;
use hearth_core::runtime::{OutsideProject, PermissionReply, RuntimeChoice, RuntimeEvent};
use hearth_core::store::{Message, ToolCallStatus};

use support::{app_options as options, Recorder, TURN_TIMEOUT};

/// A file outside every test project that the agent's read tool can read.
const OUTSIDE_FILE: &str = "/etc/hostname";

/// Permission requests the window was shown for `conversation`: (id, permission, paths).
fn asked(events: &Recorder, conversation: &str) -> Vec<(String, String, Vec<String>)> {
    let all = events.0.lock().unwrap();
    all.iter()
        .filter(|e| e.conversation_id == conversation)
        .filter_map(|e| match &e.kind {
            ConversationUpdateKind::Runtime { event: RuntimeEvent::PermissionAsked { permission_id, permission, patterns }, .. } => {
                Some((permission_id.clone(), permission.clone(), patterns.clone()))
            }
            _ => None,
        })
        .collect()
}

fn read_call(reply: &Message) -> (ToolCallStatus, String, String) {
    let call = reply.tool_calls.iter().find(|t| t.tool == "read").unwrap_or_else(|| panic!("no read call: {reply:?}"));
    (call.status, call.output.clone().unwrap_or_default(), call.error.clone().unwrap_or_default())
}

async fn outside_policy_holds_on(agent: &str) {
    let hostname = std::fs::read_to_string(OUTSIDE_FILE).expect("the test reads a file outside the project");
    let hostname = hostname.trim();
    let tmp = tempfile::tempdir().unwrap();
    let project_dir = tmp.path().join("project");
    std::fs::create_dir(&project_dir).unwrap();
    let events = Arc::new(Recorder::default());
    let hearth = Hearth::open(options(&tmp.path().join("data"), support::app_locate_inputs()), events.clone()).await.unwrap();
    let project = hearth.store().add_project(&project_dir).unwrap();
    hearth.set_project_runtime(project.id.clone(), RuntimeChoice::Acp { agent: agent.into() }).await.unwrap();
    hearth.set_project_outside_policy(project.id.clone(), OutsideProject::Ask).await.unwrap();
    let read = format!("read {OUTSIDE_FILE}");

    // Ask me, answered "once": the window was asked about that file, and it was read.
    let a = hearth.store().create_conversation(&project.id, "A").unwrap();
    hearth.send_message(&a.id, read.clone(), vec![]).await.unwrap();
    assert!(support::wait_until(TURN_TIMEOUT, || async { !asked(&events, &a.id).is_empty() }).await, "{agent}: the window was never asked");
    let (id, permission, paths) = asked(&events, &a.id).remove(0);
    assert_eq!(permission, "external_directory");
    assert!(paths.iter().any(|p| OUTSIDE_FILE.starts_with(p.as_str())), "{agent}: the prompt names the file or its folder: {paths:?}");
    hearth.reply_permission(&a.id, &id, PermissionReply::Once).await.unwrap();
    let reply = events.finished(&a.id, 1).await;
    let (status, output, _) = read_call(&reply);
    assert_eq!(status, ToolCallStatus::Done, "{agent}: {reply:?}");
    assert!(output.contains(hostname), "{agent}: {output}");

    // Ask me, answered "reject": not read.
    let b = hearth.store().create_conversation(&project.id, "B").unwrap();
    hearth.send_message(&b.id, read.clone(), vec![]).await.unwrap();
    assert!(support::wait_until(TURN_TIMEOUT, || async { !asked(&events, &b.id).is_empty() }).await, "{agent}: B was never asked");
    let (id, _, _) = asked(&events, &b.id).remove(0);
    hearth.reply_permission(&b.id, &id, PermissionReply::Reject).await.unwrap();
    let reply = events.finished(&b.id, 1).await;
    let (status, output, _) = read_call(&reply);
    assert_eq!(status, ToolCallStatus::Error, "{agent}: {reply:?}");
    assert!(!output.contains(hostname) && !reply.text.contains(hostname), "{agent}: {reply:?}");

    // Refuse: nobody is asked, nothing is read.
    hearth.set_project_outside_policy(project.id.clone(), OutsideProject::Deny).await.unwrap();
    let c = hearth.store().create_conversation(&project.id, "C").unwrap();
    hearth.send_message(&c.id, read, vec![]).await.unwrap();
    let reply = events.finished(&c.id, 1).await;
    let (status, output, _) = read_call(&reply);
    assert_eq!(status, ToolCallStatus::Error, "{agent}: refused: {reply:?}");
    assert!(!output.contains(hostname) && !reply.text.contains(hostname), "{agent}: {reply:?}");
    assert!(asked(&events, &c.id).is_empty(), "{agent}: Refuse asks nobody");
    hearth.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn opencode_acp_asks_through_the_window_and_refuses_when_told() {
    if support::require_runtime().await.is_none() {
        return;
    }
    outside_policy_holds_on("opencode").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claude_code_asks_through_the_window_and_refuses_when_told() {
    if support::require_runtime().await.is_none() || support::require_claude_agent().is_none() {
        return;
    }
    outside_policy_holds_on("claude-code").await;
}
