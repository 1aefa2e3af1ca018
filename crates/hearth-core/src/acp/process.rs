//! An agent's process: started in its own process group with a parent-death signal (from the
//! launcher thread), recorded for the start-up sweep, reaped by a watcher the moment it exits, and
//! stopped with SIGTERM then SIGKILL of its whole group — the same supervision as OpenCode's server.
//! Its stderr goes to a bounded tail; its stdout is the protocol, read by `connection.rs`.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Instant;

use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::watch;

use crate::host::output_tail::{OutputLines, OutputTail};

/// After the agent exits, how long its stderr is read for what it printed last.
const STDERR_DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// How to start one agent process. The child starts from an empty environment: `env` is all of it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct AgentLaunch {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub current_dir: PathBuf,
}

impl std::fmt::Debug for AgentLaunch {
    /// Values of the environment can be keys: only the names are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentLaunch")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env", &self.env.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>())
            .field("current_dir", &self.current_dir)
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("The agent {program} could not be started: {source}")]
    Spawn { program: PathBuf, source: std::io::Error },
}

/// A running agent process.
pub struct AgentProcess {
    pub pid: u32,
    pub started: Instant,
    /// The tail of its stderr, and of any stdout line that was not protocol.
    pub tail: Arc<OutputTail>,
    records_dir: Option<PathBuf>,
    exit: watch::Receiver<Option<String>>,
}

/// The agent's protocol pipes, handed to the connection.
pub struct AgentPipes {
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
}

impl AgentProcess {
    /// How the process ended, if it has.
    pub fn exited(&self) -> Option<String> {
        self.exit.borrow().clone()
    }

    /// Resolves when the process has exited, with how it ended.
    pub async fn wait_exit(&self) -> String {
        crate::host::child::exit_of(&self.exit).await
    }

    /// SIGTERM the whole group, then SIGKILL it: some agents (Codex) do not exit when their stdin
    /// closes. Leaves no process behind and forgets the record.
    pub async fn stop(&self) {
        crate::host::child::stop_group(self.pid, async {
            self.wait_exit().await;
        })
        .await;
        if let Some(dir) = &self.records_dir {
            crate::host::records::remove(dir, self.pid);
        }
    }
}

/// Start `launch`; the process is recorded in `records_dir` for the start-up sweep.
pub async fn spawn(launch: &AgentLaunch, records_dir: Option<PathBuf>) -> Result<(AgentProcess, AgentPipes), SpawnError> {
    let mut cmd = Command::new(&launch.program);
    cmd.args(&launch.args)
        .current_dir(&launch.current_dir)
        .env_clear()
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Dropping the pipes must not leave the agent running: the watcher owns the child.
        .kill_on_drop(false);
    crate::host::child::contain(&mut cmd);
    let mut child = crate::host::child::spawn(cmd).await.map_err(|source| SpawnError::Spawn { program: launch.program.clone(), source })?;
    let pid = child.id().unwrap_or_default();
    if let Some(dir) = &records_dir {
        if let Err(e) = crate::host::records::write(dir, pid, &launch.program) {
            tracing::warn!(error = %e, "could not record the agent process for the start-up sweep");
        }
    }
    let tail = Arc::new(OutputTail::default());
    let stderr = child.stderr.take().expect("piped");
    let mut pump = tokio::spawn(pump_stderr(stderr, tail.clone()));
    let pipes = AgentPipes { stdin: child.stdin.take().expect("piped"), stdout: child.stdout.take().expect("piped") };
    let (exit_tx, exit) = watch::channel(None);
    tokio::spawn(async move {
        let status = child.wait().await.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
        // What it printed last is the sentence's evidence: read it to the end before saying it
        // exited (a child it left may hold the pipe open, hence the bound).
        let _ = tokio::time::timeout(STDERR_DRAIN_TIMEOUT, &mut pump).await;
        tracing::info!(pid, %status, "agent process exited");
        exit_tx.send_replace(Some(status));
    });
    tracing::info!(pid, program = %launch.program.display(), "agent starting");
    Ok((AgentProcess { pid, started: Instant::now(), tail, records_dir, exit }, pipes))
}

async fn pump_stderr(stream: tokio::process::ChildStderr, tail: Arc<OutputTail>) {
    let mut lines = OutputLines::new(stream);
    while let Some(line) = lines.next_line().await {
        tail.push_line(&line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::procinfo::is_running;

    fn sh(script: &str, dir: &std::path::Path) -> AgentLaunch {
        AgentLaunch {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            env: vec![("GREETING".into(), "hello".into())],
            current_dir: dir.to_path_buf(),
        }
    }

    #[tokio::test]
    async fn the_agent_gets_only_its_environment_is_recorded_and_stops_with_its_group() {
        let tmp = tempfile::tempdir().unwrap();
        std::env::set_var("HEARTH_ACP_PROCESS_TEST_LEAK", "secret");
        let launch = sh("echo \"$GREETING [$HEARTH_ACP_PROCESS_TEST_LEAK] $(pwd)\" >&2; sleep 60 & wait", tmp.path());
        let records = tmp.path().join("records");
        let (process, _pipes) = spawn(&launch, Some(records.clone())).await.unwrap();
        let expected = format!("hello [] {}", tmp.path().display());
        assert!(crate::diagnostics::kit::wait_until(std::time::Duration::from_secs(5), || async { process.tail.text().contains(&expected) }).await, "{}", process.tail.text());
        assert!(records.join(format!("runtime-{}.json", process.pid)).exists());
        let children = crate::host::procinfo::children(process.pid);
        assert_eq!(children.len(), 1, "the shell's sleep is its child");
        process.stop().await;
        assert!(process.exited().is_some() && !is_running(process.pid) && !is_running(children[0]));
        assert!(!records.join(format!("runtime-{}.json", process.pid)).exists());
    }

    #[tokio::test]
    async fn a_program_that_does_not_exist_is_a_sentence() {
        let tmp = tempfile::tempdir().unwrap();
        let launch = AgentLaunch { program: "/no/such/agent".into(), args: vec![], env: vec![], current_dir: tmp.path().into() };
        let Err(err) = spawn(&launch, None).await else { panic!("spawned a missing program") };
        assert!(err.to_string().contains("/no/such/agent could not be started"), "{err}");
    }
}
