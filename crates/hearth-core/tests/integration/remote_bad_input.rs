//! Hosts that cannot serve a project, through the app, against the real sshd: an unreachable host,
//! a refused key, an unknown and a changed host key (refused, the known-hosts file never written),
//! a folder that does not exist, a disk too full to stage the runtime, an unsupported architecture.
//! Each is a sentence naming the host and what to do; nothing is lost — no project is added on a
//! failed connection, a message sent is kept with its reply's error — and the app goes on: the good
//! host still works, and a host that was full takes the runtime once there is room.

use crate::support::{self, sshd};

use std::sync::Arc;

use hearth_core::app::*;
use hearth_core::remote::ssh::SshError;
use hearth_core::remote::{HostState, RemoteError};
use hearth_core::store::MessageStatus;

use support::Recorder;

async fn open(dir: &std::path::Path, sshd: &sshd::Sshd) -> (Arc<Hearth>, Arc<Recorder>) {
    let events = Arc::new(Recorder::default());
    let mut opts = support::app_options(&dir.join("data"), support::app_locate_inputs());
    opts.ssh_config = Some(sshd.client_config.clone());
    (Hearth::open(opts, events.clone()).await.unwrap(), events)
}

fn ssh_error(e: AppError) -> SshError {
    match e {
        AppError::Remote(RemoteError::Ssh(s)) => s,
        other => panic!("expected an ssh refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_that_cannot_be_reached_or_trusted_are_refused_with_a_sentence_and_nothing_is_added() {
    let _turn = sshd::ONE_AT_A_TIME.lock().await;
    let Some(sshd) = sshd::require_sshd() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (hearth, _) = open(tmp.path(), &sshd).await;
    let changed_before = std::fs::read(sshd.known_hosts("changed_known_hosts")).unwrap();
    let folder = sshd.remote_project("bad-input", &[("marker.txt", "PROJECT_71")]).display().to_string();

    let down = hearth.add_remote_project(sshd::HOST_DOWN.into(), folder.clone()).await.unwrap_err();
    assert_eq!(down.code(), ErrorCode::Host);
    let down = ssh_error(down);
    assert!(matches!(down, SshError::Unreachable { .. }), "{down:?}");
    assert!(down.to_string().starts_with(&format!("{} could not be reached", sshd::HOST_DOWN)), "{down}");

    let refused = ssh_error(hearth.add_remote_project(sshd::HOST_REFUSED_KEY.into(), folder.clone()).await.unwrap_err());
    assert!(matches!(refused, SshError::KeyRefused { .. }), "{refused:?}");
    assert!(refused.to_string().contains("never asks for a password"), "{refused}");

    let unknown = ssh_error(hearth.add_remote_project(sshd::HOST_UNKNOWN_KEY.into(), folder.clone()).await.unwrap_err());
    assert!(matches!(unknown, SshError::HostKeyUnknown { .. }), "{unknown:?}");
    assert!(unknown.to_string().contains(&format!("Run `ssh {}` once", sshd::HOST_UNKNOWN_KEY)), "{unknown}");
    assert_eq!(std::fs::read_to_string(sshd.known_hosts("empty_known_hosts")).unwrap(), "", "an unknown key is never accepted for the user");

    let changed = ssh_error(hearth.add_remote_project(sshd::HOST_CHANGED_KEY.into(), folder.clone()).await.unwrap_err());
    assert!(matches!(changed, SshError::HostKeyChanged { .. }), "{changed:?}");
    assert!(changed.to_string().contains("CHANGED") && changed.to_string().contains(&format!("ssh-keygen -R {}", sshd::HOST_CHANGED_KEY)), "{changed}");
    assert_eq!(std::fs::read(sshd.known_hosts("changed_known_hosts")).unwrap(), changed_before, "a changed key is never overwritten");

    // The sidebar shows each failed host as unreachable, with the same sentence.
    for (host, error) in [(sshd::HOST_DOWN, &down), (sshd::HOST_REFUSED_KEY, &refused), (sshd::HOST_CHANGED_KEY, &changed)] {
        assert_eq!(hearth.host_state(host.into()).await, HostState::Unreachable { reason: error.to_string() });
    }
    assert!(hearth.store().list_projects().unwrap().is_empty(), "no project was added on a failed connection");

    // The good host: a missing folder and a relative path are refused, then the folder is added.
    let missing = hearth.add_remote_project(sshd::HOST.into(), format!("{folder}/nowhere")).await.unwrap_err();
    assert_eq!(missing.code(), ErrorCode::ProjectFolder);
    assert!(matches!(missing, AppError::Remote(RemoteError::NoFolder { .. })), "{missing:?}");
    assert!(missing.to_string().contains(&format!("{folder}/nowhere does not exist on {}", sshd::HOST)), "{missing}");
    let relative = hearth.add_remote_project(sshd::HOST.into(), "projects/x".into()).await.unwrap_err();
    assert!(matches!(relative, AppError::Remote(RemoteError::Relative { .. })), "{relative:?}");
    assert!(hearth.store().list_projects().unwrap().is_empty());
    let added = hearth.add_remote_project(sshd::HOST.into(), folder.clone()).await.unwrap();
    assert_eq!((added.host.as_deref(), added.path.as_str()), (Some(sshd::HOST), folder.as_str()));
    assert!(matches!(hearth.host_state(sshd::HOST.into()).await, HostState::Connected { .. }));

    hearth.shutdown().await;
    let left = sshd.nothing_left(std::time::Duration::from_secs(15)).await;
    assert!(left.is_empty(), "left on the host: {left:?}");
}

/// Send one message in a fresh conversation of `project`; its finished reply.
async fn one_turn(hearth: &Arc<Hearth>, events: &Recorder, project: &hearth_core::store::Project, text: &str) -> (String, hearth_core::store::Message) {
    let conv = hearth.store().create_conversation(&project.id, "T").unwrap();
    hearth.send_message(&conv.id, text.into(), vec![]).await.unwrap();
    let reply = events.finished(&conv.id, 1).await;
    (conv.id, reply)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_host_too_full_or_of_another_architecture_refuses_the_turn_and_keeps_the_message() {
    let _turn = sshd::ONE_AT_A_TIME.lock().await;
    if support::require_runtime().await.is_none() {
        return;
    }
    let Some(sshd) = sshd::require_sshd() else { return };
    let folder = sshd.remote_project("odd-host", &[("marker.txt", "PROJECT_72")]).display().to_string();

    // An architecture the runtime Hearth carries is not built for.
    {
        let tmp = tempfile::tempdir().unwrap();
        let _arm = sshd.pretend_architecture("armv7l");
        let (hearth, events) = open(tmp.path(), &sshd).await;
        let project = hearth.add_remote_project(sshd::HOST.into(), folder.clone()).await.unwrap();
        let (conv, reply) = one_turn(&hearth, &events, &project, "read marker.txt").await;
        assert_eq!(reply.status, MessageStatus::Error, "{reply:?}");
        let why = reply.error.clone().unwrap_or_default();
        assert!(why.contains(&format!("{} runs Linux on armv7l", sshd::HOST)) && why.contains("cannot run projects there"), "{why}");
        assert!(hearth.store().list_messages(&conv).unwrap().iter().any(|m| m.text == "read marker.txt"), "the message is kept");
        assert!(sshd.remote_runtimes().is_empty());
        hearth.shutdown().await;
    }

    // A disk too full to stage the runtime; once there is room, the next message runs.
    let tmp = tempfile::tempdir().unwrap();
    let (hearth, events) = open(tmp.path(), &sshd).await;
    let project = hearth.add_remote_project(sshd::HOST.into(), folder.clone()).await.unwrap();
    let full = sshd.small_cache(8);
    let (conv, reply) = one_turn(&hearth, &events, &project, "read marker.txt").await;
    assert_eq!(reply.status, MessageStatus::Error, "{reply:?}");
    let why = reply.error.clone().unwrap_or_default();
    assert!(why.contains(&format!("{} has no room to stage the runtime", sshd::HOST)) && why.contains("Free some space"), "{why}");
    assert!(hearth.store().list_messages(&conv).unwrap().iter().any(|m| m.text == "read marker.txt"), "the message is kept");
    drop(full);
    hearth.send_message(&conv, "read marker.txt now".into(), vec![]).await.unwrap();
    let reply = events.finished(&conv, 2).await;
    assert_eq!(reply.status, MessageStatus::Done, "{reply:?}");
    assert_eq!(reply.text, "PROJECT_72");

    hearth.shutdown().await;
    let left = sshd.nothing_left(std::time::Duration::from_secs(15)).await;
    assert!(left.is_empty(), "left on the host: {left:?}");
}
