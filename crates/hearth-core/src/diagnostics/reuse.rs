//! The reuse check: N projects in a sandbox, 2 conversations each, 2 concurrent waves through the
//! app's own manager → registry → one shared runtime — OpenCode's server or an ACP agent (see
//! `choice.rs`). Proves one launch, one process-owning runtime behind every facade, distinct native
//! sessions, continuation, each run reading its own project's marker with the agent's own read
//! tool, a cancel that ends the turn and drops its model request, and (OpenCode's server)
//! compaction; with 2 projects also per-request images (where the agent takes them), the skill
//! (OpenCode) and 8 MCP calls through the gateway, each under its own request's grant.
//!
//! This file: options, sandboxed setup and the cleanup that always runs. The waves and the
//! verification are in `reuse_steps.rs`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::acp::agents::AgentSearch;
use crate::acp::GatewayTransport;
use crate::toolbox::gateway::{AllowedCallers, CustomServerConfig, Gateway, GatewayOptions, GatewayRunHooks, ServerState};
use crate::opencode::FAMILY as OPENCODE_FAMILY;
use crate::runtime::{ProcessRuntime, RegistryConfig, RunHooks, RuntimeChoice, SelectedRuntimeManager, WorkspaceRuntime};
use crate::scripted_model::{default_reply, find_marker, Reply, RequestKind, Script, ScriptedModelServer};
use crate::toolbox::skills;
use crate::space::{resolve_local, ExecutionSpace};

use super::kit::{self, FoundRuntime};
use super::remote_sandbox::{RemoteSandbox, RemoteTarget};
use super::sandbox::Sandbox;
use super::{ms, reuse_steps, CheckError, CheckReport, Figure, ProgressSink, ReportBuilder};

pub const CHECK_NAME: &str = "reuse";
/// The step ids progress is reported under, in order.
pub const STEPS: &[&str] =
    &["sandbox", "gateway", "launch", "wave-1", "wave-2", "verify", "cancel", "compaction", "runtime", "cleanup"];
/// Project counts the check supports (the two the promise is stated for).
pub const PROJECT_COUNTS: &[usize] = &[2, 10];
/// Conversations per project, and concurrent waves of one run per conversation.
pub const CONVERSATIONS_PER_PROJECT: usize = 2;
pub const WAVES: usize = 2;
/// The full seed (images, skill, MCP through the gateway) runs with exactly this many projects:
/// it is the expensive part, and 2 projects already prove a request cannot see another's.
pub const FULL_SEED_PROJECTS: usize = 2;
/// Bound on one run (a first prompt in a new project takes 3–10 s; more on a loaded machine).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(180);
/// Time for the fixture MCP server to start and list its tools.
pub const GATEWAY_SETTLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Time for the runtime process to be gone after it was stopped.
pub const STOP_WAIT: Duration = Duration::from_secs(10);
/// The manager keeps one facade: eviction must never stop the shared process.
pub const MANAGER_CAPACITY: usize = 1;
/// The embedded skill (the installed app has no repository to read it from).
pub const SKILL_NAME: &str = "web-3d-game";
pub const SKILL_CANARY: &str = "HEARTH_SKILL_WEB_3D_GAME";
const SKILL_MD: &str = include_str!("../../../../fixtures/skills/web-3d-game/SKILL.md");
/// The fixture MCP server as the gateway knows it.
pub const FIXTURE_SERVER_ID: &str = "selftest-blueprint";
pub const FIXTURE_SERVER_NAME: &str = "Self-test blueprint";
/// The fixture's tool, as exposed under the gateway's prefix.
pub const FIXTURE_TOOL_SUFFIX: &str = "_create_game_blueprint";

#[derive(Debug, Clone)]
pub struct ReuseOptions {
    pub runtime_binary: PathBuf,
    /// Folder holding `rg` (the runtime's search tools need it).
    pub rg_dir: Option<PathBuf>,
    /// 2 or 10.
    pub projects: usize,
    /// Where the sandbox is created (the system temporary folder when `None`).
    pub sandbox_parent: Option<PathBuf>,
    /// Command line of the fixture MCP server (the app: `[current_exe, "mcp-fixture"]`). Needed
    /// for the full seed (2 projects) only.
    pub fixture_command: Vec<String>,
    /// The runtime checked: OpenCode's server, or an ACP agent (see [`super::choice`]).
    pub runtime: RuntimeChoice,
    /// Where agents other than OpenCode are found.
    pub agents: AgentSearch,
    /// Hearth's stdio bridge to the gateway (the app: `[current_exe, "mcp-bridge"]`), and whether
    /// the agent's sessions must use it even where they could use HTTP.
    pub bridge_command: Option<Vec<String>>,
    pub transport: GatewayTransport,
    /// Run the projects on this host instead of here (OpenCode's server only).
    pub remote: Option<RemoteTarget>,
}

/// Run the reuse check. Never panics on runtime trouble and always cleans up.
pub async fn run_reuse_check(opts: ReuseOptions, progress: ProgressSink, cancel: CancellationToken) -> CheckReport {
    let mut report = ReportBuilder::new(CHECK_NAME, &opts.runtime).on_host(opts.remote.as_ref().map(|r| r.host.as_str()));
    let outcome = run(&opts, &progress, &cancel, &mut report).await;
    if let Err(e) = &outcome {
        progress.report("cleanup", format!("Stopped: {e}"));
    }
    report.finish(outcome)
}

fn validate(opts: &ReuseOptions) -> Result<(), CheckError> {
    if !PROJECT_COUNTS.contains(&opts.projects) {
        return Err(CheckError::Options(format!("the project count must be 2 or 10, not {}", opts.projects)));
    }
    if !opts.runtime_binary.is_file() {
        return Err(CheckError::Options(format!(
            "the runtime binary {} does not exist",
            opts.runtime_binary.display()
        )));
    }
    if opts.projects == FULL_SEED_PROJECTS && opts.fixture_command.is_empty() {
        return Err(CheckError::Options("the fixture MCP server command is empty".into()));
    }
    if let Some(why) = super::choice::unavailable(&opts.runtime, &opts.agents) {
        return Err(CheckError::Options(why));
    }
    if let Some(why) = opts.remote.as_ref().and_then(|r| super::choice::unavailable_on(&opts.runtime, &r.host)) {
        return Err(CheckError::Options(why));
    }
    Ok(())
}

/// Everything the steps share.
pub(crate) struct Ctx {
    pub facades: Vec<Arc<WorkspaceRuntime>>,
    pub spaces: Vec<ExecutionSpace>,
    pub model: Arc<ScriptedModelServer>,
    pub hooks: Option<Arc<GatewayRunHooks>>,
    /// The tool results the model saw at the capability step of each full-seed run.
    pub capability_results: Arc<Mutex<Vec<String>>>,
    /// The one runtime behind every facade.
    pub process: Arc<dyn ProcessRuntime>,
    pub runtime: RuntimeChoice,
    pub runtimes: Arc<SelectedRuntimeManager>,
    pub progress: ProgressSink,
    /// The host the projects are on, when they are not here.
    pub remote: Option<Arc<RemoteSandbox>>,
}

impl Ctx {
    /// Whether the runtime loads Hearth's staged skill: OpenCode here (a host has no copy of this
    /// machine's skills folder).
    pub fn loads_skills(&self) -> bool {
        self.is_opencode() && self.remote.is_none()
    }

    /// A project's file as its machine has it now.
    pub async fn read_project_file(&self, space: &ExecutionSpace, file: &str) -> Option<String> {
        match &self.remote {
            Some(remote) => remote.read(space, file).await,
            None => std::fs::read_to_string(space.root.join(file)).ok(),
        }
    }

    pub fn full_seed(&self) -> bool {
        self.hooks.is_some()
    }

    /// OpenCode (its server or its ACP agent): the one that loads Hearth's staged skills.
    pub fn is_opencode(&self) -> bool {
        super::choice::is_opencode(&self.runtime)
    }

    /// Whether the runtime takes images: OpenCode's server always (the profile says so), an ACP
    /// agent as it announced when it started.
    pub fn takes_images(&self) -> bool {
        match self.process.as_any().downcast_ref::<crate::acp::AcpRuntime>() {
            Some(agent) => agent.agent_info().is_some_and(|i| i.images),
            None => true,
        }
    }
}

/// What must be stopped and removed whatever happens.
struct Owned {
    sandbox: Sandbox,
    model: Arc<ScriptedModelServer>,
    hooks: Option<Arc<GatewayRunHooks>>,
    runtimes: Option<Arc<SelectedRuntimeManager>>,
    remote: Option<Arc<RemoteSandbox>>,
}

async fn run(
    opts: &ReuseOptions,
    progress: &ProgressSink,
    cancel: &CancellationToken,
    report: &mut ReportBuilder,
) -> Result<(), CheckError> {
    validate(opts)?;
    let full_seed = opts.projects == FULL_SEED_PROJECTS;
    progress.report("sandbox", format!("Creating a sandbox with {} projects and the scripted model server.", opts.projects));
    let sandbox = Sandbox::create(opts.sandbox_parent.as_deref()).map_err(|e| CheckError::Sandbox(e.to_string()))?;
    let capability_results: Arc<Mutex<Vec<String>>> = Arc::default();
    let model = Arc::new(
        ScriptedModelServer::start(if full_seed { seed_script(capability_results.clone()) } else { Script::default_agent() })
            .map_err(|e| CheckError::ModelServer(e.to_string()))?,
    );
    let mut owned = Owned { sandbox, model, hooks: None, runtimes: None, remote: None };
    // Cancellation is handled inside: the launch must not be dropped half-way.
    let outcome = setup_and_steps(opts, progress, cancel, report, &mut owned, capability_results).await;
    cleanup(owned, progress, report).await;
    outcome
}

async fn setup_and_steps(
    opts: &ReuseOptions,
    progress: &ProgressSink,
    cancel: &CancellationToken,
    report: &mut ReportBuilder,
    owned: &mut Owned,
    capability_results: Arc<Mutex<Vec<String>>>,
) -> Result<(), CheckError> {
    let sandbox_err = |e: &dyn std::fmt::Display| CheckError::Sandbox(e.to_string());
    let found = FoundRuntime { binary: opts.runtime_binary.clone(), rg_dir: opts.rg_dir.clone().unwrap_or_default() };
    let mut config = kit::scripted_config(&found, &owned.model, opts.projects == FULL_SEED_PROJECTS);
    config.rg_dir = opts.rg_dir.clone();
    let mut run_hooks: Option<Arc<dyn RunHooks>> = None;
    let mut gateway_setup = None;
    let mut skills = None;
    let manager_slot: Arc<std::sync::OnceLock<std::sync::Weak<SelectedRuntimeManager>>> = Arc::default();
    if opts.projects == FULL_SEED_PROJECTS {
        progress.report("gateway", "Starting the gateway with the fixture MCP server, and staging the skill.");
        // Only the sandbox's runtime may call this gateway: not Hearth, not the agent's tools. The
        // runtimes are made below, after the gateway whose hooks they take.
        let slot = manager_slot.clone();
        let callers = AllowedCallers::pids(move || slot.get().and_then(std::sync::Weak::upgrade).map(|m| m.pids()).unwrap_or_default());
        let gateway = Arc::new(Gateway::start(GatewayOptions { callers, ..Default::default() }).await.map_err(|e| CheckError::GatewayStart(e.to_string()))?);
        let hooks = GatewayRunHooks::new(gateway.clone());
        owned.hooks = Some(hooks.clone());
        gateway.set_custom_servers(vec![fixture_server(&opts.fixture_command)]).await;
        let statuses = tokio::select! {
            s = gateway.wait_until_settled(GATEWAY_SETTLE_TIMEOUT) => s,
            _ = cancel.cancelled() => return Err(CheckError::Cancelled),
        };
        let (ready, detail) = match statuses.first().map(|s| &s.state) {
            Some(ServerState::Ready { tools, .. }) => (true, format!("ready with tools {tools:?}")),
            other => (false, format!("state {other:?}")),
        };
        if !report.check("Fixture MCP server ready in the gateway", ready, detail) {
            return Err(CheckError::FixtureNotStarted);
        }
        gateway_setup = Some(gateway);
        if opts.remote.is_none() {
            skills = Some(stage_skill(owned.sandbox.path()).map_err(|e| sandbox_err(&e))?);
        }
        run_hooks = Some(hooks as Arc<dyn RunHooks>);
    }
    if let Some(target) = &opts.remote {
        progress.report("sandbox", format!("Connecting to {} and creating the projects there.", target.host));
        owned.remote = Some(Arc::new(RemoteSandbox::create(target, gateway_setup.clone()).await?));
    }
    let mut spaces = Vec::new();
    for i in 0..opts.projects {
        let files = [("marker.txt", marker(i))];
        let files: Vec<(&str, &str)> = files.iter().map(|(f, c)| (*f, c.as_str())).collect();
        let space = match &owned.remote {
            Some(remote) => remote.project(&format!("project-{i}"), &files).await?,
            None => {
                let dir = owned.sandbox.project(&format!("project-{i}"), &files).map_err(|e| sandbox_err(&e))?;
                resolve_local(&dir).map_err(|e| sandbox_err(&e))?
            }
        };
        spaces.push(space);
    }
    let setup = super::choice::CheckSetup {
        config,
        model: &owned.model,
        gateway: gateway_setup.as_deref().map(|g| (g, owned.sandbox.path().join("gateway"))),
        skills,
        agents: &opts.agents,
        bridge: opts.bridge_command.clone(),
        transport: opts.transport,
        project: &spaces[0].root,
        remote: owned.remote.as_deref(),
    };
    let selection = super::choice::selection(&opts.runtime, setup)?;

    if cancel.is_cancelled() {
        return Err(CheckError::Cancelled);
    }
    // The app's own wiring, rooted in the sandbox, with a facade capacity of 1: eviction must never
    // stop the shared process.
    let runtimes = Arc::new(kit::runtimes(&owned.sandbox.runtime_root(), run_hooks, RegistryConfig::default(), MANAGER_CAPACITY));
    owned.runtimes = Some(runtimes.clone());
    let _ = manager_slot.set(Arc::downgrade(&runtimes));
    let mut facades = Vec::new();
    for space in &spaces {
        let facade = runtimes.get_runtime(&selection, space).await.map_err(|e| CheckError::Runtime(e.to_string()));
        facades.push(facade?);
    }
    let process = facades.first().and_then(|f| f.process()).ok_or_else(|| CheckError::Runtime("the manager made no runtime".into()))?;

    progress.report("launch", "Starting the one runtime every project shares.");
    let started = Instant::now();
    // A launch is never dropped half-way (its child would be lost): on cancel, let it finish; the
    // cleanup then stops it with everything else.
    let launched = {
        let launch = process.start();
        tokio::pin!(launch);
        tokio::select! {
            r = &mut launch => r.map_err(|e| CheckError::Runtime(e.to_string())),
            _ = cancel.cancelled() => {
                let _ = launch.await;
                Err(CheckError::Cancelled)
            }
        }
    };
    launched?;
    report.figure(Figure::value("runtime launch", "ms", ms(started.elapsed())));
    report.runtime_version = process.status().version;

    let ctx = Ctx {
        facades,
        spaces,
        model: owned.model.clone(),
        hooks: owned.hooks.clone(),
        capability_results,
        process,
        runtime: opts.runtime.clone(),
        runtimes,
        progress: progress.clone(),
        remote: owned.remote.clone(),
    };
    tokio::select! {
        r = reuse_steps::steps(&ctx, report) => r,
        _ = cancel.cancelled() => Err(CheckError::Cancelled),
    }
}

/// Stop the runtime, the gateway (and its fixture child) and the model server; remove the sandbox.
async fn cleanup(owned: Owned, progress: &ProgressSink, report: &mut ReportBuilder) {
    progress.report("cleanup", "Stopping the runtime, the gateway and the model server; removing the sandbox.");
    let pids: Vec<u32> = match &owned.runtimes {
        Some(runtimes) => runtimes.runtimes().iter().filter_map(|r| r.runtime.pid).collect(),
        None => Vec::new(),
    };
    if let Some(runtimes) = &owned.runtimes {
        runtimes.dispose().await;
    }
    let mut fixture_pid = None;
    if let Some(hooks) = &owned.hooks {
        fixture_pid = hooks.gateway().custom_server_pid(FIXTURE_SERVER_ID).await;
        hooks.gateway().dispose().await;
    }
    owned.model.shutdown().await;
    let mut left: Vec<u32> = Vec::new();
    // A remote runtime's pid is the host's: look for it there (the fixture server runs here).
    let local_pids = if owned.remote.is_some() { Vec::new() } else { pids.clone() };
    for pid in local_pids.iter().chain(fixture_pid.iter()) {
        if !kit::gone_within(*pid, STOP_WAIT).await {
            left.push(*pid);
        }
    }
    let mut removed_remote = Ok(());
    if let Some(remote) = &owned.remote {
        match remote.running(&pids).await {
            Ok(running) => left.extend(running),
            Err(e) => removed_remote = Err(e),
        }
        let removed = remote.remove(&owned.sandbox.runtime_root()).await;
        removed_remote = removed_remote.and(removed);
    }
    let sandbox_path = match &owned.remote {
        Some(remote) => format!("{} on {} and {}", remote.path(), remote.host(), owned.sandbox.path().display()),
        None => owned.sandbox.path().display().to_string(),
    };
    let removed = owned.sandbox.remove().map_err(|e| e.to_string()).and(removed_remote.map_err(|e| e.to_string()));
    let detail = match (&removed, left.is_empty()) {
        (Ok(()), true) => format!("runtime {pids:?} and fixture server {fixture_pid:?} stopped; {sandbox_path} removed"),
        (Err(e), _) => e.clone(),
        (Ok(()), false) => format!("processes {left:?} are still running after they were stopped"),
    };
    report.check("No runtime process left and the sandbox removed", removed.is_ok() && left.is_empty(), detail);
}

/// The marker of project `i`; its runs must answer exactly this.
pub fn marker(i: usize) -> String {
    format!("PROJECT_{i}")
}

/// The full seed: read the marker, load the skill, call the fixture MCP server through the gateway
/// with seed = the request id, then answer the marker. Other requests get the default.
fn seed_script(capability_results: Arc<Mutex<Vec<String>>>) -> Script {
    Script::custom(move |r| {
        let Some(read) = r.find_tool("read").filter(|_| r.kind == RequestKind::Agent) else {
            return default_reply(r);
        };
        let results = r.tool_results_after_last_user();
        let request_id = request_id_in(&r.last_user_text());
        // The skill step where the agent has Hearth's staged skills (OpenCode); else straight on.
        let skill = r.find_tool("skill").filter(|t| t.name == "skill");
        let step = if skill.is_none() && !results.is_empty() { results.len() + 1 } else { results.len() };
        match step {
            0 => Reply::tool_call(read.name, read.adapt(serde_json::json!({ "filePath": "marker.txt" }))),
            1 => Reply::tool_call("skill", serde_json::json!({ "name": SKILL_NAME })),
            2 => match r.tool_names().into_iter().find(|n| n.ends_with(FIXTURE_TOOL_SUFFIX)) {
                Some(tool) => Reply::tool_call(
                    tool,
                    serde_json::json!({ "theme": "neon-ruins", "seed": request_id, "targetCount": 5 }),
                ),
                None => Reply::text("the fixture MCP server is not exposed"),
            },
            _ => {
                capability_results.lock().unwrap_or_else(|p| p.into_inner()).push(results.join("\n"));
                Reply::text(find_marker(&results[0]).unwrap_or("NO_MARKER").to_string())
            }
        }
    })
}

/// The request id a prompt carries after `REQUEST_`.
pub(crate) fn request_id_in(prompt: &str) -> String {
    prompt.split("REQUEST_").nth(1).and_then(|s| s.split_whitespace().next()).unwrap_or("").to_string()
}

fn fixture_server(command: &[String]) -> CustomServerConfig {
    CustomServerConfig {
        id: FIXTURE_SERVER_ID.into(),
        name: FIXTURE_SERVER_NAME.into(),
        command: command.first().cloned().unwrap_or_default(),
        args: command.iter().skip(1).cloned().collect(),
        env: BTreeMap::new(),
        enabled: true,
        assigned_runtimes: vec![OPENCODE_FAMILY.into()],
        allow_dynamic_tools: false,
    }
}

/// Write the embedded skill into the sandbox and stage it as the app does; the runtime reads the
/// returned link.
fn stage_skill(root: &std::path::Path) -> Result<PathBuf, skills::StageError> {
    let source = root.join("skill-source").join(SKILL_NAME);
    std::fs::create_dir_all(&source)
        .and_then(|()| std::fs::write(source.join(skills::SKILL_FILE), SKILL_MD))
        .map_err(|e| skills::StageError::Write { dir: source.clone(), source: e })?;
    let stager = skills::SkillStager::new(root.join("skill-source"), root.join("skills"));
    let report = stager.refresh()?;
    if let Some(problem) = report.packages.into_iter().find_map(|s| s.package.err()) {
        return Err(problem.into());
    }
    Ok(stager.link().to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_skill_is_a_valid_package_carrying_its_canary() {
        assert!(SKILL_MD.contains(SKILL_CANARY));
        let dir = tempfile::tempdir().unwrap();
        let staged = stage_skill(dir.path()).unwrap();
        assert!(std::fs::read_to_string(staged.join(SKILL_NAME).join("SKILL.md")).unwrap().contains(SKILL_CANARY));
    }

    #[test]
    fn request_ids_are_read_from_the_prompt() {
        assert_eq!(request_id_in("Read marker.txt for wave 0. REQUEST_abc-1"), "abc-1");
        assert_eq!(request_id_in("no id"), "");
    }

    #[test]
    fn the_fixture_command_splits_into_program_and_arguments() {
        let s = fixture_server(&["/opt/hearth".into(), "mcp-fixture".into()]);
        assert_eq!((s.command.as_str(), s.args.as_slice()), ("/opt/hearth", &["mcp-fixture".to_string()][..]));
    }

    #[tokio::test]
    async fn bad_options_are_a_clear_failed_report() {
        let opts = ReuseOptions {
            runtime_binary: "/nonexistent/opencode".into(),
            rg_dir: None,
            projects: 3,
            sandbox_parent: None,
            fixture_command: vec![],
            runtime: RuntimeChoice::OpenCode,
            agents: AgentSearch::default(),
            bridge_command: None,
            transport: GatewayTransport::Auto,
            remote: None,
        };
        let report = run_reuse_check(opts.clone(), ProgressSink::silent(), CancellationToken::new()).await;
        assert!(!report.passed);
        assert_eq!(report.error.as_deref(), Some("The options are invalid: the project count must be 2 or 10, not 3"));
        let report = run_reuse_check(ReuseOptions { projects: 10, ..opts }, ProgressSink::silent(), CancellationToken::new()).await;
        assert!(report.error.unwrap().contains("the runtime binary /nonexistent/opencode does not exist"));
    }
}
