//! The user's choices about the runtime, against the real runtime and the built-in scripted model:
//! the per-project outside-folder setting with its permission answers, and the runtime binary
//! chosen in the Runtime view.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

use hearth_core::app::*;
use hearth_core::binaries::doctor::{BinaryCheck, DoctorInputs};
use hearth_core::binaries::executable::Source;
use hearth_core::binaries::opencode::LocateInputs;
use hearth_core::binaries::ripgrep::RgInputs;
use hearth_core::host::paths::AppPaths;
use hearth_core::runtime::{OutsideProject, PermissionReply, RuntimeEvent};
use hearth_core::store::{Message, MessageRole, MessageStatus, ToolCallStatus};

use support::{app_options as options, Recorder, TURN_TIMEOUT};

/// A file outside every test project that the agent's `read` tool can read.
const OUTSIDE_FILE: &str = "/etc/hostname";

/// Permission requests the window was shown for `conversation`, oldest first: (id, permission).
fn asked(events: &Recorder, conversation: &str) -> Vec<(String, String)> {
    events
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.conversation_id == conversation)
        .filter_map(|e| match &e.kind {
            ConversationUpdateKind::Runtime { event: RuntimeEvent::PermissionAsked { permission_id, permission, .. }, .. } => {
                Some((permission_id.clone(), permission.clone()))
            }
            _ => None,
        })
        .collect()
}

/// Wait for the `n`th permission request of `conversation` (1-based) and return its id.
async fn nth_asked(events: &Recorder, conversation: &str, n: usize) -> String {
    assert!(support::wait_until(TURN_TIMEOUT, || async { asked(events, conversation).len() >= n }).await, "request {n} of {conversation} never came");
    let (id, permission) = asked(events, conversation)[n - 1].clone();
    assert_eq!(permission, "external_directory");
    id
}

/// The status the window last saw for the user's message of the latest finished turn.
fn last_user_status(events: &Recorder, conversation: &str) -> Option<MessageStatus> {
    events.0.lock().unwrap().iter().rev().filter(|e| e.conversation_id == conversation).find_map(|e| match &e.kind {
        ConversationUpdateKind::MessageStored { message } if message.role == MessageRole::User => Some(message.status),
        _ => None,
    })
}

/// The one `read` call of a reply: its status, output and error.
fn read_call(reply: &Message) -> (ToolCallStatus, String, String) {
    let call = reply.tool_calls.iter().find(|t| t.tool == "read").unwrap_or_else(|| panic!("no read call: {reply:?}"));
    (call.status, call.output.clone().unwrap_or_default(), call.error.clone().unwrap_or_default())
}

/// "Always" holds for the conversation that gave it and nowhere else — not for another
/// conversation of the same project, and not once the project is set to Refuse (the runtime's own
/// "always" would do both: it is kept per project and outranks each session's rules).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn always_allows_only_the_conversation_that_answered_and_refuse_refuses_again() {
    if support::require_runtime().await.is_none() {
        return;
    }
    let hostname = std::fs::read_to_string(OUTSIDE_FILE).expect("the test reads a file outside the project");
    let tmp = tempfile::tempdir().unwrap();
    let project_dir = tmp.path().join("project");
    std::fs::create_dir(&project_dir).unwrap();
    let locate = LocateInputs { anchors: vec![support::workspace_root()], ..Default::default() };
    let events = Arc::new(Recorder::default());
    let hearth = Hearth::open(options(&tmp.path().join("data"), locate), events.clone()).await.unwrap();
    let project = hearth.store().add_project(&project_dir).unwrap();
    let saved = hearth.set_project_outside_policy(project.id.clone(), OutsideProject::Ask).await.unwrap();
    assert_eq!(saved.outside_project, OutsideProject::Ask);
    let a = hearth.store().create_conversation(&project.id, "A").unwrap();
    let b = hearth.store().create_conversation(&project.id, "B").unwrap();
    let read = format!("read {OUTSIDE_FILE}");

    // A asks, and the user answers "always": the file is read.
    hearth.send_message(&a.id, read.clone(), vec![]).await.unwrap();
    let first = nth_asked(&events, &a.id, 1).await;
    hearth.reply_permission(&a.id, &first, PermissionReply::Always).await.unwrap();
    let reply = events.finished(&a.id, 1).await;
    let (status, output, _) = read_call(&reply);
    assert_eq!(status, ToolCallStatus::Done, "{reply:?}");
    assert!(output.contains(hostname.trim()), "{output}");

    // A again: not asked, read.
    hearth.send_message(&a.id, read.clone(), vec![]).await.unwrap();
    let reply = events.finished(&a.id, 2).await;
    assert_eq!(asked(&events, &a.id).len(), 1, "A answered always: it is not asked again");
    assert_eq!(read_call(&reply).0, ToolCallStatus::Done, "{reply:?}");

    // B, same project: asked all the same; the user rejects, and the reply ends.
    hearth.send_message(&b.id, read.clone(), vec![]).await.unwrap();
    let in_b = nth_asked(&events, &b.id, 1).await;
    hearth.reply_permission(&b.id, &in_b, PermissionReply::Reject).await.unwrap();
    let reply = events.finished(&b.id, 1).await;
    let (status, _, error) = read_call(&reply);
    assert_eq!(status, ToolCallStatus::Error, "{reply:?}");
    assert!(error.contains("rejected"), "{error}");
    assert_ne!(reply.status, MessageStatus::Streaming);

    // Refuse: A's earlier "always" no longer opens anything, and nobody is asked.
    hearth.set_project_outside_policy(project.id.clone(), OutsideProject::Deny).await.unwrap();
    hearth.send_message(&a.id, read.clone(), vec![]).await.unwrap();
    let reply = events.finished(&a.id, 3).await;
    let (status, output, error) = read_call(&reply);
    assert_eq!(status, ToolCallStatus::Error, "refused after Refuse: output {output:?}");
    assert!(!error.is_empty() && !output.contains(hostname.trim()), "{error} / {output}");
    assert_eq!(asked(&events, &a.id).len(), 1, "Refuse asks nobody");

    // Back to Ask: the "always" was dropped with the change, so A is asked again.
    hearth.set_project_outside_policy(project.id.clone(), OutsideProject::Ask).await.unwrap();
    hearth.send_message(&a.id, read, vec![]).await.unwrap();
    let again = nth_asked(&events, &a.id, 2).await;
    hearth.reply_permission(&a.id, &again, PermissionReply::Once).await.unwrap();
    assert_eq!(read_call(&events.finished(&a.id, 4).await).0, ToolCallStatus::Done);
    hearth.shutdown().await;
}

/// The binary chosen in the Runtime view is used from the next turn (the process running the old
/// one is retired), a wrong one is refused with the locator's sentence, and clearing the choice
/// brings back the copy Hearth finds itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_chosen_runtime_binary_is_used_from_the_next_turn_and_a_wrong_one_is_refused() {
    let Some(found) = support::require_runtime().await else { return };
    let tmp = tempfile::tempdir().unwrap();
    let project_dir = tmp.path().join("project");
    std::fs::create_dir(&project_dir).unwrap();
    std::fs::write(project_dir.join("marker.txt"), "PROJECT_77").unwrap();
    let data = tmp.path().join("data");
    let locate = LocateInputs { anchors: vec![support::workspace_root()], ..Default::default() };
    let events = Arc::new(Recorder::default());
    let hearth = Hearth::open(options(&data, locate.clone()), events.clone()).await.unwrap();
    let doctor = || DoctorInputs { paths: AppPaths::under(&data), opencode: locate.clone(), ripgrep: RgInputs::from_process(None, None) };
    let project = hearth.store().add_project(&project_dir).unwrap();
    let conv = hearth.store().create_conversation(&project.id, "c").unwrap();

    hearth.send_message(&conv.id, "Read marker.txt".into(), vec![]).await.unwrap();
    assert_eq!(events.finished(&conv.id, 1).await.text, "PROJECT_77");
    assert_eq!(last_user_status(&events, &conv.id), Some(MessageStatus::Done), "the window learns the runtime took the message");
    let old_pid = hearth.runtime_statuses()[0].runtime.pid.unwrap();

    // The same pinned binary under another path: a new configuration, a new process.
    let chosen = tmp.path().join("chosen-opencode");
    std::os::unix::fs::symlink(&found.binary, &chosen).unwrap();
    hearth.set_runtime_binary(Some(chosen.display().to_string())).await.unwrap();
    match hearth.runtime_report(doctor()).await.unwrap().opencode {
        BinaryCheck::Ready { path, source, .. } => assert_eq!((path, source), (chosen.display().to_string(), Source::Settings)),
        other => panic!("the chosen binary is the pinned one: {other:?}"),
    }
    hearth.send_message(&conv.id, "Read marker.txt".into(), vec![]).await.unwrap();
    assert_eq!(events.finished(&conv.id, 2).await.text, "PROJECT_77");
    assert!(support::gone_within(old_pid, Duration::from_secs(30)).await, "the process on the old binary was retired");
    let now: Vec<_> = hearth.runtime_statuses().into_iter().filter_map(|s| s.runtime.pid).collect();
    assert!(!now.is_empty() && !now.contains(&old_pid), "{now:?}");

    // Another version: refused with the locator's sentence, in the report and in the reply.
    let old = tmp.path().join("opencode-old");
    std::fs::write(&old, "#!/bin/sh\necho 1.17.2\n").unwrap();
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o755)).unwrap();
    hearth.set_runtime_binary(Some(old.display().to_string())).await.unwrap();
    let sentence = match hearth.runtime_report(doctor()).await.unwrap().opencode {
        BinaryCheck::Problem { message, .. } => message,
        other => panic!("another version must be refused: {other:?}"),
    };
    assert!(sentence.contains("is version 1.17.2, but Hearth needs exactly") && sentence.contains("in the Runtime view"), "{sentence}");
    hearth.send_message(&conv.id, "hello".into(), vec![]).await.unwrap();
    let refused = events.finished(&conv.id, 3).await;
    assert_eq!(refused.status, MessageStatus::Error);
    assert_eq!(refused.error.as_deref(), Some(sentence.as_str()));
    assert_eq!(last_user_status(&events, &conv.id), Some(MessageStatus::Error), "the window learns the message was not sent");
    assert!(matches!(hearth.set_runtime_binary(Some("opencode".into())).await, Err(AppError::RelativeBinaryPath(_))));

    // Cleared: the copy Hearth finds itself, and turns work again.
    hearth.set_runtime_binary(None).await.unwrap();
    assert!(matches!(hearth.runtime_report(doctor()).await.unwrap().opencode, BinaryCheck::Ready { source: Source::NodeModules, .. }));
    hearth.send_message(&conv.id, "Read marker.txt".into(), vec![]).await.unwrap();
    assert_eq!(events.finished(&conv.id, 4).await.text, "PROJECT_77");
    assert_eq!(hearth.store().app_settings().unwrap().runtime_binary_override, None);
    hearth.shutdown().await;
}
