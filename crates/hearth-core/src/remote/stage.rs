//! Staging the pinned runtime on a host: once per version and architecture, in a folder under the
//! remote user's cache (`~/.cache/hearth/runtime/<version>-<os>-<arch>/`), each file checked by its
//! SHA-256 and sent only when it differs. A host of another architecture or OS than the runtime
//! Hearth carries is refused with a sentence; so is one without room for it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::ssh::{shell_quote, Link, SshError};

/// Below the remote home: where staged runtimes live.
pub const STAGE_DIR: &str = ".cache/hearth/runtime";
/// Sending the 180 MB runtime over a slow link takes a while.
pub const UPLOAD_TIMEOUT: Duration = Duration::from_secs(20 * 60);
/// Room left free after staging, beyond the files themselves.
pub const SPARE_BYTES: u64 = 64 * 1024 * 1024;

/// What a host is, as one probe command tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFacts {
    pub os: String,
    pub arch: String,
    pub home: String,
    /// `rg` on the host's PATH, if it has one.
    pub rg: Option<String>,
    /// Free bytes where the runtime is staged.
    pub free_bytes: Option<u64>,
}

/// Where a staged runtime is on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staged {
    pub dir: String,
    pub opencode: String,
    /// The folder with `rg` to put first on the runtime's PATH.
    pub rg_dir: Option<String>,
    /// Bytes sent to stage it this time (0 when it was there already).
    pub sent_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StageError {
    #[error(transparent)]
    Ssh(#[from] SshError),
    #[error("{host} runs {os} on {arch}, but the runtime Hearth carries is for Linux on {local}; Hearth cannot run projects there yet.")]
    Unsupported { host: String, os: String, arch: String, local: &'static str },
    #[error("{host} has no room to stage the runtime: {needed_mib} MiB are needed in ~/{STAGE_DIR} and {free_mib} MiB are free. Free some space there and try again.")]
    NoRoom { host: String, needed_mib: u64, free_mib: u64 },
    #[error("Hearth could not read its own copy of {file}: {detail}")]
    Local { file: String, detail: String },
    #[error("{host} did not say what it is (its answer was {answer:?}).")]
    Unexpected { host: String, answer: String },
}

/// The architecture `uname -m` prints on a machine like this one.
pub fn local_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "x86_64",
        "aarch64" => "aarch64",
        other => other,
    }
}

/// Ask the host what it is (one round trip).
pub async fn probe(link: &Link) -> Result<HostFacts, StageError> {
    let script = format!(
        r#"uname -s; uname -m; printf '%s\n' "$HOME"; command -v rg || echo; mkdir -p "$HOME/{STAGE_DIR}" && df -Pk "$HOME/{STAGE_DIR}" | tail -n 1"#
    );
    let out = link.run("a look at the host", &format!("sh -c {}", shell_quote(&script)), None, super::ssh::COMMAND_TIMEOUT).await?;
    parse_facts(link.host(), &out.text())
}

fn parse_facts(host: &str, answer: &str) -> Result<HostFacts, StageError> {
    let lines: Vec<&str> = answer.lines().collect();
    let unexpected = || StageError::Unexpected { host: host.into(), answer: answer.chars().take(300).collect() };
    if lines.len() < 4 {
        return Err(unexpected());
    }
    let free_bytes = lines.get(4).copied().and_then(free_kib);
    let rg = Some(lines[3].trim()).filter(|r| r.starts_with('/')).map(str::to_owned);
    Ok(HostFacts { os: lines[0].trim().into(), arch: lines[1].trim().into(), home: lines[2].trim().into(), rg, free_bytes })
}

/// Separates the hash check's answer from the free-space line after it.
const FREE_MARK: &str = "--hearth-free--";

/// The free bytes in a `df -Pk` line (its fourth column, in KiB).
fn free_kib(df_line: &str) -> Option<u64> {
    df_line.split_whitespace().nth(3).and_then(|k| k.parse::<u64>().ok()).map(|k| k * 1024)
}

/// SHA-256 of a local file, hex.
pub fn sha256_file(path: &Path) -> Result<String, StageError> {
    let local = |e: std::io::Error| StageError::Local { file: path.display().to_string(), detail: e.to_string() };
    let mut file = std::fs::File::open(path).map_err(local)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).map_err(local)?;
    Ok(format!("{:x}", hasher.finalize()))
}

/// A local file to have on the host, by the name it gets there.
pub struct Payload<'a> {
    pub name: &'a str,
    pub local: &'a Path,
    pub sha256: String,
}

/// Make sure `version`'s runtime (and `rg`, when the host has none) is staged on the host.
pub async fn stage(link: &Link, facts: &HostFacts, version: &str, opencode: &Path, rg: Option<&Path>) -> Result<Staged, StageError> {
    if facts.os != "Linux" || facts.arch != local_arch() {
        return Err(StageError::Unsupported { host: link.host().into(), os: facts.os.clone(), arch: facts.arch.clone(), local: local_arch() });
    }
    let dir = format!("{}/{STAGE_DIR}/{version}-linux-{}", facts.home, facts.arch);
    let mut payloads = vec![Payload { name: "opencode", local: opencode, sha256: sha256_file(opencode)? }];
    let rg_on_host = facts.rg.as_deref().and_then(|p| p.rsplit_once('/')).map(|(d, _)| d.to_string());
    if rg_on_host.is_none() {
        if let Some(rg) = rg {
            payloads.push(Payload { name: "rg", local: rg, sha256: sha256_file(rg)? });
        }
    }
    // What the host already has, by hash.
    let names: Vec<String> = payloads.iter().map(|p| shell_quote(&format!("{dir}/{}", p.name))).collect();
    // Free space is measured now, not at connect: the user may have made room since a refusal.
    let check = format!(r#"sha256sum {} 2>/dev/null; echo {FREE_MARK}; mkdir -p "$HOME/{STAGE_DIR}" && df -Pk "$HOME/{STAGE_DIR}" | tail -n 1"#, names.join(" "));
    let answer = link.run("a check of the staged runtime", &format!("sh -c {}", shell_quote(&check)), None, super::ssh::COMMAND_TIMEOUT).await?.text();
    let (have, free_line) = answer.split_once(FREE_MARK).unwrap_or((answer.as_str(), ""));
    let free_bytes = free_kib(free_line.trim()).or(facts.free_bytes);
    let missing: Vec<&Payload> = payloads.iter().filter(|p| !have.lines().any(|l| l.starts_with(&p.sha256) && l.trim_end().ends_with(&format!("/{}", p.name)))).collect();
    let needed: u64 = missing.iter().map(|p| std::fs::metadata(p.local).map(|m| m.len()).unwrap_or(0)).sum();
    if let Some(free) = free_bytes.filter(|f| needed > 0 && *f < needed + SPARE_BYTES) {
        return Err(no_room(link.host(), needed, free));
    }
    for p in &missing {
        let target = shell_quote(&format!("{dir}/{}", p.name));
        let partial = shell_quote(&format!("{dir}/.{}.partial", p.name));
        let script = format!("mkdir -p {} && cat > {partial} && chmod 0755 {partial} && mv -f {partial} {target}", shell_quote(&dir));
        tracing::info!(host = link.host(), file = p.name, "staging on the host");
        if let Err(e) = link.run_with_file(&format!("sending {}", p.name), &format!("sh -c {}", shell_quote(&script)), p.local, UPLOAD_TIMEOUT).await {
            let _ = link.run("a clean-up", &format!("rm -f {partial}"), None, super::ssh::COMMAND_TIMEOUT).await;
            return Err(match e {
                SshError::Remote { ref stderr, .. } if stderr.contains("No space left") => no_room(link.host(), needed, free_bytes.unwrap_or(0)),
                other => other.into(),
            });
        }
    }
    let rg_dir = rg_on_host.or_else(|| payloads.iter().any(|p| p.name == "rg").then(|| dir.clone()));
    Ok(Staged { opencode: format!("{dir}/opencode"), dir, rg_dir, sent_bytes: needed })
}

fn no_room(host: &str, needed: u64, free: u64) -> StageError {
    let mib = |b: u64| b.div_ceil(1024 * 1024);
    StageError::NoRoom { host: host.into(), needed_mib: mib(needed + SPARE_BYTES), free_mib: free / (1024 * 1024) }
}

/// The local `rg` to stage when the host has none: the one the runtime uses here.
pub fn local_rg(rg_dir: Option<&Path>) -> Option<PathBuf> {
    rg_dir.map(|d| d.join("rg")).filter(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_answer_reads_as_facts() {
        let answer = "Linux\nx86_64\n/home/u\n/usr/bin/rg\n/dev/vda 263174212 11000000 80000000 13% /\n";
        let f = parse_facts("h", answer).unwrap();
        assert_eq!((f.os.as_str(), f.arch.as_str(), f.home.as_str(), f.rg.as_deref()), ("Linux", "x86_64", "/home/u", Some("/usr/bin/rg")));
        assert_eq!(f.free_bytes, Some(80_000_000 * 1024));
        let no_rg = parse_facts("h", "Linux\naarch64\n/root\n\n/dev/x 1 1 2048 1% /\n").unwrap();
        assert_eq!((no_rg.rg, no_rg.free_bytes), (None, Some(2048 * 1024)));
        assert!(matches!(parse_facts("h", "nonsense"), Err(StageError::Unexpected { .. })));
    }

    #[test]
    fn refusals_say_what_and_where() {
        let e = StageError::Unsupported { host: "pi".into(), os: "Linux".into(), arch: "armv7l".into(), local: "x86_64" };
        assert!(e.to_string().contains("pi runs Linux on armv7l"), "{e}");
        let e = no_room("box", 180 * 1024 * 1024, 10 * 1024 * 1024);
        assert!(e.to_string().contains("box has no room") && e.to_string().contains("244 MiB are needed"), "{e}");
    }
}
