//! Resident memory of a process and its descendants, read from `/proc` (Linux). The runtime may
//! spawn children (local MCP servers, LSPs), so the memory it costs is the whole tree's, not just
//! its leader's. Used by the diagnostics panel and the runtime benchmark.

use std::io;

/// `/proc/<pid>/status` reports VmRSS in kB (KiB).
const BYTES_PER_KIB: u64 = 1024;

/// Resident memory of one process tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct TreeRss {
    /// Sum of VmRSS over the root and every live descendant. Pages shared between them are counted
    /// once per process, so this is an upper bound (children here share little with the runtime).
    pub bytes: u64,
    /// How many processes were summed (the root included).
    pub processes: u32,
}

/// VmRSS of `pid` in bytes; `Ok(0)` for a zombie (it has no memory left).
pub fn rss_bytes(pid: u32) -> io::Result<u64> {
    status_bytes(pid, RSS)
}

/// The resident memory a process holds now.
const RSS: &str = "VmRSS:";
/// The most resident memory a process has held since it started (its high-water mark).
const PEAK_RSS: &str = "VmHWM:";

/// A `/proc/<pid>/status` memory field in bytes; `Ok(0)` for a zombie.
fn status_bytes(pid: u32, field: &str) -> io::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    Ok(parse_status_kib(&status, field).unwrap_or(0) * BYTES_PER_KIB)
}

/// The direct children of `pid`, from `/proc/<pid>/task/*/children` (each thread lists the
/// children it forked); empty when `pid` is gone.
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    let mut found: Vec<u32> = tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|list| list.split_whitespace().filter_map(|p| p.parse().ok()).collect::<Vec<u32>>())
        .collect();
    found.sort_unstable();
    found.dedup();
    found
}

/// Every live descendant of `pid` (children, grandchildren, …), found by parent links in
/// `/proc/*/stat`: works without `CONFIG_PROC_CHILDREN`.
pub fn descendants(pid: u32) -> io::Result<Vec<u32>> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let Some(child) = entry?.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        // A process can exit between listing and reading: skip it.
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) {
            if let Some(ppid) = parse_ppid(&stat) {
                parents.push((child, ppid));
            }
        }
    }
    let mut found = Vec::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for &(child, ppid) in &parents {
            if ppid == parent && !found.contains(&child) {
                found.push(child);
                frontier.push(child);
            }
        }
    }
    Ok(found)
}

/// Whether process `pid` runs `command` (its executable is `command[0]`, resolved, and its
/// arguments are the rest), as `/proc` shows it.
pub fn runs_command(pid: u32, command: &[String]) -> bool {
    let Some((program, args)) = command.split_first() else { return false };
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"));
    let wanted = std::fs::canonicalize(program);
    let (Ok(exe), Ok(wanted)) = (exe, wanted) else { return false };
    if exe != wanted {
        return false;
    }
    let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return false };
    let argv: Vec<&[u8]> = raw.split(|b| *b == 0).filter(|a| !a.is_empty()).collect();
    argv.len() == args.len() + 1 && argv[1..].iter().zip(args).all(|(a, b)| *a == b.as_bytes())
}

/// Is `pid` a live process? A zombie counts as gone: it holds no memory and nobody may reap it
/// (PID 1 on some machines does not).
pub fn is_running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| stat_fields(&s).is_some_and(|f| f.first() != Some(&"Z")))
}

/// The live (not zombie) processes of process group `pgid`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let wanted = pgid.to_string();
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| stat_fields(&s).is_some_and(|f| f.first() != Some(&"Z") && f.get(2) == Some(&wanted.as_str())))
        })
        .collect()
}

/// The fields of `/proc/<pid>/stat` after the command name (state, ppid, pgrp, …): the name is in
/// parentheses and may itself contain spaces and parentheses.
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect())
}

/// Resident memory of `pid` plus its descendants. Fails only if `pid` itself cannot be read.
pub fn tree_rss(pid: u32) -> io::Result<TreeRss> {
    tree_sum(pid, RSS)
}

/// The most each process of the tree has held, summed: what the tree reaches while it works, which
/// a reading between two turns misses (the runtime's collector hands back memory when idle, and
/// takes it again with the next turn). Fails only if `pid` itself cannot be read.
pub fn tree_peak_rss(pid: u32) -> io::Result<u64> {
    tree_sum(pid, PEAK_RSS).map(|t| t.bytes)
}

fn tree_sum(pid: u32, field: &str) -> io::Result<TreeRss> {
    let mut bytes = status_bytes(pid, field)?;
    let mut processes = 1;
    for child in descendants(pid)? {
        // A descendant that exited meanwhile costs nothing any more.
        if let Ok(b) = status_bytes(child, field) {
            bytes += b;
            processes += 1;
        }
    }
    Ok(TreeRss { bytes, processes })
}

/// The value of a memory `field` (`VmRSS:`, `VmHWM:`) of a `/proc/<pid>/status` text, in KiB.
fn parse_status_kib(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].split_whitespace().next()?.parse().ok()
}

/// The parent pid in a `/proc/<pid>/stat` line. The command name (field 2) may hold spaces and
/// parentheses, so fields are counted after its LAST `)`: state, then ppid.
fn parse_ppid(stat: &str) -> Option<u32> {
    stat_fields(stat)?.get(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_vm_rss_and_ppid() {
        let status = "Name:\tbun\nVmPeak:\t  900 kB\nVmHWM:\t  412000 kB\nVmRSS:\t  312340 kB\nThreads:\t12\n";
        assert_eq!(parse_status_kib(status, RSS), Some(312_340));
        assert_eq!(parse_status_kib(status, PEAK_RSS), Some(412_000));
        assert_eq!(parse_status_kib("Name:\tzombie\nState:\tZ\n", RSS), None);
        assert_eq!(parse_ppid("4242 (a) b) c) S 17 4242 4242 0"), Some(17));
        assert_eq!(parse_ppid("garbage"), None);
        assert_eq!(stat_fields("4242 (a) b) c) S 17 4243 4243 0").unwrap()[2], "4243", "the process group");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reads_a_live_tree_with_its_child() {
        let me = std::process::id();
        assert!(rss_bytes(me).unwrap() > 0);
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let found = descendants(me).unwrap();
        let tree = tree_rss(me).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(found.contains(&child.id()), "{found:?} lacks {}", child.id());
        assert!(tree.processes >= 2 && tree.bytes > 0, "{tree:?}");
        let held = rss_bytes(me).unwrap();
        assert!(tree_peak_rss(me).unwrap() >= held, "a peak is at least what was held before");
        assert!(rss_bytes(u32::MAX).is_err(), "no such process");
    }
}
