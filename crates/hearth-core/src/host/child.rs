//! Child processes that never outlive Hearth: each in its own process group (so a stop reaches its
//! children too), with a parent-death signal, spawned from one long-lived thread — Linux fires that
//! signal when the forking THREAD exits, not the process, so a retiring pool thread must not fork —
//! and stopped by one function, [`stop_group`], with one grace period.
//!
//! The crate's one `unsafe` block is here: the code that runs between fork and exec.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

/// Between SIGTERM and SIGKILL of a group. The runtime swallows a SIGTERM that lands during its
/// background npm install, so the escalation is not optional.
pub const STOP_GRACE: Duration = Duration::from_secs(3);

/// Put `cmd` in its own process group and have the kernel kill it if Hearth dies.
pub fn contain(cmd: &mut Command) {
    cmd.process_group(0);
    #[cfg(target_os = "linux")]
    // SAFETY: only async-signal-safe calls (prctl, getppid, kill) between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            // Hearth died between fork and prctl: the signal was missed, so act on it now.
            if nix::unistd::getppid() == Pid::from_raw(1) {
                let _ = nix::sys::signal::raise(Signal::SIGKILL);
            }
            Ok(())
        });
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// Spawn `cmd` (already `contain`ed) on the launcher thread, which lives as long as the app.
pub async fn spawn(mut cmd: Command) -> std::io::Result<Child> {
    static LAUNCHER: std::sync::OnceLock<Mutex<std::sync::mpsc::Sender<Job>>> = std::sync::OnceLock::new();
    let sender = LAUNCHER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("hearth-launcher".into())
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

/// Send `signal` to every process of the group `pgid`. A group that is already gone is fine.
pub fn signal_group(pgid: u32, signal: Signal) {
    if let Ok(pgid) = i32::try_from(pgid) {
        let _ = killpg(Pid::from_raw(pgid), signal);
    }
}

/// Stop the process group `pgid`: SIGTERM, then — once `leader_gone` resolves or [`STOP_GRACE`]
/// passes, whichever is first — SIGKILL for whatever is left of the group. Returns when
/// `leader_gone` has resolved and no member of the group is left alive (or a further grace passed
/// after the SIGKILL): a signalled process dies when it is next scheduled, not at `kill`.
pub async fn stop_group(pgid: u32, leader_gone: impl Future<Output = ()>) {
    signal_group(pgid, Signal::SIGTERM);
    tokio::pin!(leader_gone);
    let in_time = tokio::time::timeout(STOP_GRACE, &mut leader_gone).await.is_ok();
    if !in_time {
        tracing::warn!(pgid, "a process group ignored SIGTERM; killing it");
    }
    // Even when the leader left in time, members of its group may linger.
    signal_group(pgid, Signal::SIGKILL);
    if !in_time && tokio::time::timeout(STOP_GRACE, leader_gone).await.is_err() {
        tracing::warn!(pgid, "a process group leader survived SIGKILL");
    }
    let emptied = tokio::time::timeout(STOP_GRACE, async {
        while !crate::host::procinfo::group_members(pgid).is_empty() {
            tokio::time::sleep(GROUP_POLL).await;
        }
    });
    if emptied.await.is_err() {
        tracing::warn!(pgid, "members of a process group survived SIGKILL");
    }
}

/// How often [`stop_group`] looks whether the killed group is gone (a scan of `/proc`).
const GROUP_POLL: Duration = Duration::from_millis(10);

/// Stop a child Hearth spawned (its own group) and reap it.
pub async fn stop_child(child: &mut Child) {
    let Some(pid) = child.id() else { return };
    stop_group(pid, async {
        let _ = child.wait().await;
    })
    .await;
}

/// How a watched child ended (its watcher sends it once): resolves when it has.
pub async fn exit_of(exit: &tokio::sync::watch::Receiver<Option<String>>) -> String {
    let mut exit = exit.clone();
    let status = match exit.wait_for(Option::is_some).await {
        Ok(status) => status.clone().unwrap_or_default(),
        Err(_) => "the watcher is gone".into(),
    };
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::procinfo::is_running;

    #[tokio::test]
    async fn a_group_that_ignores_sigterm_is_killed_after_the_grace_with_its_children() {
        let tmp = tempfile::tempdir().unwrap();
        let grandchild = tmp.path().join("gc");
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(format!("trap '' TERM; (trap '' TERM; exec sleep 60) & echo $! > {}; while true; do sleep 1; done", grandchild.display()));
        contain(&mut cmd);
        let mut child = spawn(cmd).await.unwrap();
        let pid = child.id().unwrap();
        let gc = loop {
            if let Some(pid) = std::fs::read_to_string(&grandchild).ok().and_then(|s| s.trim().parse::<u32>().ok()) {
                break pid;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let t0 = std::time::Instant::now();
        stop_child(&mut child).await;
        assert!(t0.elapsed() >= STOP_GRACE - Duration::from_millis(100), "SIGKILL came before the grace");
        // Gone when the stop returns, not some time after: callers count processes next.
        assert!(!is_running(pid), "the leader survived");
        assert!(!is_running(gc), "the group's other member survived");
        assert!(crate::host::procinfo::group_members(pid).is_empty());
    }

    #[tokio::test]
    async fn a_group_that_obeys_sigterm_stops_at_once() {
        let mut cmd = Command::new("sleep");
        cmd.arg("60");
        contain(&mut cmd);
        let mut child = spawn(cmd).await.unwrap();
        let t0 = std::time::Instant::now();
        stop_child(&mut child).await;
        assert!(t0.elapsed() < STOP_GRACE, "waited the whole grace for a process that obeyed");
        assert!(child.try_wait().unwrap().is_some());
    }
}

