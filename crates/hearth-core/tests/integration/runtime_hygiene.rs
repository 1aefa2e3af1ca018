//! No runtime process outlives its owner, and a runtime that cannot start says why.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use hearth_core::opencode::OpenCodeRuntime;
use hearth_core::runtime::*;
use hearth_core::scripted_model::{Script, ScriptedModelServer};
use hearth_core::space::resolve_local;
use tokio_util::sync::CancellationToken;

const ORPHAN_PIDFILE_ENV: &str = "HEARTH_TEST_ORPHAN_PIDFILE";
/// How long the child may take to launch the runtime and report its pid.
const CHILD_LAUNCH_TIMEOUT: Duration = Duration::from_secs(90);

/// Run by `a_killed_owner_leaves_no_runtime_behind` in a child process: launches the real runtime,
/// writes its pid, then waits to be killed. Does nothing when run directly.
#[tokio::test]
#[ignore = "helper process of a_killed_owner_leaves_no_runtime_behind"]
async fn orphan_child() {
    let Some(pidfile) = std::env::var_os(ORPHAN_PIDFILE_ENV) else { return };
    let found = support::require_runtime().await.expect("runtime present");
    let model = ScriptedModelServer::start(Script::default_agent()).unwrap();
    let root = tempfile::tempdir().unwrap();
    let rt = OpenCodeRuntime::new(support::scripted_config(&found, &model, false), root.path().join("rt"), RuntimeHost::default());
    rt.test_connection().await.unwrap();
    std::fs::write(&pidfile, rt.status().pid.unwrap().to_string()).unwrap();
    tokio::time::sleep(Duration::from_secs(600)).await;
}

#[tokio::test]
async fn a_killed_owner_leaves_no_runtime_behind() {
    if support::require_runtime().await.is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let pidfile = tmp.path().join("runtime.pid");
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "runtime_hygiene::orphan_child", "--test-threads=1"])
        .env(ORPHAN_PIDFILE_ENV, &pidfile)
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let deadline = tokio::time::Instant::now() + CHILD_LAUNCH_TIMEOUT;
    let pid: u32 = loop {
        if let Ok(text) = std::fs::read_to_string(&pidfile) {
            if let Ok(pid) = text.trim().parse() {
                break pid;
            }
        }
        assert!(tokio::time::Instant::now() < deadline, "child never reported a runtime pid");
        assert!(child.try_wait().unwrap().is_none(), "child exited early");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(support::alive(pid));
    // SIGKILL: no destructor, no shutdown hook runs in the child.
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    assert!(support::gone_within(pid, Duration::from_secs(10)).await, "runtime {pid} outlived its killed owner");
}

fn fake_binary(dir: &Path, body: &str) -> std::path::PathBuf {
    let p = dir.join("opencode");
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

async fn first_error(rt: &OpenCodeRuntime, space_dir: &Path) -> String {
    let request = support::run_request("c1", "hello", &resolve_local(space_dir).unwrap());
    let finished = support::run_to_end(rt, request, CancellationToken::new(), support::TURN_TIMEOUT).await.unwrap();
    match finished.end {
        TurnEnd::Failed(TurnFailure { kind: FailureKind::Start, message }) => message,
        other => panic!("expected a start failure, got {other:?}"),
    }
}

/// A runtime of `binary` with the scripted model's profile.
fn runtime(binary: std::path::PathBuf, model: &ScriptedModelServer, root: &Path) -> OpenCodeRuntime {
    let found = support::FoundRuntime { binary, rg_dir: "/usr/bin".into() };
    OpenCodeRuntime::new(support::scripted_config(&found, model, false), root.join("rt"), RuntimeHost::default())
}

#[tokio::test]
async fn a_runtime_that_crashes_at_start_is_an_error_quoting_its_output() {
    let tmp = tempfile::tempdir().unwrap();
    let model = ScriptedModelServer::start(Script::default_agent()).unwrap();
    let bin = fake_binary(tmp.path(), "echo 'Error: unable to open database file /x/opencode.db' >&2; exit 1");
    let rt = runtime(bin, &model, tmp.path());
    let msg = first_error(&rt, tmp.path()).await;
    assert!(msg.contains("exited at start") && msg.contains("unable to open database file"), "{msg}");
    assert!(!rt.status().running);
}

#[tokio::test]
async fn a_runtime_of_another_version_is_refused_and_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    // A stand-in server that answers health with another version.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else { return };
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let body = r#"{"healthy":true,"version":"1.17.0"}"#;
                let _ = sock
                    .write_all(format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len()).as_bytes())
                    .await;
            });
        }
    });
    let pidfile = tmp.path().join("pid");
    let bin = fake_binary(
        tmp.path(),
        &format!("echo $$ > {}\necho 'opencode server listening on http://127.0.0.1:{port}'\nexec sleep 60", pidfile.display()),
    );
    let model = ScriptedModelServer::start(Script::default_agent()).unwrap();
    let rt = runtime(bin, &model, tmp.path());
    let msg = first_error(&rt, tmp.path()).await;
    assert!(msg.contains("reports version 1.17.0") && msg.contains("needs exactly 1.18.33"), "{msg}");
    let pid: u32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    assert!(support::gone_within(pid, Duration::from_secs(5)).await, "refused runtime left running");
}

#[tokio::test]
async fn a_missing_binary_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let model = ScriptedModelServer::start(Script::default_agent()).unwrap();
    let rt = runtime(tmp.path().join("no-such-opencode"), &model, tmp.path());
    let msg = first_error(&rt, tmp.path()).await;
    assert!(msg.contains("could not be started") && msg.contains("no-such-opencode"), "{msg}");
}
