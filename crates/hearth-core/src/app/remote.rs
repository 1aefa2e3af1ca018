//! Projects on other hosts, as the user adds and uses them: a host and a folder chosen from its
//! listing; the host's state for the sidebar; the space a project's turns run in; and the
//! selection that runs OpenCode on the host. A project's host is fixed when it is added.

use std::sync::Arc;

use super::{blocking, AppError, AppResult, Hearth};
use crate::remote::spec::RemoteRuntimeConfig;
use crate::remote::{HostState, RemoteListing};
use crate::runtime::{RuntimeChoice, RuntimeSelection};
use crate::space::{self, ExecutionSpace};
use crate::store::Project;

/// The space a project's turns run in: its folder here, or on its host.
pub fn space_of(project: &Project) -> AppResult<ExecutionSpace> {
    Ok(match &project.host {
        None => space::resolve_local(&project.path)?,
        Some(host) => space::remote(host, &project.path)?,
    })
}

impl Hearth {
    /// The folder `path` on `host` (its home when empty), resolved there, with its entries: what
    /// the window's folder browser shows. Connects to the host if needed.
    pub async fn list_remote_folder(&self, host: String, path: String) -> AppResult<RemoteListing> {
        Ok(self.remote.list_folder(host.trim(), &path).await?)
    }

    /// Add the folder `path` on `host` as a project (checked and resolved on the host first).
    pub async fn add_remote_project(&self, host: String, path: String) -> AppResult<Project> {
        let listing = self.remote.list_folder(host.trim(), &path).await?;
        let space = space::remote(&listing.host, &listing.path)?;
        blocking(&self.store, move |s| s.add_project_in(&space)).await
    }

    /// The links to other hosts (diagnostics; tests sever a link through its process).
    pub fn remote(&self) -> &Arc<crate::remote::Remote> {
        &self.remote
    }

    /// Whether `host` is connected, idle, or could not be reached (with why), for the sidebar.
    pub async fn host_state(&self, host: String) -> HostState {
        self.remote.state(&host).await
    }

    /// OpenCode on `space`'s host, configured as here.
    pub(crate) async fn remote_selection(&self, choice: &RuntimeChoice, host: &str) -> AppResult<RuntimeSelection> {
        if *choice != RuntimeChoice::OpenCode {
            return Err(AppError::AgentsLocalOnly);
        }
        let binaries = self.binaries().await?;
        let mut config = super::runtime_config::runtime_config(&self.store, &binaries, &self.builtin).await?;
        self.tools.configure(&mut config).await;
        Ok(Arc::new(RemoteRuntimeConfig { host: host.to_string(), config, remote: self.remote.clone() }))
    }
}
