//! A check's projects on another host: a throw-away folder there (`mktemp -d`), reached through a
//! [`Remote`] of the check's own — its own link, model proxy and the check's gateway — so a check
//! never shares a connection, a runtime or a grant with the user's remote projects. The runtime is
//! the one the app runs there (`RemoteRuntimeConfig`), staged and kept the same way. Removed when
//! the check ends, with the private root the check's runtime kept on the host.

use std::path::Path;
use std::sync::Arc;

use crate::opencode::config::RuntimeConfig;
use crate::remote::spec::{local_root, RemoteRuntimeConfig};
use crate::remote::ssh::{shell_quote, SshOptions, COMMAND_TIMEOUT};
use crate::remote::{launch, Remote};
use crate::runtime::RuntimeSelection;
use crate::space::ExecutionSpace;
use crate::toolbox::gateway::{AllowedCallers, Gateway, GatewayOptions};

use super::sandbox::SANDBOX_PREFIX;
use super::CheckError;

/// A host a check runs its projects on, and how Hearth reaches it (the app's own ssh settings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteTarget {
    /// Anything `ssh` takes: an alias from the ssh config, `user@host`, `host:port` spelled as ssh
    /// wants it.
    pub host: String,
    pub ssh: SshOptions,
}

pub struct RemoteSandbox {
    host: String,
    remote: Arc<Remote>,
    /// The folder on the host, as it resolved it.
    dir: String,
    /// The gateway started for the link when the check brought none (the link forwards one).
    idle_gateway: Option<Arc<Gateway>>,
}

fn failed(what: &str, e: impl std::fmt::Display) -> CheckError {
    CheckError::Sandbox(format!("{what}: {e}"))
}

impl RemoteSandbox {
    /// Connect to `target` (the check's own link, reaching the check's `gateway`, or an idle one
    /// that serves nobody when the check calls none) and make a sandbox folder in the host's
    /// temporary folder.
    pub async fn create(target: &RemoteTarget, gateway: Option<Arc<Gateway>>) -> Result<Self, CheckError> {
        let idle_gateway = match gateway {
            Some(_) => None,
            None => Some(Arc::new(
                Gateway::start(GatewayOptions { callers: AllowedCallers::pids(Vec::new), ..Default::default() })
                    .await
                    .map_err(|e| CheckError::GatewayStart(e.to_string()))?,
            )),
        };
        let gateway = gateway.or_else(|| idle_gateway.clone()).expect("one of the two");
        let remote = match Remote::start(target.ssh.clone(), gateway).await {
            Ok(remote) => remote,
            Err(e) => {
                if let Some(g) = &idle_gateway {
                    g.dispose().await;
                }
                return Err(CheckError::Runtime(e.to_string()));
            }
        };
        let made = async {
            let c = remote.connect(&target.host).await.map_err(|e| CheckError::Runtime(e.to_string()))?;
            let script = format!("d=$(mktemp -d \"${{TMPDIR:-/tmp}}/{SANDBOX_PREFIX}XXXXXXXX\") && cd \"$d\" && pwd -P");
            let out = c.link.run("making the self-test's folder", &format!("sh -c {}", shell_quote(&script)), None, COMMAND_TIMEOUT).await;
            let out = out.map_err(|e| failed(&format!("Could not create the self-test sandbox on {}", target.host), e))?;
            Ok::<_, CheckError>(String::from_utf8_lossy(&out.stdout).trim().to_string())
        };
        let failure = match made.await {
            Ok(dir) if dir.starts_with('/') => return Ok(Self { host: target.host.clone(), remote, dir, idle_gateway }),
            Ok(dir) => CheckError::Sandbox(format!("{} named its temporary folder {dir:?}, not an absolute path", target.host)),
            Err(e) => e,
        };
        remote.shutdown().await;
        if let Some(g) = &idle_gateway {
            g.dispose().await;
        }
        Err(failure)
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    /// The sandbox folder on the host.
    pub fn path(&self) -> &str {
        &self.dir
    }

    /// `config` run on this host, the way the app runs a remote project's runtime.
    pub fn selection(&self, config: RuntimeConfig) -> RuntimeSelection {
        Arc::new(RemoteRuntimeConfig { host: self.host.clone(), config, remote: self.remote.clone() })
    }

    async fn run(&self, what: &str, script: &str) -> Result<Vec<u8>, CheckError> {
        let c = self.remote.connect(&self.host).await.map_err(|e| CheckError::Runtime(e.to_string()))?;
        let out = c.link.run(what, &format!("sh -c {}", shell_quote(script)), None, COMMAND_TIMEOUT).await;
        Ok(out.map_err(|e| failed(&format!("{what} on {}", self.host), e))?.stdout)
    }

    /// A project folder in the sandbox, created with the given files.
    pub async fn project(&self, name: &str, files: &[(&str, &str)]) -> Result<ExecutionSpace, CheckError> {
        let dir = format!("{}/projects/{name}", self.dir);
        let mut script = format!("mkdir -p {}", shell_quote(&dir));
        for (file, content) in files {
            script.push_str(&format!(" && printf %s {} > {}", shell_quote(content), shell_quote(&format!("{dir}/{file}"))));
        }
        self.run("Creating a project folder", &script).await?;
        crate::space::remote(&self.host, &dir).map_err(|e| CheckError::Sandbox(e.to_string()))
    }

    /// A file of a project, as the host has it now.
    pub async fn read(&self, space: &ExecutionSpace, file: &str) -> Option<String> {
        let path = format!("{}/{file}", space.root_str());
        self.run("Reading a project file", &format!("cat -- {}", shell_quote(&path))).await.ok().map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    /// Which of `pids` still run on the host.
    pub async fn running(&self, pids: &[u32]) -> Result<Vec<u32>, CheckError> {
        let list: Vec<String> = pids.iter().map(u32::to_string).collect();
        let script = format!("for p in {}; do kill -0 \"$p\" 2>/dev/null && echo \"$p\"; done; true", list.join(" "));
        let out = self.run("Looking for the runtime's processes", &script).await?;
        Ok(String::from_utf8_lossy(&out).split_whitespace().filter_map(|p| p.parse().ok()).collect())
    }

    /// Remove the folder and the private root of the check's runtime (below `runtimes_root` here),
    /// then close the link. The runtime must have stopped.
    pub async fn remove(&self, runtimes_root: &Path) -> Result<(), CheckError> {
        let folder = self.run("Removing the self-test's folder", &format!("rm -rf -- {}", shell_quote(&self.dir))).await;
        let root = launch::remove_private_root(&self.remote, &self.host, &local_root(runtimes_root, &self.host)).await;
        self.remote.shutdown().await;
        if let Some(g) = &self.idle_gateway {
            g.dispose().await;
        }
        folder?;
        root.map_err(|e| failed(&format!("Could not remove the self-test runtime's files on {}", self.host), e))
    }
}
