//! A runtime's start on a host: the same `opencode serve` with the same guard and private root as
//! here, behind the same [`Server`] the local launch gives, so everything above it (the client,
//! the event stream, sessions, runs) is the code a local runtime runs.
//!
//! What differs is where things are: the runtime is staged on the host (`stage.rs`); its private
//! root is a folder under the remote user's cache, filled from a copy prepared here (the guard,
//! Hearth's plugins, the secret files: the gateway's secret and the link's model token, never an
//! API key); it reaches the gateway and the model proxy through the link's reverse forwards, whose
//! ports it finds in its environment; its gateway stamp key comes with its other secrets on the
//! keeper's stdin; Hearth reaches its API through a local forward; and the keeper
//! (`supervisor.rs`) stops it when the link drops.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::ssh::{shell_quote, SshError};
use super::supervisor::{self, SupervisorLine};
use super::{Remote, RemoteError, GATEWAY_PORT_ENV, MODEL_PORT_ENV};
use crate::host::output_tail::OutputTail;
use crate::opencode::config::RuntimeConfig;
use crate::opencode::launch::{self, LaunchError, LaunchSpec, RemoteServer, Server, Stopper};
use crate::toolbox::gateway::{GATEWAY_MCP_NAME, PLUGIN_FILE_NAME};

/// Below the remote home: where runtimes keep their private roots (their sessions live there, so
/// a conversation continues after a reconnect).
pub const DATA_DIR: &str = ".cache/hearth/data";
/// How long the keeper gets to stop the runtime after its stdin closes.
pub const STOP_WAIT: Duration = Duration::from_secs(10);
/// The files of the root's secrets folder.
const GATEWAY_SECRET_FILE: &str = "gateway.secret";
const MODEL_TOKEN_FILE: &str = "model.token";

/// Where a runtime runs when it is not here: a host, over the links `remote` keeps.
#[derive(Clone)]
pub struct RemotePlace {
    pub host: String,
    pub remote: Arc<Remote>,
}

impl std::fmt::Debug for RemotePlace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemotePlace").field("host", &self.host).finish_non_exhaustive()
    }
}

/// The private root on the host for the local root `local_root` (one per Hearth data folder).
fn remote_root(home: &str, local_root: &Path, host: &str) -> String {
    use sha2::{Digest, Sha256};
    let id = Sha256::digest(format!("{}\n{host}", local_root.display()));
    format!("{home}/{DATA_DIR}/{}", &format!("{id:x}")[..16])
}

/// The configuration as the runtime on the host must see it: providers through the model proxy,
/// the gateway through the link, no local MCP server or skill folder (those are this machine's).
fn remote_config(local: &Value, remote: &Remote, root: &str) -> Value {
    let mut config = local.clone();
    let token = format!("{root}/secrets/{MODEL_TOKEN_FILE}");
    if let Some(providers) = config.get_mut("provider").and_then(Value::as_object_mut) {
        for (id, provider) in providers.iter_mut() {
            provider["options"] = super::model_proxy::remote_provider_options(id, MODEL_PORT_ENV, &token);
        }
    }
    let had_gateway = config.get("mcp").and_then(|m| m.get(GATEWAY_MCP_NAME)).is_some();
    if let Some(obj) = config.as_object_mut() {
        obj.remove("mcp");
        obj.remove("skills");
        if had_gateway {
            obj.insert("mcp".into(), json!({ GATEWAY_MCP_NAME: remote.gateway().remote_mcp_entry(GATEWAY_PORT_ENV, &format!("{root}/secrets/{GATEWAY_SECRET_FILE}")) }));
        }
    }
    config
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> LaunchError + '_ {
    move |source| LaunchError::Root { path: path.to_path_buf(), source }
}

/// Prepare the root's files here, in `mirror`, named as they will be at `root` on the host; the
/// configuration to start with.
fn prepare_mirror(mirror: &Path, root: &str, spec: &LaunchSpec, remote: &Remote, model_token: &str) -> Result<Value, LaunchError> {
    let mut config = remote_config(&spec.config, remote, root);
    // Hearth's gateway plugin in its remote form (its stamp key comes from the guard); the others
    // as they are.
    let plugins: Vec<_> = spec.plugins.iter().map(|p| if p.file_name == PLUGIN_FILE_NAME { remote.gateway().remote_plugin() } else { p.clone() }).collect();
    let guard_dir = mirror.join(launch::GUARD_DIR);
    crate::opencode::guard::install_into(&mut config, &guard_dir, &PathBuf::from(root).join(launch::GUARD_DIR), &plugins).map_err(io(&guard_dir))?;
    let deps = mirror.join("config").join("opencode");
    crate::toolbox::gateway::preseed_plugin_dependencies(&deps).map_err(io(&deps))?;
    let secrets = mirror.join("secrets");
    std::fs::create_dir_all(&secrets).map_err(io(&secrets))?;
    for (name, value) in [(GATEWAY_SECRET_FILE, remote.gateway().secret()), (MODEL_TOKEN_FILE, model_token)] {
        let path = secrets.join(name);
        crate::toolbox::gateway::write_private(&path, value.as_bytes()).map_err(io(&path))?;
    }
    Ok(config)
}

/// The keeper's end of things: stopping it, and knowing it stopped.
struct Keeper {
    stop: CancellationToken,
    exit: watch::Receiver<Option<String>>,
}

#[async_trait::async_trait]
impl Stopper for Keeper {
    /// Close the keeper's stdin: it stops the runtime's whole group on the host and exits.
    async fn stop(&self) {
        self.stop.cancel();
        let mut exit = self.exit.clone();
        let _ = tokio::time::timeout(STOP_WAIT, exit.wait_for(Option::is_some)).await;
    }
}

/// Start the runtime of `spec` on `place`'s host.
pub async fn launch(place: &RemotePlace, spec: &LaunchSpec, config: &RuntimeConfig) -> Result<Server, LaunchError> {
    let remote_err = LaunchError::Remote;
    let failed = |detail: String| LaunchError::Remote(RemoteError::Launch { host: place.host.clone(), detail });
    let c = place.remote.connect(&place.host).await.map_err(remote_err)?;
    let rg = super::stage::local_rg(spec.rg_dir.as_deref());
    let staged = c.staged(crate::opencode::PINNED_VERSION, &spec.binary, rg.as_deref()).await.map_err(|e| remote_err(e.into()))?.clone();
    place.remote.proxy().serve_profiles(config);
    let root = remote_root(&c.facts.home, &spec.root, &place.host);

    // The root's files, prepared here and sent as one archive.
    let mirror = tempfile::tempdir().map_err(io(Path::new("a temporary folder")))?;
    let config_json = prepare_mirror(mirror.path(), &root, spec, &place.remote, &c.model_token)?;
    let archive = mirror.path().with_extension("tar");
    let tar = std::process::Command::new("tar").arg("-C").arg(mirror.path()).args(["-cf"]).arg(&archive).arg(".").output();
    if !matches!(&tar, Ok(o) if o.status.success()) {
        return Err(failed(format!("Hearth could not pack the runtime's files: {tar:?}")));
    }
    let code_folders: Vec<String> = launch::CODE_FOLDERS.iter().chain([&launch::GUARD_DIR, &"secrets"]).map(|d| shell_quote(&format!("{root}/{d}"))).collect();
    let unpack = format!("rm -rf {folders} && mkdir -p {r} && chmod 700 {r} && tar -C {r} -xf -", folders = code_folders.join(" "), r = shell_quote(&root));
    let sent = c.link.run_with_file("sending the runtime's files", &format!("sh -c {}", shell_quote(&unpack)), &archive, super::ssh::COMMAND_TIMEOUT).await;
    let _ = std::fs::remove_file(&archive);
    sent.map_err(|e| remote_err(e.into()))?;

    // The keeper, and what it says.
    let offline: Vec<(&str, &str)> = launch::OFFLINE_ENV.iter().copied().chain([launch::PROJECT_CONFIG_ENV]).collect();
    let command = format!(
        "bash -c {} hearth-keeper {} {} {} {} {}",
        shell_quote(&supervisor::script(&offline)),
        shell_quote(&root),
        shell_quote(&staged.opencode),
        shell_quote(staged.rg_dir.as_deref().unwrap_or("")),
        c.gateway_port,
        c.model_port
    );
    let mut cmd = c.link.command(&command);
    crate::host::child::contain(&mut cmd);
    let mut child = crate::host::child::spawn(cmd).await.map_err(|e| remote_err(SshError::Local { host: place.host.clone(), detail: e.to_string() }.into()))?;
    let mut stdin = child.stdin.take().expect("piped");
    let password = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
    let secrets = format!("{password}\n{}\n{}\n", c.stamp_key, config_json);
    stdin.write_all(secrets.as_bytes()).await.map_err(|e| failed(format!("its keeper took no input: {e}")))?;
    let stop = CancellationToken::new();
    let until = stop.clone();
    tokio::spawn(async move {
        // The heartbeat: its absence is how the keeper knows Hearth is gone (with the link).
        loop {
            tokio::select! {
                _ = until.cancelled() => break,
                _ = tokio::time::sleep(supervisor::HEARTBEAT) => {
                    if stdin.write_all(b".\n").await.is_err() {
                        break;
                    }
                }
            }
        }
    });

    let tail = Arc::new(OutputTail::default());
    let stats: Arc<Mutex<Option<(u64, u32)>>> = Arc::default();
    let (exit_tx, exit) = watch::channel(None);
    let (pid_tx, pid_rx) = tokio::sync::oneshot::channel::<u32>();
    let (url_tx, url_rx) = tokio::sync::oneshot::channel::<String>();
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let (read_tail, read_stats, host) = (tail.clone(), stats.clone(), place.host.clone());
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let (mut pid_tx, mut url_tx) = (Some(pid_tx), Some(url_tx));
        let mut status = None;
        while let Ok(Some(line)) = lines.next_line().await {
            match supervisor::parse_line(&line) {
                Some(SupervisorLine::Pid(pid)) => {
                    if let Some(tx) = pid_tx.take() {
                        let _ = tx.send(pid);
                    }
                }
                Some(SupervisorLine::Stats { rss_bytes, processes }) => *read_stats.lock().unwrap_or_else(|p| p.into_inner()) = Some((rss_bytes, processes)),
                Some(SupervisorLine::Exit(how)) => status = Some(how),
                None => {
                    if let Some(url) = line.strip_prefix(launch::LISTEN_PREFIX) {
                        if let Some(tx) = url_tx.take() {
                            let _ = tx.send(url.trim().trim_end_matches('/').to_string());
                            continue;
                        }
                    }
                    read_tail.push_line(&line);
                }
            }
        }
        let _ = child.wait().await;
        let how = status.map(|s| format!("the runtime on {host} ended ({s})")).unwrap_or_else(|| format!("the link to {host} dropped"));
        tracing::info!(%host, %how, "remote runtime gone");
        exit_tx.send_replace(Some(how));
    });
    let err_tail = tail.clone();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            err_tail.push_line(&line);
        }
    });

    let keeper = Arc::new(Keeper { stop: stop.clone(), exit: exit.clone() });
    let mut watch_exit = exit.clone();
    let started = tokio::select! {
        url = tokio::time::timeout(spec.listen_timeout, url_rx) => match url {
            Ok(Ok(url)) => Ok(url),
            Ok(Err(_)) => Err(None),
            Err(_) => Err(Some(spec.listen_timeout)),
        },
        _ = watch_exit.wait_for(Option::is_some) => Err(None),
    };
    let remote_url = match started {
        Ok(url) => url,
        Err(timeout) => {
            keeper.stop().await;
            let status = exit.borrow().clone().unwrap_or_else(|| "still starting".into());
            return Err(match timeout {
                Some(after) => LaunchError::NoUrl { secs: after.as_secs(), tail: tail.text() },
                None => LaunchError::Exited { status, tail: tail.text() },
            });
        }
    };
    let pid = pid_rx.await.unwrap_or_default();
    let port = remote_url.rsplit(':').next().and_then(|p| p.parse::<u16>().ok());
    let forwarded = match port {
        Some(port) => c.link.forward_local(port).await.map_err(|e| remote_err(e.into())),
        None => Err(failed(format!("it printed an address Hearth cannot read: {remote_url}"))),
    };
    let local_port = match forwarded {
        Ok(p) => p,
        Err(e) => {
            keeper.stop().await;
            return Err(e);
        }
    };
    tracing::info!(host = %place.host, pid, %remote_url, local_port, "remote runtime listening");
    let info = RemoteServer { host: place.host.clone(), link_pid: c.link.master_pid(), stats, stopper: keeper };
    Ok(Server::remote(pid, format!("http://127.0.0.1:{local_port}"), password, tail, info, exit))
}

/// The remote home folder the runtime of `place` opens its first instance in (the guard loads
/// with it).
pub async fn remote_home(place: &RemotePlace, local_root: &Path) -> Option<String> {
    let c = place.remote.connect(&place.host).await.ok()?;
    Some(format!("{}/home", remote_root(&c.facts.home, local_root, &place.host)))
}

/// Remove the private root the runtime named by `local_root` kept on `host` (its sessions with
/// it): for a self-test's runtime, once it has stopped.
pub async fn remove_private_root(remote: &Arc<Remote>, host: &str, local_root: &Path) -> Result<(), RemoteError> {
    let c = remote.connect(host).await?;
    let root = remote_root(&c.facts.home, local_root, host);
    c.link.run("removing the runtime's files", &format!("rm -rf -- {}", shell_quote(&root)), None, super::ssh::COMMAND_TIMEOUT).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_private_root_is_one_per_data_folder_and_host() {
        let a = remote_root("/home/u", Path::new("/d1/runtime/opencode"), "box");
        assert!(a.starts_with("/home/u/.cache/hearth/data/") && a.len() == "/home/u/.cache/hearth/data/".len() + 16, "{a}");
        assert_ne!(a, remote_root("/home/u", Path::new("/d2/runtime/opencode"), "box"));
        assert_ne!(a, remote_root("/home/u", Path::new("/d1/runtime/opencode"), "other"));
    }
}
