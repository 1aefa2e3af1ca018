//! Starting custom MCP servers so that none outlives Hearth (see `crate::host::child`), with only the
//! environment they need.

use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

/// After SIGTERM to a server's group, how long before SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(2);
/// Environment variables passed through from Hearth to a custom server; nothing else is inherited
/// (Hearth's own environment may hold secrets the server must not see).
pub const PASSED_ENV: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "LOGNAME", "SHELL", "TERM"];

/// A command for a stdio server: piped stdio, a clean environment plus `env`, its own group.
pub fn server_command<'a>(program: &str, args: &[String], env: impl IntoIterator<Item = (&'a str, &'a str)>) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args).env_clear().stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    crate::host::child::contain(&mut cmd);
    for key in PASSED_ENV {
        if let Some(v) = std::env::var_os(key) {
            cmd.env(key, v);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Spawn `cmd` on the long-lived launcher thread.
pub async fn spawn(cmd: Command) -> std::io::Result<Child> {
    crate::host::child::spawn(cmd).await
}

/// Stop a server's whole group: SIGTERM, then SIGKILL after [`STOP_GRACE`]; reaps the child.
pub async fn stop_group(child: &mut Child) {
    let Some(pid) = child.id() else { return };
    let pgid = pid as libc::pid_t;
    // SAFETY: plain syscall on a group we created.
    unsafe { libc::kill(-pgid, libc::SIGTERM) };
    if tokio::time::timeout(STOP_GRACE, child.wait()).await.is_err() {
        // SAFETY: as above.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = child.wait().await;
    } else {
        // The leader is gone; make sure nothing else of its group lingers.
        // SAFETY: as above.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
}
