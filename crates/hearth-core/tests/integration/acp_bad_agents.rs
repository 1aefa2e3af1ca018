//! Agents that do not work, added as custom agents by their command line: each turn ends with a
//! sentence within its bound, the user's message is kept, the app keeps working and no process of
//! the agent is left. The agents here are small shell scripts: the test is about Hearth's side.

use crate::support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hearth_core::acp::AcpBounds;
use hearth_core::app::*;
use hearth_core::runtime::RuntimeChoice;
use hearth_core::store::MessageStatus;

use support::Recorder;

/// Short bounds, so a silent agent is noticed in seconds.
const BOUNDS: AcpBounds = AcpBounds {
    initialize: Duration::from_secs(3),
    session_open: Duration::from_secs(3),
    call: Duration::from_secs(3),
    cancel_settle: Duration::from_secs(2),
    prompt_silence: Duration::from_secs(3),
};

/// The JSON-RPC id of the request on the line in `$line` (numbers or strings).
const READ_ID: &str = r#"id=$(printf '%s' "$line" | sed -n 's/.*"id":\("[^"]*"\|[0-9][0-9]*\).*/\1/p')"#;

fn script(dir: &Path, name: &str, body: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// Answers `initialize` and `session/new`; what it does with a prompt is `on_prompt`.
fn well_behaved_until_prompt(on_prompt: &str) -> String {
    format!(
        r#"while IFS= read -r line; do
  {READ_ID}
  case "$line" in
    *'"method":"initialize"'*) printf '{{"jsonrpc":"2.0","id":%s,"result":{{"protocolVersion":1,"agentCapabilities":{{}}}}}}\n' "$id" ;;
    *'"method":"session/new"'*) printf '{{"jsonrpc":"2.0","id":%s,"result":{{"sessionId":"s-1"}}}}\n' "$id" ;;
    *'"method":"session/prompt"'*) {on_prompt} ;;
  esac
done"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_broken_agent_is_a_sentence_in_bounded_time_and_leaves_nothing_running() {
    support::init_logging();
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("agents");
    std::fs::create_dir(&bin).unwrap();
    let project_dir = tmp.path().join("project");
    std::fs::create_dir(&project_dir).unwrap();
    let events = Arc::new(Recorder::default());
    let mut opts = support::app_options(&tmp.path().join("data"), support::app_locate_inputs());
    opts.acp_bounds = BOUNDS;
    let hearth = Hearth::open(opts, events.clone()).await.unwrap();
    let project = hearth.store().add_project(&project_dir).unwrap();

    let cases: Vec<(&str, Vec<String>, &str)> = vec![
        ("missing", vec![bin.join("no-such-agent").display().to_string()], "was not found"),
        ("exits", vec![script(&bin, "exits", "echo 'cannot start: no config' >&2; exit 3")], "cannot start: no config"),
        ("not-json", vec![script(&bin, "not-json", "echo 'Welcome to my agent!'; sleep 600")], "Welcome to my agent!"),
        ("silent", vec![script(&bin, "silent", "sleep 600")], "did not answer `initialize`"),
        (
            "version",
            vec![script(
                &bin,
                "version",
                &format!(
                    r#"while IFS= read -r line; do {READ_ID}; printf '{{"jsonrpc":"2.0","id":%s,"result":{{"protocolVersion":99,"agentCapabilities":{{}}}}}}\n' "$id"; done"#
                ),
            )],
            "protocol version",
        ),
        ("hangs", vec![script(&bin, "hangs", &well_behaved_until_prompt(":"))], "sent nothing for 3 seconds"),
    ];
    for (name, command, expected) in cases {
        let agent = hearth.add_custom_agent(name.into(), command).await.unwrap();
        hearth.set_project_runtime(project.id.clone(), RuntimeChoice::Acp { agent: format!("custom-{}", agent.id) }).await.unwrap();
        let conv = hearth.store().create_conversation(&project.id, name).unwrap();
        let started = std::time::Instant::now();
        hearth.send_message(&conv.id, format!("my words for {name}"), vec![]).await.unwrap();
        let reply = events.finished(&conv.id, 1).await;
        let took = started.elapsed();
        assert_eq!(reply.status, MessageStatus::Error, "{name}: {reply:?}");
        let sentence = reply.error.clone().unwrap_or_default();
        assert!(sentence.contains(expected), "{name}: {sentence}");
        assert!(took < Duration::from_secs(20), "{name}: the turn ended after {took:?}");
        assert_eq!(hearth.store().list_messages(&conv.id).unwrap()[0].text, format!("my words for {name}"), "{name}: the message is kept");
        // The Runtime view says it too, beside the agent.
        let listed = hearth.list_agents().await.unwrap().into_iter().find(|a| a.name == name).unwrap();
        assert!(listed.last_failure.as_deref().unwrap_or("").contains(expected), "{name}: the Runtime view shows {listed:?}");
        assert!(running_from(&bin).is_empty() || name == "hangs", "{name}: an agent process was left: {:?}", running_from(&bin));
    }

    // The hanging agent still runs (a later turn may work); cancelling a hung prompt ends it in the
    // settle bound.
    let conv = hearth.store().create_conversation(&project.id, "cancel").unwrap();
    hearth.send_message(&conv.id, "and this one?".into(), vec![]).await.unwrap();
    // The session is open (the message is taken) before the prompt goes out.
    let taken = || async { hearth.store().list_messages(&conv.id).unwrap()[0].status == MessageStatus::Done };
    assert!(support::wait_until(Duration::from_secs(10), taken).await);
    hearth.cancel_turn(&conv.id).unwrap();
    let cancelled = events.finished(&conv.id, 1).await;
    assert_eq!(cancelled.status, MessageStatus::Cancelled, "{cancelled:?}");

    // The app is still usable: the Runtime view lists every agent, each with its state.
    let agents = hearth.list_agents().await.unwrap();
    assert!(agents.iter().any(|a| a.name == "missing" && a.problem.as_deref().unwrap_or("").contains("was not found")), "{agents:?}");
    hearth.shutdown().await;
    assert!(support::wait_until(Duration::from_secs(10), || async { running_from(&bin).is_empty() }).await, "no agent left after Hearth stops");
}

/// Live processes whose command line names a file in `dir` (the scripts above).
fn running_from(dir: &Path) -> Vec<u32> {
    support::processes_naming(dir, "cmdline")
}
