//! Starting custom MCP servers so that none outlives Hearth (see `crate::host::child`), with only the
//! environment they need.

use std::process::Stdio;

use tokio::process::{Child, Command};
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

/// Stop a server's whole group and reap it (see [`crate::host::child::stop_group`]).
pub async fn stop_group(child: &mut Child) {
    crate::host::child::stop_child(child).await;
}
