//! Launching `opencode serve` and stopping it.
//!
//! The process gets a private root (its own HOME, TMPDIR and XDG folders), a clean environment (only
//! what it needs: PATH with `rg` first, the offline switches, a random Basic-auth password), its own
//! process group and a parent-death signal, and is stopped with SIGTERM then SIGKILL of the group.
//! A watcher reaps it the moment it exits, so a death is known at once (see [`Server::exited`]).
//! It loads Hearth's guard plugin first (`guard.rs`), and no configuration or code of the project's.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncRead;

use crate::host::output_tail::OutputLines;
use tokio::process::Command;
use tokio::sync::watch;

/// How long the server may take to print its URL (3.5–5.5 s seen; up to 8 s under load).
pub const LISTEN_TIMEOUT: Duration = Duration::from_secs(45);
/// After a failed start, time for the output pumps to read what the process printed last.
const OUTPUT_DRAIN: Duration = Duration::from_millis(50);
pub const LISTEN_PREFIX: &str = "opencode server listening on ";

/// The runtime's Basic-auth credentials and its configuration text, by environment variable.
pub const PASSWORD_ENV: &str = "OPENCODE_SERVER_PASSWORD";
pub const USERNAME_ENV: &str = "OPENCODE_SERVER_USERNAME";
pub const CONFIG_ENV: &str = "OPENCODE_CONFIG_CONTENT";
/// Off: the project's `opencode.json` and `.opencode/` (plugins, tools, agents, commands) and its
/// instruction files; a project can come from anywhere, and its plugins would run inside the
/// runtime. The guard hands `AGENTS.md` back (see `guard.rs`).
pub const PROJECT_CONFIG_ENV: (&str, &str) = ("OPENCODE_DISABLE_PROJECT_CONFIG", "1");
/// Where under the root the runtime finds code besides its configuration's `plugin` list (its
/// global config folder and `~/.opencode`): emptied at every launch, since the agent's shell can
/// write there (the guard refuses such code once it is loaded).
pub const CODE_FOLDERS: &[&str] = &["config", "home/.opencode"];
/// Where under the root the guard plugin is written.
pub const GUARD_DIR: &str = "guard";

/// Environment switches that keep the runtime offline and quiet; each was checked against the pinned
/// version with no outside connection.
pub const OFFLINE_ENV: &[(&str, &str)] = &[
    ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
    ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
    ("OPENCODE_DISABLE_SHARE", "1"),
    ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1"),
    ("OPENCODE_DISABLE_CLAUDE_CODE", "1"),
    ("OPENCODE_DISABLE_EXTERNAL_SKILLS", "1"),
    // The runtime npm-installs its plugin package into every config folder it sees; an unreachable
    // registry makes that fail at once instead of downloading 64 MB.
    ("npm_config_registry", "http://127.0.0.1:9/"),
];

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("The runtime's private folder {path} could not be prepared: {source}")]
    Root { path: PathBuf, source: std::io::Error },
    #[error("The runtime {binary} could not be started: {source}")]
    Spawn { binary: PathBuf, source: std::io::Error },
    #[error("The runtime exited at start ({status}). Its last output: {tail}")]
    Exited { status: String, tail: String },
    #[error("The runtime did not report a listening address within {secs} s. Its last output: {tail}")]
    NoUrl { secs: u64, tail: String },
    /// A runtime on another host could not be reached, staged or started there.
    #[error(transparent)]
    Remote(#[from] crate::remote::RemoteError),
}

/// What to launch.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    pub binary: PathBuf,
    pub rg_dir: Option<PathBuf>,
    /// Private root: the runtime's HOME, data and config live below it.
    pub root: PathBuf,
    /// `OPENCODE_CONFIG_CONTENT` (launch adds the `plugin` list).
    pub config: serde_json::Value,
    /// Written into the private root at each launch, after the guard.
    pub plugins: Vec<super::config::PluginSource>,
    /// Files to write (0600) before launch: API keys referenced by `{file:…}` in the config.
    pub secret_files: Vec<(PathBuf, String)>,
    pub listen_timeout: Duration,
    /// Where the process is recorded for the start-up sweep (`records`), if anywhere.
    pub records_dir: Option<PathBuf>,
}

pub use crate::host::output_tail::OutputTail;

/// What stops a runtime that runs elsewhere (on another host, behind its keeper).
#[async_trait::async_trait]
pub trait Stopper: Send + Sync {
    async fn stop(&self);
}

/// Where a running server is, beyond its address.
pub enum Owner {
    /// A child of Hearth, recorded for the start-up sweep in `records_dir`.
    Local { records_dir: Option<PathBuf> },
    /// On another host: its pid is the host's, and `stopper` stops it there.
    Remote(RemoteServer),
}

/// What Hearth knows of a runtime on another host.
#[derive(Clone)]
pub struct RemoteServer {
    pub host: String,
    /// The local ssh process that carries its connections (the gateway serves it for the runtime).
    pub link_pid: u32,
    /// The keeper's last report of the runtime's memory: (bytes, processes).
    pub stats: Arc<std::sync::Mutex<Option<(u64, u32)>>>,
    pub stopper: Arc<dyn Stopper>,
}

/// A running `opencode serve`.
pub struct Server {
    /// The runtime's pid (on its host, for a remote one).
    pub pid: u32,
    /// `http://127.0.0.1:PORT` — carries no credentials (a local forward, for a remote one).
    pub base_url: String,
    pub password: String,
    pub started: Instant,
    pub tail: Arc<OutputTail>,
    pub owner: Owner,
    /// How the process ended, once it has (set by the watcher that reaps it).
    exit: watch::Receiver<Option<String>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("pid", &self.pid).field("base_url", &self.base_url).finish_non_exhaustive()
    }
}

pub const USERNAME: &str = "opencode";

impl Server {
    /// How the process ended, if it has.
    pub fn exited(&self) -> Option<String> {
        self.exit.borrow().clone()
    }

    /// Resolves when the process has exited, with how it ended.
    pub async fn wait_exit(&self) -> String {
        crate::host::child::exit_of(&self.exit).await
    }

    /// A server Hearth knows of through `exit` (a runtime on another host, told by its keeper).
    pub fn remote(pid: u32, base_url: String, password: String, tail: Arc<OutputTail>, remote: RemoteServer, exit: watch::Receiver<Option<String>>) -> Self {
        Self { pid, base_url, password, started: Instant::now(), tail, owner: Owner::Remote(remote), exit }
    }

    pub fn remote_info(&self) -> Option<&RemoteServer> {
        match &self.owner {
            Owner::Remote(r) => Some(r),
            Owner::Local { .. } => None,
        }
    }

    /// SIGTERM the whole group, then SIGKILL it (see [`crate::host::child::stop_group`]). Leaves no
    /// process behind, and forgets the process's record. A remote runtime is stopped by its keeper.
    pub async fn stop(&self) {
        match &self.owner {
            Owner::Local { records_dir } => {
                crate::host::child::stop_group(self.pid, async {
                    self.wait_exit().await;
                })
                .await;
                if let Some(dir) = records_dir {
                    crate::host::records::remove(dir, self.pid);
                }
            }
            Owner::Remote(remote) => remote.stopper.stop().await,
        }
    }
}

/// Create the private root, write the guard and the secret files; the configuration to launch with
/// (the guard first among its plugins).
fn prepare_root(spec: &LaunchSpec) -> Result<serde_json::Value, LaunchError> {
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| LaunchError::Root { path, source }
    };
    for sub in CODE_FOLDERS {
        let dir = spec.root.join(sub);
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                return Err(err(&dir)(e));
            }
        }
    }
    for sub in ["home", "tmp", "data", "config", "state", "cache", "secrets"] {
        let dir = spec.root.join(sub);
        std::fs::create_dir_all(&dir).map_err(err(&dir))?;
    }
    let mut config = spec.config.clone();
    let guard_dir = spec.root.join(GUARD_DIR);
    super::guard::install(&mut config, &guard_dir, &spec.plugins).map_err(err(&guard_dir))?;
    // With any plugin configured (the guard is one) the runtime first npm-installs its plugin
    // package into the config folder and, offline, waits ~70 s per new project for that to fail;
    // a pre-seeded folder skips it.
    let dir = spec.root.join("config").join("opencode");
    crate::toolbox::gateway::preseed_plugin_dependencies(&dir).map_err(err(&dir))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        std::fs::set_permissions(&spec.root, std::fs::Permissions::from_mode(0o700)).map_err(err(&spec.root))?;
        for (path, content) in &spec.secret_files {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(path)
                .map_err(err(path))?;
            std::io::Write::write_all(&mut f, content.as_bytes()).map_err(err(path))?;
        }
    }
    Ok(config)
}

fn build_command(spec: &LaunchSpec, config: &serde_json::Value, password: &str) -> Command {
    let mut cmd = Command::new(&spec.binary);
    cmd.args(["serve", "--hostname", "127.0.0.1", "--port", "0"])
        .current_dir(&spec.root)
        .env_clear()
        .envs(environment(spec, config, password))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    crate::host::child::contain(&mut cmd);
    cmd
}

/// The runtime's whole environment (it starts from an empty one): PATH with `rg` first, the
/// private root's folders, the API password, the configuration and the offline switches.
fn environment(spec: &LaunchSpec, config: &serde_json::Value, password: &str) -> Vec<(String, String)> {
    let mut env = Vec::new();
    let mut path = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).collect::<Vec<_>>();
    if let Some(rg) = &spec.rg_dir {
        path.insert(0, rg.clone());
    }
    if let Ok(joined) = std::env::join_paths(path) {
        env.push(("PATH".to_string(), joined.to_string_lossy().into_owned()));
    }
    let r = &spec.root;
    for (var, sub) in [("HOME", "home"), ("TMPDIR", "tmp"), ("XDG_DATA_HOME", "data"), ("XDG_CONFIG_HOME", "config"), ("XDG_STATE_HOME", "state"), ("XDG_CACHE_HOME", "cache")] {
        env.push((var.to_string(), r.join(sub).display().to_string()));
    }
    env.push((PASSWORD_ENV.to_string(), password.to_string()));
    env.push((USERNAME_ENV.to_string(), USERNAME.to_string()));
    env.push((CONFIG_ENV.to_string(), config.to_string()));
    for (k, v) in OFFLINE_ENV.iter().chain([&PROJECT_CONFIG_ENV]) {
        env.push((k.to_string(), v.to_string()));
    }
    env
}

/// A command's arguments and environment.
pub type ArgsAndEnv = (Vec<String>, Vec<(String, String)>);

/// The arguments and environment of `opencode acp` for `config`, with `root` prepared as for the
/// server (guard first among the plugins, code folders emptied, keys in 0600 files). Its internal
/// HTTP server gets a password nobody is told, so the agent's shell cannot use it either.
pub fn prepare_acp(config: &super::config::RuntimeConfig, root: &Path) -> Result<ArgsAndEnv, LaunchError> {
    let secrets = root.join("secrets");
    let secret_files = config
        .profiles
        .iter()
        .filter_map(|p| match &p.authentication {
            super::config::Authentication::ApiKey(k) => Some((super::config::RuntimeConfig::key_file(&secrets, p), k.clone())),
            super::config::Authentication::None => None,
        })
        .collect();
    let spec = LaunchSpec {
        binary: config.binary.clone(),
        rg_dir: config.rg_dir.clone(),
        root: root.to_path_buf(),
        config: config.to_opencode_json(&secrets),
        plugins: config.plugins.clone(),
        secret_files,
        listen_timeout: LISTEN_TIMEOUT,
        records_dir: None,
    };
    let config = prepare_root(&spec)?;
    Ok((vec!["acp".to_string()], environment(&spec, &config, &random_password())))
}

fn random_password() -> String {
    format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

/// Launch the server and wait for its listening address.
pub async fn launch(spec: &LaunchSpec) -> Result<Server, LaunchError> {
    let config = prepare_root(spec)?;
    let password = random_password();
    let mut child = crate::host::child::spawn(build_command(spec, &config, &password))
        .await
        .map_err(|source| LaunchError::Spawn { binary: spec.binary.clone(), source })?;
    let pid = child.id().unwrap_or_default();
    if let Some(dir) = &spec.records_dir {
        if let Err(e) = crate::host::records::write(dir, pid, &spec.binary) {
            tracing::warn!(error = %e, "could not record the runtime process for the start-up sweep");
        }
    }
    let tail = Arc::new(OutputTail::default());
    let (url_tx, url_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(pump(child.stdout.take().expect("piped"), tail.clone(), Some(url_tx)));
    tokio::spawn(pump(child.stderr.take().expect("piped"), tail.clone(), None));
    let (exit_tx, exit) = watch::channel(None);
    tokio::spawn(async move {
        let status = child.wait().await.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
        tracing::info!(pid, %status, "runtime process exited");
        exit_tx.send_replace(Some(status));
    });
    tracing::info!(pid, binary = %spec.binary.display(), "runtime starting");
    let server = Server {
        pid,
        base_url: String::new(),
        password,
        started: Instant::now(),
        tail,
        owner: Owner::Local { records_dir: spec.records_dir.clone() },
        exit,
    };
    let outcome = tokio::select! {
        url = tokio::time::timeout(spec.listen_timeout, url_rx) => match url {
            Ok(Ok(url)) => Ok(url),
            Ok(Err(_)) => Err(None), // stdout closed without a URL: the process is exiting
            Err(_) => Err(Some(LaunchError::NoUrl { secs: spec.listen_timeout.as_secs(), tail: String::new() })),
        },
        status = server.wait_exit() => Err(Some(LaunchError::Exited { status, tail: String::new() })),
    };
    match outcome {
        Ok(base_url) => {
            tracing::info!(pid, %base_url, "runtime listening");
            Ok(Server { base_url, ..server })
        }
        Err(err) => {
            server.stop().await;
            // Let the pumps drain what the process printed last.
            tokio::time::sleep(OUTPUT_DRAIN).await;
            let tail = server.tail.text();
            Err(match err {
                Some(LaunchError::NoUrl { secs, .. }) => LaunchError::NoUrl { secs, tail },
                Some(LaunchError::Exited { status, .. }) => LaunchError::Exited { status, tail },
                _ => LaunchError::Exited { status: "output closed".into(), tail },
            })
        }
    }
}

/// Read output lines into the tail; hand the first listening URL to `url_tx`.
async fn pump(stream: impl AsyncRead + Unpin, tail: Arc<OutputTail>, mut url_tx: Option<tokio::sync::oneshot::Sender<String>>) {
    let mut lines = OutputLines::new(stream);
    while let Some(line) = lines.next_line().await {
        let text = line.as_str();
        if let Some(url) = text.strip_prefix(LISTEN_PREFIX) {
            if let Some(tx) = url_tx.take() {
                let _ = tx.send(url.trim().trim_end_matches('/').to_string());
                continue;
            }
        }
        // What the guard refused or could not do, in Hearth's log (it names paths, never secrets).
        if text.starts_with(super::guard::GUARD_LOG_PREFIX) {
            tracing::warn!(line = %text, "runtime guard");
        }
        tail.push_line(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, body: &str) -> PathBuf {
        let p = dir.join("fake-opencode");
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn spec(dir: &Path, binary: PathBuf, timeout: Duration) -> LaunchSpec {
        LaunchSpec {
            binary,
            rg_dir: None,
            root: dir.join("root"),
            config: serde_json::json!({"a": 1}),
            plugins: vec![],
            secret_files: vec![(dir.join("root/secrets/k.key"), "sk-1".into())],
            listen_timeout: timeout,
            records_dir: Some(dir.join("records")),
        }
    }

    use crate::host::procinfo::is_running as alive;

    #[tokio::test]
    async fn parses_the_url_and_gives_a_clean_private_environment() {
        let tmp = tempfile::tempdir().unwrap();
        std::env::set_var("HEARTH_LAUNCH_TEST_LEAK", "secret");
        let bin = script(
            tmp.path(),
            "echo \"env: HOME=$HOME CFG=$OPENCODE_CONFIG_CONTENT LEAK=$HEARTH_LAUNCH_TEST_LEAK REG=$npm_config_registry NOPROJ=$OPENCODE_DISABLE_PROJECT_CONFIG\" >&2\n\
             echo 'opencode server listening on http://127.0.0.1:4567'\nexec sleep 60",
        );
        // Code the agent's shell could have planted where the runtime looks for plugins.
        let planted = [tmp.path().join("root/config/opencode/plugin/x.js"), tmp.path().join("root/home/.opencode/plugin/x.js")];
        for p in &planted {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "evil").unwrap();
        }
        let server = launch(&spec(tmp.path(), bin, Duration::from_secs(10))).await.unwrap();
        assert_eq!(server.base_url, "http://127.0.0.1:4567");
        assert!(planted.iter().all(|p| !p.exists()), "planted plugins are removed at launch");
        assert!(server.password.len() >= 32);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let tail = server.tail.text();
        let home = tmp.path().join("root/home");
        assert!(tail.contains(&format!("HOME={}", home.display())), "{tail}");
        let guard = tmp.path().join("root/guard").join(crate::opencode::guard::GUARD_FILE_NAME);
        assert!(tail.contains(&format!("CFG={{\"a\":1,\"plugin\":[\"file://{}\"]}}", guard.display())), "the guard is the first plugin: {tail}");
        assert!(tail.contains("LEAK= ") && tail.contains("REG=http://127.0.0.1:9/") && tail.contains("NOPROJ=1"), "{tail}");
        assert!(guard.is_file() && tmp.path().join("root/config/opencode/package-lock.json").is_file());
        let key = tmp.path().join("root/secrets/k.key");
        assert_eq!(std::fs::read_to_string(&key).unwrap(), "sk-1");
        assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
        let pid = server.pid;
        assert!(alive(pid));
        let record = tmp.path().join(format!("records/runtime-{pid}.json"));
        assert!(record.exists(), "running runtime is recorded for the start-up sweep");
        server.stop().await;
        assert!(!alive(pid));
        assert!(!record.exists(), "a cleanly stopped runtime is forgotten");
    }

    #[tokio::test]
    async fn a_crash_at_start_quotes_the_output_tail() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = script(tmp.path(), "echo 'fatal: database is locked' >&2; exit 7");
        let err = launch(&spec(tmp.path(), bin, Duration::from_secs(10))).await.unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("exited at start") && msg.contains("database is locked"), "{msg}");
    }

    #[tokio::test]
    async fn no_url_times_out_and_leaves_nothing_running() {
        let tmp = tempfile::tempdir().unwrap();
        let pidfile = tmp.path().join("pid");
        let bin = script(tmp.path(), &format!("echo $$ > {}; echo 'still booting'; exec sleep 60", pidfile.display()));
        let err = launch(&spec(tmp.path(), bin, Duration::from_millis(700))).await.unwrap_err();
        assert!(matches!(&err, LaunchError::NoUrl { tail, .. } if tail.contains("still booting")), "{err}");
        let pid: u32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        assert!(!alive(pid), "timed-out runtime left running");
    }

    #[tokio::test]
    async fn stop_escalates_to_sigkill_and_reaches_the_whole_group() {
        let tmp = tempfile::tempdir().unwrap();
        let grandchild = tmp.path().join("gc");
        // Ignores SIGTERM, and has a child of its own in the same group.
        let bin = script(
            tmp.path(),
            &format!(
                "trap '' TERM\n(trap '' TERM; exec sleep 60) & echo $! > {}\n\
                 echo 'opencode server listening on http://127.0.0.1:1'\nwhile true; do sleep 1; done",
                grandchild.display()
            ),
        );
        let server = launch(&spec(tmp.path(), bin, Duration::from_secs(10))).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let gc: u32 = std::fs::read_to_string(&grandchild).unwrap().trim().parse().unwrap();
        let t0 = Instant::now();
        server.stop().await;
        assert!(t0.elapsed() >= crate::host::child::STOP_GRACE - Duration::from_millis(100));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!alive(server.pid) && !alive(gc), "group not killed");
    }
}
