//! One connection to a host through the system's OpenSSH: a control master (`ssh -M -N`) that
//! Hearth starts, owns (its process group, the parent-death signal) and stops, and everything else
//! multiplexed over it — remote commands, uploads through a command's stdin, local and remote port
//! forwards (`ssh -O forward`). The user's ssh configuration, agent, ProxyJump, known hosts and
//! hardware keys apply unchanged; Hearth only insists on `BatchMode` (it never asks for a password
//! or a passphrase) and strict host-key checking (an unknown or changed key is refused).
//!
//! ssh tells why a connection failed only in words on its stderr: [`classify`] reads them, once,
//! into a typed [`SshError`].

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio::sync::watch;

use crate::host::output_tail::OutputTail;

/// How long connecting (and authenticating) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// How often the master's readiness is checked while it connects.
const READY_POLL: Duration = Duration::from_millis(100);
/// The master checks the link this often, and gives up after this many silent checks: a dropped
/// link is noticed within about 15 s even when nothing is sent.
const ALIVE_INTERVAL_SECS: u32 = 5;
const ALIVE_COUNT_MAX: u32 = 3;
/// Bound on a short remote command (a listing, a check, a hash).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// Most output kept of a remote command.
pub const MAX_COMMAND_OUTPUT: usize = 4 * 1024 * 1024;
/// Attempts at a local forward on a port just found free (another process may take it first).
const FORWARD_ATTEMPTS: usize = 5;
/// How long the master gets to exit after `-O exit` before its group is killed.
const EXIT_GRACE: Duration = Duration::from_secs(3);

/// How Hearth runs ssh.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SshOptions {
    /// A configuration file used instead of the user's own (`ssh -F`): `HEARTH_SSH_CONFIG`, tests.
    pub config_file: Option<PathBuf>,
    /// Where control sockets go (a short path: a socket's path is at most 108 bytes).
    pub control_dir: PathBuf,
    pub connect_timeout: Duration,
}

impl SshOptions {
    pub fn new(control_dir: PathBuf) -> Self {
        Self { config_file: None, control_dir, connect_timeout: CONNECT_TIMEOUT }
    }

    /// How the app with data folder `data_dir` runs ssh (the window and `hearth selftest --host`).
    pub fn for_data_dir(data_dir: &std::path::Path, config_file: Option<PathBuf>) -> Self {
        Self { config_file, ..Self::new(data_dir.join("ssh")) }
    }
}

/// Why talking to a host failed, in a sentence naming the host and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SshError {
    #[error("Hearth needs OpenSSH's `ssh` to reach {host}, and it is not on PATH (install openssh-client).")]
    NoSsh { host: String },
    #[error("{host} could not be reached: {detail}")]
    Unreachable { host: String, detail: String },
    #[error("The host key of {host} is not known, and Hearth checks it strictly. Run `ssh {host}` once in a terminal, check the fingerprint and accept it, then try again.")]
    HostKeyUnknown { host: String },
    #[error("The host key of {host} has CHANGED since you accepted it: this can mean someone is intercepting the connection. Hearth will not connect. If the change is expected, remove the old key with `ssh-keygen -R {host}` and accept the new one with `ssh {host}`.")]
    HostKeyChanged { host: String },
    #[error("{host} refused every key ssh offered ({detail}). Hearth never asks for a password or passphrase: add your key to the host's authorized_keys, or to your ssh agent.")]
    KeyRefused { host: String, detail: String },
    #[error("ssh could not connect to {host}: {detail}")]
    Failed { host: String, detail: String },
    #[error("The connection to {host} was lost.")]
    Closed { host: String },
    #[error("{host} did not answer {what} within {} s.", .after.as_secs())]
    Timeout { host: String, what: String, after: Duration },
    #[error("On {host}, {what} failed ({status}): {stderr}")]
    Remote { host: String, what: String, status: String, stderr: String },
    #[error("Hearth could not start ssh for {host}: {detail}")]
    Local { host: String, detail: String },
}

/// What ssh's last words on a failed connection mean.
pub fn classify(host: &str, stderr: &str) -> SshError {
    let host = host.to_string();
    let detail = stderr.lines().map(str::trim).rfind(|l| !l.is_empty() && !l.starts_with('@')).unwrap_or("ssh exited").to_string();
    if stderr.contains("REMOTE HOST IDENTIFICATION HAS CHANGED") || stderr.contains("Host key for") && stderr.contains("has changed") {
        SshError::HostKeyChanged { host }
    } else if stderr.contains("host key is known") && stderr.contains("strict checking") || stderr.contains("Host key verification failed") {
        SshError::HostKeyUnknown { host }
    } else if stderr.contains("Permission denied") {
        SshError::KeyRefused { host, detail }
    } else if ["Connection refused", "No route to host", "Could not resolve hostname", "Connection timed out", "Network is unreachable", "Name or service not known", "Operation timed out"]
        .iter()
        .any(|p| stderr.contains(p))
    {
        SshError::Unreachable { host, detail }
    } else {
        SshError::Failed { host, detail }
    }
}

/// A word quoted for the remote shell.
pub fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The output of a finished remote command.
#[derive(Debug, Clone)]
pub struct Output {
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Output {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).trim().to_string()
    }
}

/// The running control master.
struct Master {
    pid: u32,
    exit: watch::Receiver<Option<String>>,
    stderr: Arc<OutputTail>,
}

/// One connection to one host.
pub struct Link {
    host: String,
    options: SshOptions,
    control: PathBuf,
    master: Master,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link").field("host", &self.host).field("master", &self.master.pid).finish_non_exhaustive()
    }
}

impl Link {
    /// Connect to `host` (anything `ssh` takes: an alias, `user@host`, with `-p` in the config).
    pub async fn connect(host: &str, options: &SshOptions) -> Result<Self, SshError> {
        std::fs::create_dir_all(&options.control_dir).map_err(|e| SshError::Local { host: host.into(), detail: e.to_string() })?;
        let control = options.control_dir.join(format!("{}.sock", &uuid::Uuid::new_v4().simple().to_string()[..12]));
        let mut cmd = Command::new("ssh");
        cmd.args(base_args(options))
            .args(["-M", "-N", "-S"])
            .arg(&control)
            .args(["-o", "ControlPersist=no", "-o", "ExitOnForwardFailure=yes", "-o", "LogLevel=ERROR"])
            .args(["-o", &format!("ConnectTimeout={}", options.connect_timeout.as_secs().max(1))])
            .args(["-o", &format!("ServerAliveInterval={ALIVE_INTERVAL_SECS}"), "-o", &format!("ServerAliveCountMax={ALIVE_COUNT_MAX}")])
            .arg("--")
            .arg(host)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        crate::host::child::contain(&mut cmd);
        let mut child = match crate::host::child::spawn(cmd).await {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(SshError::NoSsh { host: host.into() }),
            Err(e) => return Err(SshError::Local { host: host.into(), detail: e.to_string() }),
        };
        let pid = child.id().unwrap_or_default();
        let stderr = Arc::new(OutputTail::default());
        tokio::spawn(pump(child.stderr.take().expect("piped"), stderr.clone()));
        let (exit_tx, exit) = watch::channel(None);
        tokio::spawn(async move {
            let status = child.wait().await.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
            exit_tx.send_replace(Some(status));
        });
        let link = Link { host: host.to_string(), options: options.clone(), control, master: Master { pid, exit, stderr } };
        let deadline = Instant::now() + options.connect_timeout + Duration::from_secs(5);
        loop {
            if link.master.exit.borrow().is_some() {
                // Let the pump read the last words.
                tokio::time::sleep(Duration::from_millis(50)).await;
                return Err(classify(host, &link.master.stderr.text()));
            }
            if link.check().await {
                tracing::info!(host, pid, "ssh link up");
                return Ok(link);
            }
            if Instant::now() > deadline {
                link.close().await;
                return Err(SshError::Timeout { host: host.into(), what: "the connection".into(), after: options.connect_timeout });
            }
            tokio::time::sleep(READY_POLL).await;
        }
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    /// The local ssh process that holds the connection (and every forwarded socket's local end).
    pub fn master_pid(&self) -> u32 {
        self.master.pid
    }

    /// Whether the connection is up (the master runs).
    pub fn is_alive(&self) -> bool {
        self.master.exit.borrow().is_none()
    }

    /// Resolves when the connection is gone.
    pub async fn closed(&self) {
        let mut exit = self.master.exit.clone();
        let _ = exit.wait_for(Option::is_some).await;
    }

    async fn check(&self) -> bool {
        let mut cmd = self.mux(&["-O", "check"]);
        cmd.stdout(Stdio::null()).stderr(Stdio::null()).stdin(Stdio::null());
        matches!(cmd.status().await, Ok(s) if s.success())
    }

    /// `ssh` over the control socket with `extra` options, for this host.
    fn mux(&self, extra: &[&str]) -> Command {
        let mut cmd = Command::new("ssh");
        cmd.args(base_args(&self.options)).arg("-S").arg(&self.control).args(extra).arg("--").arg(&self.host);
        cmd.kill_on_drop(true);
        cmd
    }

    /// A remote shell command over the connection (its stdio piped), for the caller to run.
    pub fn command(&self, remote: &str) -> Command {
        let mut cmd = self.mux(&[]);
        cmd.arg(remote).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd
    }

    /// Run `remote` to its end within `timeout`, feeding it `input`; `what` names it in errors.
    pub async fn run(&self, what: &str, remote: &str, input: Option<&[u8]>, timeout: Duration) -> Result<Output, SshError> {
        let mut child = self.command(remote).spawn().map_err(|e| SshError::Local { host: self.host.clone(), detail: e.to_string() })?;
        let mut stdin = child.stdin.take().expect("piped");
        let (mut out, mut err) = (child.stdout.take().expect("piped"), child.stderr.take().expect("piped"));
        let work = async {
            let feed = async {
                if let Some(bytes) = input {
                    stdin.write_all(bytes).await?;
                }
                drop(stdin);
                Ok::<_, std::io::Error>(())
            };
            let (mut o, mut e) = (Vec::new(), Vec::new());
            let (mut out, mut err) = ((&mut out).take(MAX_COMMAND_OUTPUT as u64), (&mut err).take(MAX_COMMAND_OUTPUT as u64));
            let (fed, _, _) = tokio::join!(feed, out.read_to_end(&mut o), err.read_to_end(&mut e));
            let status = child.wait().await;
            (fed, status, o, e)
        };
        let (fed, status, stdout, stderr) = tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| SshError::Timeout { host: self.host.clone(), what: what.into(), after: timeout })?;
        let stderr = self.judge(what, status, fed.is_ok(), &stderr)?;
        Ok(Output { stdout, stderr })
    }

    /// A finished command's outcome: the link lost, the command failed (or its input could not be
    /// sent), or its stderr.
    fn judge(&self, what: &str, status: std::io::Result<std::process::ExitStatus>, input_sent: bool, stderr: &[u8]) -> Result<String, SshError> {
        let stderr = String::from_utf8_lossy(stderr).trim().to_string();
        let status = status.map_err(|e| SshError::Local { host: self.host.clone(), detail: e.to_string() })?;
        if !self.is_alive() {
            return Err(SshError::Closed { host: self.host.clone() });
        }
        if !status.success() || !input_sent {
            return Err(SshError::Remote { host: self.host.clone(), what: what.into(), status: status.to_string(), stderr });
        }
        Ok(stderr)
    }

    /// Run `remote` with the file `local` as its stdin (streamed, not read into memory).
    pub async fn run_with_file(&self, what: &str, remote: &str, local: &Path, timeout: Duration) -> Result<Output, SshError> {
        let local_err = |e: std::io::Error| SshError::Local { host: self.host.clone(), detail: format!("{}: {e}", local.display()) };
        let mut file = tokio::fs::File::open(local).await.map_err(local_err)?;
        let mut child = self.command(remote).spawn().map_err(|e| SshError::Local { host: self.host.clone(), detail: e.to_string() })?;
        let mut stdin = child.stdin.take().expect("piped");
        let mut err = child.stderr.take().expect("piped");
        let work = async {
            let copy = async {
                let copied = tokio::io::copy(&mut file, &mut stdin).await;
                drop(stdin);
                copied
            };
            let mut e = Vec::new();
            let mut err = (&mut err).take(MAX_COMMAND_OUTPUT as u64);
            let (copied, _) = tokio::join!(copy, err.read_to_end(&mut e));
            (copied, child.wait().await, e)
        };
        let (copied, status, stderr) = tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| SshError::Timeout { host: self.host.clone(), what: what.into(), after: timeout })?;
        let stderr = self.judge(what, status, copied.is_ok(), &stderr)?;
        Ok(Output { stdout: Vec::new(), stderr })
    }

    /// Forward a free local loopback port to `remote_port` on the host's loopback; the local port.
    pub async fn forward_local(&self, remote_port: u16) -> Result<u16, SshError> {
        let mut last = None;
        for _ in 0..FORWARD_ATTEMPTS {
            let local = free_local_port().map_err(|e| SshError::Local { host: self.host.clone(), detail: e.to_string() })?;
            let spec = format!("127.0.0.1:{local}:127.0.0.1:{remote_port}");
            match self.forward(&["-L", &spec]).await {
                Ok(_) => return Ok(local),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("attempted"))
    }

    /// Forward a port on the host's loopback (chosen by its sshd) to `local_port` on this
    /// machine's; the remote port.
    pub async fn forward_remote(&self, local_port: u16) -> Result<u16, SshError> {
        let out = self.forward(&["-R", &format!("127.0.0.1:0:127.0.0.1:{local_port}")]).await?;
        out.text().lines().find_map(|l| l.trim().parse().ok()).ok_or_else(|| SshError::Failed { host: self.host.clone(), detail: format!("ssh did not say which port it forwards: {}", out.text()) })
    }

    async fn forward(&self, spec: &[&str]) -> Result<Output, SshError> {
        let mut args = vec!["-O", "forward"];
        args.extend_from_slice(spec);
        let mut cmd = self.mux(&args);
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let out = tokio::time::timeout(COMMAND_TIMEOUT, cmd.output())
            .await
            .map_err(|_| SshError::Timeout { host: self.host.clone(), what: "a port forward".into(), after: COMMAND_TIMEOUT })?
            .map_err(|e| SshError::Local { host: self.host.clone(), detail: e.to_string() })?;
        if !out.status.success() {
            return Err(SshError::Remote { host: self.host.clone(), what: "a port forward".into(), status: out.status.to_string(), stderr: String::from_utf8_lossy(&out.stderr).trim().to_string() });
        }
        Ok(Output { stdout: out.stdout, stderr: String::from_utf8_lossy(&out.stderr).into_owned() })
    }

    /// Close the connection: ask the master to exit, then stop its group. Everything multiplexed
    /// over it ends, on the host too (its sessions see their stdin close).
    pub async fn close(&self) {
        if self.is_alive() {
            let mut exit = self.mux(&["-O", "exit"]);
            exit.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
            let _ = tokio::time::timeout(EXIT_GRACE, exit.status()).await;
        }
        let mut done = self.master.exit.clone();
        crate::host::child::stop_group(self.master.pid, async move {
            let _ = done.wait_for(Option::is_some).await;
        })
        .await;
        let _ = std::fs::remove_file(&self.control);
    }
}

fn base_args(options: &SshOptions) -> Vec<String> {
    let mut args = Vec::new();
    if let Some(config) = &options.config_file {
        args.push("-F".to_string());
        args.push(config.display().to_string());
    }
    // Never a prompt (Hearth has no terminal to ask in, and takes no passwords), and host keys
    // checked strictly whatever the user's configuration says.
    for o in ["BatchMode=yes", "StrictHostKeyChecking=yes"] {
        args.push("-o".into());
        args.push(o.into());
    }
    args
}

fn free_local_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

async fn pump(stream: tokio::process::ChildStderr, tail: Arc<OutputTail>) {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tail.push_line(&line);
    }
}

/// The path of a remote file named by `parts` below `root`, for the remote shell.
pub fn remote_path(root: &str, parts: &[&str]) -> String {
    let mut p = root.trim_end_matches('/').to_string();
    for part in parts {
        p.push('/');
        p.push_str(part);
    }
    p
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_s_last_words_become_the_right_sentence() {
        let changed = "@@@@@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n@@@@@@@@@@@\nHost key verification failed.\n";
        assert!(matches!(classify("h", changed), SshError::HostKeyChanged { .. }));
        let unknown = "No ED25519 host key is known for [127.0.0.1]:2222 and you have requested strict checking.\nHost key verification failed.\n";
        assert!(matches!(classify("h", unknown), SshError::HostKeyUnknown { .. }));
        let refused = "hearth@127.0.0.1: Permission denied (publickey).\n";
        match classify("h", refused) {
            SshError::KeyRefused { detail, .. } => assert!(detail.contains("publickey")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(classify("h", "ssh: connect to host 127.0.0.1 port 9: Connection refused\n"), SshError::Unreachable { .. }));
        assert!(matches!(classify("nowhere", "ssh: Could not resolve hostname nowhere: Name or service not known\n"), SshError::Unreachable { .. }));
        assert!(matches!(classify("h", "something else\n"), SshError::Failed { .. }));
        let sentence = SshError::HostKeyChanged { host: "box".into() }.to_string();
        assert!(sentence.contains("ssh-keygen -R box") && sentence.contains("will not connect"), "{sentence}");
    }

    #[test]
    fn words_are_quoted_for_the_remote_shell() {
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(remote_path("/home/u/", &[".cache", "hearth"]), "/home/u/.cache/hearth");
    }
}
