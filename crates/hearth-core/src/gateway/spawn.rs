//! Starting custom MCP servers so that none outlives Hearth: each in its own process group (so a
//! stop reaches its children too), with a parent-death signal, spawned from one long-lived thread
//! (Linux fires that signal when the forking THREAD exits, not the process).

use std::process::Stdio;
use std::sync::Mutex;
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
    cmd.args(args).env_clear().stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true).process_group(0);
    for key in PASSED_ENV {
        if let Some(v) = std::env::var_os(key) {
            cmd.env(key, v);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    #[cfg(target_os = "linux")]
    // SAFETY: only async-signal-safe calls (prctl, getppid, kill) between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
            if libc::getppid() == 1 {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
            Ok(())
        });
    }
    cmd
}

type Job = Box<dyn FnOnce() + Send>;

/// Spawn `cmd` on the long-lived launcher thread.
pub async fn spawn(mut cmd: Command) -> std::io::Result<Child> {
    static LAUNCHER: std::sync::OnceLock<Mutex<std::sync::mpsc::Sender<Job>>> = std::sync::OnceLock::new();
    let sender = LAUNCHER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("hearth-mcp-launcher".into())
            .spawn(move || {
                for job in rx {
                    job();
                }
            })
            .expect("launcher thread");
        Mutex::new(tx)
    });
    let handle = tokio::runtime::Handle::current();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let _guard = handle.enter();
        let _ = tx.send(cmd.spawn());
    });
    sender.lock().unwrap().send(job).map_err(|_| std::io::Error::other("launcher thread is gone"))?;
    rx.await.map_err(|_| std::io::Error::other("launcher thread dropped the job"))?
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
