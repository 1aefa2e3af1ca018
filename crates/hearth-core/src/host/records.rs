//! Records of the runtime processes Hearth started, so a later Hearth can stop the ones an earlier
//! Hearth left behind when it died (the parent-death signal covers the runtime itself; MCP children
//! in its process group, or a death the signal missed, are swept here). A process is only touched
//! when its pid, start time and command line all match the record: never someone else's process.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often a swept group is looked at while it stops (it is not Hearth's child: nothing to wait on).
pub const SWEEP_POLL: Duration = Duration::from_millis(50);
/// Most records read in one sweep (a corrupted folder must not stall start-up).
pub const MAX_RECORDS: usize = 256;
/// Largest record file read.
pub const MAX_RECORD_BYTES: u64 = 4096;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessRecord {
    pub pid: u32,
    /// Start time in clock ticks since boot (`/proc/<pid>/stat` field 22): pids are reused.
    pub start_ticks: u64,
    pub app_pid: u32,
    pub app_start_ticks: u64,
    /// Substring the command line must contain (the binary path).
    pub binary: String,
}

/// Start time of a live, non-zombie process.
pub fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if fields.first() == Some(&"Z") {
        return None;
    }
    // After the name: state is field 3, so start time (field 22) is index 19 here.
    fields.get(19)?.parse().ok()
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline")).map(|b| String::from_utf8_lossy(&b).replace('\0', " ")).unwrap_or_default()
}

fn record_path(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("runtime-{pid}.json"))
}

/// Write the record of a freshly started runtime.
pub fn write(dir: &Path, pid: u32, binary: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let me = std::process::id();
    let record = ProcessRecord {
        pid,
        start_ticks: start_ticks(pid).unwrap_or(0),
        app_pid: me,
        app_start_ticks: start_ticks(me).unwrap_or(0),
        binary: binary.display().to_string(),
    };
    std::fs::write(record_path(dir, pid), serde_json::to_vec(&record).expect("record serialises"))
}

/// Forget a runtime that was stopped cleanly.
pub fn remove(dir: &Path, pid: u32) {
    let _ = std::fs::remove_file(record_path(dir, pid));
}

/// What a sweep did, for the log and the diagnostics panel.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SweepReport {
    pub stopped: Vec<u32>,
    /// Records whose process was gone or was not Hearth's (pid reused): only the record was removed.
    pub forgotten: Vec<u32>,
    /// Records of runtimes owned by a Hearth that is still running: left alone.
    pub kept: Vec<u32>,
}

/// Stop runtimes recorded by Hearth processes that are gone.
pub async fn sweep(dir: &Path) -> SweepReport {
    let mut report = SweepReport::default();
    let Ok(entries) = std::fs::read_dir(dir) else { return report };
    for entry in entries.flatten().take(MAX_RECORDS) {
        let path = entry.path();
        let record: Option<ProcessRecord> = entry
            .metadata()
            .ok()
            .filter(|m| m.is_file() && m.len() <= MAX_RECORD_BYTES)
            .and_then(|_| std::fs::read(&path).ok())
            .and_then(|b| serde_json::from_slice(&b).ok());
        let Some(record) = record else {
            let _ = std::fs::remove_file(&path);
            continue;
        };
        let owner_alive = start_ticks(record.app_pid) == Some(record.app_start_ticks) && record.app_pid != std::process::id();
        if owner_alive {
            report.kept.push(record.pid);
            continue;
        }
        let leader = start_ticks(record.pid);
        let ours = leader == Some(record.start_ticks) && cmdline(record.pid).contains(&record.binary);
        // Members of the recorded group count only when its leader is gone: the kernel never hands
        // out a pid that is still some group's id, so they are the runtime's children. A live leader
        // that is not ours means the pid was reused, and its group belongs to a stranger.
        let orphans_left = leader.is_none() && !group_members(record.pid).is_empty();
        if ours || orphans_left {
            stop_group(record.pid).await;
            tracing::warn!(pid = record.pid, "stopped a runtime left behind by an earlier Hearth");
            report.stopped.push(record.pid);
        } else {
            report.forgotten.push(record.pid);
        }
        let _ = std::fs::remove_file(&path);
    }
    report
}

/// Live processes still in the process group `pgid` whose leader (the recorded runtime) is gone;
/// only counted when the group id is the recorded pid, which Hearth made them by starting it.
fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(procs) = std::fs::read_dir("/proc") else { return vec![] };
    procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != pgid)
        .filter(|&pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    let rest = s.rsplit_once(')')?.1.to_string();
                    let f: Vec<&str> = rest.split_whitespace().collect();
                    // state, ppid, pgrp
                    Some(f.first() != Some(&"Z") && f.get(2)?.parse::<u32>().ok()? == pgid)
                })
                .unwrap_or(false)
        })
        .collect()
}

/// Stop a group Hearth did not spawn in this process (so it cannot reap it): it is gone when
/// neither the leader nor a member is left.
async fn stop_group(pgid: u32) {
    crate::host::child::stop_group(pgid, async {
        while start_ticks(pgid).is_some() || !group_members(pgid).is_empty() {
            tokio::time::sleep(SWEEP_POLL).await;
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    /// A `sleep` in its own group, returned once it has exec'd (before that its command line is
    /// still this test binary's).
    fn spawn_group_leader(arg: &str) -> std::process::Child {
        let child = std::process::Command::new("sleep").arg(arg).process_group(0).spawn().unwrap();
        for _ in 0..200 {
            if cmdline(child.id()).starts_with("sleep") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        child
    }

    #[tokio::test]
    async fn a_runtime_left_by_a_dead_hearth_is_stopped() {
        let tmp = tempfile::tempdir().unwrap();
        let mut child = spawn_group_leader("300");
        let pid = child.id();
        write(tmp.path(), pid, Path::new("sleep")).unwrap();
        // Pretend the recording Hearth died: rewrite the owner to a pid that is gone.
        let path = record_path(tmp.path(), pid);
        let mut rec: ProcessRecord = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        rec.app_pid = u32::MAX - 1;
        std::fs::write(&path, serde_json::to_vec(&rec).unwrap()).unwrap();
        let report = sweep(tmp.path()).await;
        assert_eq!(report.stopped, vec![pid]);
        let _ = child.wait();
        assert!(!path.exists());
    }

    #[tokio::test]
    async fn a_reused_pid_is_never_touched() {
        let tmp = tempfile::tempdir().unwrap();
        let mut child = spawn_group_leader("300");
        let pid = child.id();
        // A record naming this pid, but with another start time: the pid was reused by a stranger.
        let rec = ProcessRecord { pid, start_ticks: 1, app_pid: u32::MAX - 1, app_start_ticks: 1, binary: "sleep".into() };
        std::fs::write(record_path(tmp.path(), pid), serde_json::to_vec(&rec).unwrap()).unwrap();
        let report = sweep(tmp.path()).await;
        assert_eq!(report.forgotten, vec![pid]);
        assert!(start_ticks(pid).is_some(), "a stranger's process was killed");
        child.kill().unwrap();
        let _ = child.wait();
    }

    #[tokio::test]
    async fn a_strangers_process_group_on_a_reused_pid_is_never_touched() {
        let tmp = tempfile::tempdir().unwrap();
        // A stranger's group: a shell leading it, with a child of its own in the group.
        let mut leader = std::process::Command::new("sh").args(["-c", "sleep 300 & wait"]).process_group(0).spawn().unwrap();
        let pid = leader.id();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while group_members(pid).is_empty() {
            assert!(std::time::Instant::now() < deadline, "the stranger's child did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        let members = group_members(pid);
        // Hearth's record of an earlier runtime that had this pid, from a Hearth that is gone.
        let rec = ProcessRecord { pid, start_ticks: 1, app_pid: u32::MAX - 1, app_start_ticks: 1, binary: "opencode".into() };
        std::fs::write(record_path(tmp.path(), pid), serde_json::to_vec(&rec).unwrap()).unwrap();
        let report = sweep(tmp.path()).await;
        assert_eq!(report.forgotten, vec![pid]);
        assert!(start_ticks(pid).is_some(), "the stranger's group leader was killed");
        assert!(members.iter().all(|&m| start_ticks(m).is_some()), "the stranger's child was killed");
        unsafe { libc::killpg(pid as libc::pid_t, libc::SIGKILL) };
        let _ = leader.wait();
    }

    #[tokio::test]
    async fn records_of_a_live_hearth_are_kept_and_junk_is_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let mut child = spawn_group_leader("300");
        let pid = child.id();
        // Owned by a live process that is not this one (our parent, e.g. cargo).
        let parent = std::os::unix::process::parent_id();
        let rec = ProcessRecord { pid, start_ticks: start_ticks(pid).unwrap(), app_pid: parent, app_start_ticks: start_ticks(parent).unwrap(), binary: "sleep".into() };
        std::fs::write(record_path(tmp.path(), pid), serde_json::to_vec(&rec).unwrap()).unwrap();
        std::fs::write(tmp.path().join("garbage.json"), b"{not json").unwrap();
        let report = sweep(tmp.path()).await;
        assert_eq!(report.kept, vec![pid]);
        assert!(!tmp.path().join("garbage.json").exists());
        child.kill().unwrap();
        let _ = child.wait();
    }
}
