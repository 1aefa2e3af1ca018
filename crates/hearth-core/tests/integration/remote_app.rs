//! Projects on another host through the app, against a real sshd on this machine logging in as a
//! second user: two projects there and one here at once — one runtime on the host (counted there)
//! and one here, each reading its own marker on its own machine, continuation, a knowledge search
//! under each request's own grant through the link's reverse forward — then the link severed in
//! the middle of a turn, and nothing left on the host at the end.

use crate::support::{self, sshd};

use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_core::app::*;
use hearth_core::scripted_model::{HoldRule, RequestKind};
use hearth_core::store::MessageStatus;

use support::{tool_outputs as output, Recorder, TURN_TIMEOUT};

/// From the link's death until the running reply says so.
const LINK_DROP_NOTICED_WITHIN: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn remote_and_local_projects_share_their_runtimes_and_a_severed_link_recovers() {
    let _turn = sshd::ONE_AT_A_TIME.lock().await;
    if support::require_runtime().await.is_none() {
        return;
    }
    let Some(sshd) = sshd::require_sshd() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let events = Arc::new(Recorder::default());
    let mut opts = support::app_options(&tmp.path().join("data"), support::app_locate_inputs());
    opts.ssh_config = Some(sshd.client_config.clone());
    let hearth = Hearth::open(opts, events.clone()).await.unwrap();
    let ember = hearth.create_library("Ember".into()).await.unwrap();
    let fixture = support::workspace_root().join("fixtures/knowledge/ember-protocol.md");
    hearth.import_into_library(ember.id.0, fixture.display().to_string(), |_| {}).await.unwrap();

    let (d1, d2) = (sshd.remote_project("remote-one", &[("marker.txt", "PROJECT_61")]), sshd.remote_project("remote-two", &[("marker.txt", "PROJECT_62")]));
    let r1 = hearth.add_remote_project(sshd::HOST.into(), d1.display().to_string()).await.unwrap();
    let r2 = hearth.add_remote_project(sshd::HOST.into(), d2.display().to_string()).await.unwrap();
    assert_eq!(r1.host.as_deref(), Some(sshd::HOST));
    assert_eq!(hearth.add_remote_project(sshd::HOST.into(), format!("{}/", d1.display())).await.unwrap().id, r1.id, "the same folder is the same project");
    let local_dir = tmp.path().join("local");
    std::fs::create_dir(&local_dir).unwrap();
    std::fs::write(local_dir.join("marker.txt"), "PROJECT_63").unwrap();
    let local = hearth.store().add_project(&local_dir).unwrap();

    let a = hearth.store().create_conversation(&r1.id, "A").unwrap();
    let b = hearth.store().create_conversation(&r2.id, "B").unwrap();
    let c = hearth.store().create_conversation(&local.id, "C").unwrap();
    hearth.set_conversation_libraries(a.id.clone(), vec![ember.id.0.to_string()]).await.unwrap();

    let started = Instant::now();
    for conv in [&a, &b, &c] {
        hearth.send_message(&conv.id, "read marker.txt".into(), vec![]).await.unwrap();
    }
    for (conv, marker) in [(&a, "PROJECT_61"), (&b, "PROJECT_62"), (&c, "PROJECT_63")] {
        let reply = events.finished(&conv.id, 1).await;
        assert_eq!(reply.status, MessageStatus::Done, "{reply:?}");
        assert_eq!(reply.text, marker);
        assert!(reply.tool_calls.iter().any(|t| t.tool == "read" && t.output.as_deref().unwrap_or("").contains(marker)), "{}", output(&reply));
    }
    println!("first turns (staging included): {:?}", started.elapsed());
    let statuses = hearth.runtime_statuses();
    let on_host: Vec<_> = statuses.iter().filter(|r| r.runtime.host.as_deref() == Some(sshd::HOST)).collect();
    assert_eq!(on_host.len(), 1, "one runtime for both projects on the host: {statuses:?}");
    assert_eq!(statuses.iter().filter(|r| r.runtime.host.is_none() && r.family == "opencode").count(), 1, "one here: {statuses:?}");
    assert_eq!(sshd.remote_runtimes().len(), 1, "one runtime process on the host: {:?}", sshd.remote_processes());
    let session_a = hearth.store().get_conversation(&a.id).unwrap().native_session_id.unwrap();

    // Continuation, and a knowledge search under A's own grant through the link.
    hearth.send_message(&a.id, "read marker.txt again".into(), vec![]).await.unwrap();
    assert_eq!(events.finished(&a.id, 2).await.text, "PROJECT_61");
    let model = hearth.builtin_model().unwrap();
    assert!(model.requests().iter().any(|r| r.last_user_text().contains("again") && r.contains_text("PROJECT_61")), "the second turn saw the first");
    hearth.send_message(&a.id, "Search knowledge for zephyrine handshake".into(), vec![]).await.unwrap();
    let searched = events.finished(&a.id, 3).await;
    assert!(output(&searched).contains("ember-protocol"), "A searched its library through the link: {}", output(&searched));
    hearth.send_message(&b.id, "Search knowledge for zephyrine handshake".into(), vec![]).await.unwrap();
    let refused = events.finished(&b.id, 2).await;
    assert!(output(&refused).contains("No knowledge library is attached") && !output(&refused).contains("ember-protocol"), "{}", output(&refused));

    // The link severed while B's reply waits at the model: the reply ends with a sentence at once.
    let hold = model.hold(HoldRule::kind(RequestKind::Agent).with_predicate(|r| r.last_user_text().contains("before the cut")));
    hearth.send_message(&b.id, "read marker.txt before the cut".into(), vec![]).await.unwrap();
    assert!(hold.wait_until_held(1, TURN_TIMEOUT).await, "B's turn reached the model");
    let link = hearth.remote().link_pid(sshd::HOST).await.expect("the link is up");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(link as i32), nix::sys::signal::Signal::SIGKILL).unwrap();
    let cut = Instant::now();
    let failed = events.finished(&b.id, 3).await;
    println!("link drop noticed after {:?}", cut.elapsed());
    assert!(cut.elapsed() < LINK_DROP_NOTICED_WITHIN, "noticed after {:?}", cut.elapsed());
    hold.release();
    assert_eq!(failed.status, MessageStatus::Error, "{failed:?}");
    assert!(hearth.store().list_messages(&b.id).unwrap().iter().any(|m| m.text == "read marker.txt before the cut"), "the message is kept");
    // The host's keeper stopped the runtime with the link.
    assert!(support::wait_until(Duration::from_secs(30), || async { sshd.remote_runtimes().is_empty() }).await, "{:?}", sshd.remote_processes());

    // The next message reconnects and continues A's own session on the host.
    hearth.send_message(&a.id, "read marker.txt after the cut".into(), vec![]).await.unwrap();
    let after = events.finished(&a.id, 4).await;
    assert_eq!(after.status, MessageStatus::Done, "{after:?}");
    assert_eq!(after.text, "PROJECT_61");
    assert_eq!(hearth.store().get_conversation(&a.id).unwrap().native_session_id.as_deref(), Some(session_a.as_str()), "the same native session");
    assert!(model.requests().iter().any(|r| r.last_user_text().contains("after the cut") && r.contains_text("read marker.txt again")), "the session's history was there");

    hearth.shutdown().await;
    let left = sshd.nothing_left(Duration::from_secs(15)).await;
    assert!(left.is_empty(), "left on the host: {left:?}");
}
