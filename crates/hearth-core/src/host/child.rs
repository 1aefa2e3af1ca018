//! Child processes that never outlive Hearth: each in its own process group (so a stop reaches its
//! children too), with a parent-death signal, spawned from one long-lived thread — Linux fires that
//! signal when the forking THREAD exits, not the process, so a retiring pool thread must not fork.

use std::sync::Mutex;

use tokio::process::{Child, Command};

/// Put `cmd` in its own process group and have the kernel kill it if Hearth dies.
pub fn contain(cmd: &mut Command) {
    cmd.process_group(0);
    #[cfg(target_os = "linux")]
    // SAFETY: only async-signal-safe calls (prctl, getppid, kill) between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
            // Hearth died between fork and prctl: the signal was missed, so act on it now.
            if libc::getppid() == 1 {
                libc::kill(libc::getpid(), libc::SIGKILL);
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
