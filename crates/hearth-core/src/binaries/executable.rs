//! Finding an external program and asking it for its version, with every failure a typed error
//! whose message says what was found and what to do. Used for the runtime binary and ripgrep.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

/// How long a `--version` call may take. Bun start-up alone is ~2 s; under load much more.
pub const VERSION_PROBE_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes of a probe's stdout/stderr kept (the rest is discarded unread into the void).
pub const PROBE_OUTPUT_MAX_BYTES: usize = 64 * 1024;
/// Bytes of stderr quoted in an error message.
pub const STDERR_TAIL_BYTES: usize = 600;

/// Where a binary came from: shown to the user so they know which copy Hearth runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// An environment variable named the path.
    Environment,
    /// The user's settings named the path.
    Settings,
    /// Shipped inside the installed app's resources.
    Bundled,
    /// The pinned npm package under a `node_modules` folder (development checkout).
    NodeModules,
    /// Found on `PATH`.
    SystemPath,
}

impl Source {
    /// A user named this path explicitly: a problem with it must be shown, never silently bypassed.
    pub fn is_explicit(self) -> bool {
        matches!(self, Source::Environment | Source::Settings)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub path: PathBuf,
    pub source: Source,
}

impl Candidate {
    pub fn new(path: impl Into<PathBuf>, source: Source) -> Self {
        Self { path: path.into(), source }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProbeError {
    #[error("{path} does not exist")]
    Missing { path: PathBuf },
    #[error("{path} is not a file")]
    NotAFile { path: PathBuf },
    #[error("{path} is not executable (chmod +x it, or reinstall it)")]
    NotExecutable { path: PathBuf },
    #[error("{path} could not be started: {detail}")]
    Spawn { path: PathBuf, detail: String },
    #[error("{path} did not answer `--version` within {secs} s")]
    TimedOut { path: PathBuf, secs: u64 },
    #[error("{path} failed on `--version` ({status}){}", tail_suffix(.stderr_tail))]
    Failed { path: PathBuf, status: String, stderr_tail: String },
}

fn tail_suffix(tail: &str) -> String {
    if tail.is_empty() { String::new() } else { format!(": {tail}") }
}

/// The environment given to a probe: nothing of the user's but `PATH`, and a scratch home so the
/// program writes nothing into the user's own folders.
#[derive(Debug, Clone)]
pub struct ProbeEnv {
    pub scratch_home: PathBuf,
}

impl ProbeEnv {
    fn apply(&self, cmd: &mut tokio::process::Command) {
        cmd.env_clear();
        if let Some(path) = std::env::var_os("PATH") {
            cmd.env("PATH", path);
        }
        let h = &self.scratch_home;
        cmd.env("HOME", h)
            .env("TMPDIR", h.join("tmp"))
            .env("XDG_DATA_HOME", h.join("data"))
            .env("XDG_CONFIG_HOME", h.join("config"))
            .env("XDG_STATE_HOME", h.join("state"))
            .env("XDG_CACHE_HOME", h.join("cache"));
    }
}

/// Check that `path` is an executable file, without running it.
pub fn check_executable(path: &Path) -> Result<(), ProbeError> {
    let meta = std::fs::metadata(path).map_err(|_| ProbeError::Missing { path: path.into() })?;
    if !meta.is_file() {
        return Err(ProbeError::NotAFile { path: path.into() });
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o111 == 0 {
            return Err(ProbeError::NotExecutable { path: path.into() });
        }
    }
    Ok(())
}

/// Run `path --version` and return its trimmed stdout.
pub async fn probe_version(path: &Path, env: &ProbeEnv, timeout: Duration) -> Result<String, ProbeError> {
    check_executable(path)?;
    std::fs::create_dir_all(env.scratch_home.join("tmp")).map_err(|e| ProbeError::Spawn {
        path: path.into(),
        detail: format!("scratch folder {}: {e}", env.scratch_home.display()),
    })?;
    let mut cmd = tokio::process::Command::new(path);
    cmd.arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    env.apply(&mut cmd);
    let mut child = cmd
        .spawn()
        .map_err(|e| ProbeError::Spawn { path: path.into(), detail: e.to_string() })?;
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let run = async {
        let (out, err) = tokio::join!(read_bounded(&mut stdout), read_bounded(&mut stderr));
        let status = child.wait().await;
        (out, err, status)
    };
    let (out, err, status) = tokio::time::timeout(timeout, run)
        .await
        .map_err(|_| ProbeError::TimedOut { path: path.into(), secs: timeout.as_secs() })?;
    let status = status.map_err(|e| ProbeError::Spawn { path: path.into(), detail: e.to_string() })?;
    if !status.success() {
        return Err(ProbeError::Failed {
            path: path.into(),
            status: status.to_string(),
            stderr_tail: tail(&err, STDERR_TAIL_BYTES),
        });
    }
    Ok(String::from_utf8_lossy(&out).trim().to_string())
}

async fn read_bounded<R: tokio::io::AsyncRead + Unpin>(reader: &mut R) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = PROBE_OUTPUT_MAX_BYTES.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}

/// The last `max` bytes of `bytes` as text, on a character boundary, whitespace trimmed.
pub fn tail(bytes: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_string()
}

/// Every `PATH` entry joined with `name`, in order.
pub fn on_path(name: &str) -> Vec<PathBuf> {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join(name)).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    pub(crate) fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn env(dir: &Path) -> ProbeEnv {
        ProbeEnv { scratch_home: dir.join("scratch") }
    }

    #[tokio::test]
    async fn reads_version_and_gives_a_clean_environment() {
        let tmp = tempfile::tempdir().unwrap();
        std::env::set_var("HEARTH_TEST_SECRET_LEAK", "s3cret");
        let bin = script(tmp.path(), "tool", "echo \"1.2.3 home=$HOME secret=$HEARTH_TEST_SECRET_LEAK\"");
        let out = probe_version(&bin, &env(tmp.path()), VERSION_PROBE_TIMEOUT).await.unwrap();
        assert_eq!(out, format!("1.2.3 home={} secret=", tmp.path().join("scratch").display()));
    }

    #[tokio::test]
    async fn missing_file_not_a_file_and_not_executable_are_distinct() {
        let tmp = tempfile::tempdir().unwrap();
        let e = env(tmp.path());
        let missing = tmp.path().join("nope");
        assert_eq!(
            probe_version(&missing, &e, VERSION_PROBE_TIMEOUT).await,
            Err(ProbeError::Missing { path: missing.clone() })
        );
        assert!(matches!(
            probe_version(tmp.path(), &e, VERSION_PROBE_TIMEOUT).await,
            Err(ProbeError::NotAFile { .. })
        ));
        let plain = tmp.path().join("plain");
        std::fs::write(&plain, "data").unwrap();
        let err = probe_version(&plain, &e, VERSION_PROBE_TIMEOUT).await.unwrap_err();
        assert!(err.to_string().contains("is not executable"), "{err}");
    }

    #[tokio::test]
    async fn failure_quotes_the_stderr_tail() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = script(tmp.path(), "crashy", "echo 'boom: libfoo.so missing' >&2; exit 3");
        let err = probe_version(&bin, &env(tmp.path()), VERSION_PROBE_TIMEOUT).await.unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("libfoo.so missing") && msg.contains("exit status: 3"), "{msg}");
    }

    #[tokio::test]
    async fn a_hung_program_times_out_and_is_killed() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = script(tmp.path(), "hang", "exec sleep 30");
        let t0 = std::time::Instant::now();
        let err = probe_version(&bin, &env(tmp.path()), Duration::from_millis(300)).await.unwrap_err();
        assert!(matches!(err, ProbeError::TimedOut { .. }), "{err}");
        assert!(t0.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn a_corrupt_binary_is_a_spawn_error() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("corrupt");
        std::fs::write(&p, [0x7f, b'E', b'L', b'F', 0, 1, 2, 3]).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = probe_version(&p, &env(tmp.path()), VERSION_PROBE_TIMEOUT).await.unwrap_err();
        assert!(matches!(err, ProbeError::Spawn { .. }), "{err}");
    }

    #[test]
    fn tail_respects_char_boundaries() {
        assert_eq!(tail("ééé".as_bytes(), 3), "é");
        assert_eq!(tail(b"  abc \n", 10), "abc");
    }
}
