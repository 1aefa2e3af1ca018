//! The diagnostics panel's side of the app: runtime status, log tail, and the self-test (the same
//! code as `hearth selftest`), one run at a time, cancellable, in a throw-away sandbox.

use std::path::PathBuf;
use std::sync::Mutex;

use tokio_util::sync::CancellationToken;

use super::{AppError, AppResult, Hearth};
use crate::diagnostics::remote_sandbox::RemoteTarget;
use crate::diagnostics::selftest::{self, SelftestOptions, SelftestReport};
use crate::diagnostics::ProgressSink;
use crate::toolbox::gateway::CustomServerStatus;
use crate::runtime::{MemoryReport, RegisteredRuntimeStatus, RuntimeChoice};

/// Bytes of the newest log file shown in the panel.
pub const LOG_TAIL_BYTES: usize = 16 * 1024;

/// What the panel asks for.
#[derive(Debug, Clone, serde::Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct SelftestRequest {
    pub projects: u32,
    pub corpus_mib: u32,
    /// The runtimes to check; `None`: every one the self-test can check here (OpenCode's server
    /// alone on another host).
    pub runtimes: Option<Vec<RuntimeChoice>>,
    /// Run the checks' projects on this host (anything `ssh` takes), reached the way remote
    /// projects are; `None` or blank: here.
    #[serde(default)]
    pub host: Option<String>,
}

/// A runtime the self-test can run its checks on.
#[derive(Debug, Clone, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct SelftestRuntime {
    pub choice: RuntimeChoice,
    pub label: String,
    /// Why it cannot be checked here; `None` when it can.
    pub problem: Option<String>,
}

#[derive(Debug, Clone, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeMemory {
    pub pid: u32,
    pub rss_bytes: u64,
    pub processes: u32,
    /// The host the process runs on (measured there), or none for this machine.
    pub host: Option<String>,
}

#[derive(Debug, Clone, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct DiagnosticsStatus {
    pub runtimes: Vec<RegisteredRuntimeStatus>,
    pub memory: Vec<RuntimeMemory>,
    /// The last hour of the runtime's memory, with the bound past which an idle runtime is
    /// replaced and each replacement.
    pub memory_history: MemoryReport,
    pub mcp_servers: Vec<CustomServerStatus>,
    pub log_tail: String,
    pub log_dir: String,
    pub selftest_running: bool,
}

/// The running self-test's cancel token, and the last report (for export).
#[derive(Default)]
pub struct SelftestSlot {
    running: Mutex<Option<CancellationToken>>,
    last: Mutex<Option<SelftestReport>>,
}

impl Hearth {
    pub async fn diagnostics_status(&self) -> DiagnosticsStatus {
        let runtimes = self.runtimes.runtimes();
        let memory = runtimes
            .iter()
            .filter_map(|r| {
                let pid = r.runtime.pid?;
                match &r.runtime.host {
                    // A pid on another host means nothing here: take what its keeper measured there.
                    Some(host) => r.runtime.host_memory.map(|m| RuntimeMemory { pid, rss_bytes: m.rss_bytes, processes: m.processes, host: Some(host.clone()) }),
                    None => crate::host::procinfo::tree_rss(pid).ok().map(|t| RuntimeMemory { pid, rss_bytes: t.bytes, processes: t.processes, host: None }),
                }
            })
            .collect();
        let log_dir = self.paths.log_dir.clone();
        let log_tail = tokio::task::spawn_blocking(move || newest_log_tail(&log_dir)).await.unwrap_or_default();
        DiagnosticsStatus {
            runtimes,
            memory,
            memory_history: self.runtimes.memory_report(),
            mcp_servers: self.tools.hooks.gateway().custom_server_statuses(),
            log_tail,
            log_dir: self.paths.log_dir.display().to_string(),
            selftest_running: self.selftest.running.lock().unwrap().is_some(),
        }
    }

    /// Run the self-test; `fixture_command` starts the fixture MCP server (e.g. `hearth mcp-fixture`).
    pub async fn run_selftest(&self, request: SelftestRequest, fixture_command: Vec<String>, progress: ProgressSink) -> AppResult<SelftestReport> {
        let binaries = self.binaries().await?;
        let cancel = CancellationToken::new();
        {
            let mut slot = self.selftest.running.lock().unwrap();
            if slot.is_some() {
                return Err(AppError::SelftestRunning);
            }
            *slot = Some(cancel.clone());
        }
        let host = request.host.as_deref().map(str::trim).filter(|h| !h.is_empty());
        let remote = host.map(|host| RemoteTarget { host: host.to_string(), ssh: self.remote.options().clone() });
        let options = SelftestOptions {
            projects: request.projects as usize,
            corpus_mib: request.corpus_mib,
            runtime_binary: binaries.opencode,
            rg_dir: Some(binaries.rg_dir),
            fixture_command,
            bridge_command: self.bridge_command.clone(),
            sandbox_parent: None,
            runtimes: request.runtimes.unwrap_or_else(|| if remote.is_some() { vec![RuntimeChoice::OpenCode] } else { self.checkable_runtimes() }),
            agents: self.agent_search(),
            remote,
        };
        let result = selftest::run_selftest(options, progress, cancel).await;
        *self.selftest.running.lock().unwrap() = None;
        let report = result.map_err(|_: crate::diagnostics::selftest::SelftestError| AppError::SelftestRunning)?;
        *self.selftest.last.lock().unwrap() = Some(report.clone());
        Ok(report)
    }

    /// Every runtime the self-test knows how to check, each with why it cannot be checked here
    /// (Claude Code not installed), for the panel's choice.
    pub fn selftest_runtimes(&self) -> Vec<SelftestRuntime> {
        let agents = self.agent_search();
        crate::diagnostics::choice::checkable()
            .into_iter()
            .map(|choice| SelftestRuntime { label: crate::diagnostics::choice::label(&choice), problem: crate::diagnostics::choice::unavailable(&choice, &agents), choice })
            .collect()
    }

    /// The runtimes the self-test can check on this machine.
    fn checkable_runtimes(&self) -> Vec<RuntimeChoice> {
        self.selftest_runtimes().into_iter().filter(|r| r.problem.is_none()).map(|r| r.choice).collect()
    }

    pub fn selftest_running(&self) -> bool {
        self.selftest.running.lock().unwrap().is_some()
    }

    pub fn cancel_selftest(&self) -> bool {
        match self.selftest.running.lock().unwrap().as_ref() {
            Some(t) => {
                t.cancel();
                true
            }
            None => false,
        }
    }

    /// Save the last report (JSON; it holds no secrets) under the data folder; returns its path.
    pub async fn export_report(&self) -> AppResult<String> {
        let report = self.selftest.last.lock().unwrap().clone().ok_or(AppError::NoSelftestReport)?;
        let dir = self.paths.data_dir.join("reports");
        let path: PathBuf = dir.join(format!("selftest-{}.json", chrono_stamp()));
        let text = serde_json::to_vec_pretty(&report).expect("a report always serialises");
        let p = path.clone();
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            std::fs::create_dir_all(&dir)?;
            std::fs::write(&p, text)
        })
        .await?
        .map_err(|source| AppError::Write { path: path.clone(), source })?;
        Ok(path.display().to_string())
    }
}

fn chrono_stamp() -> String {
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    ms.to_string()
}

/// The end of the newest log file.
fn newest_log_tail(dir: &std::path::Path) -> String {
    let newest = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(crate::host::logging::LOG_FILE_PREFIX))
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok());
    let Some(entry) = newest else { return String::new() };
    let bytes = std::fs::read(entry.path()).unwrap_or_default();
    crate::binaries::executable::tail(&bytes, LOG_TAIL_BYTES)
}
