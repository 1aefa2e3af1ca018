//! The isolation check on an ACP agent: conversation A sends the whole context corpus in one
//! prompt and that request is held at the scripted model server, while conversation B of the same
//! project — another native session of the same agent process — keeps answering; then A is
//! cancelled in the middle of its call, and continues afterwards. It proves one conversation's
//! huge, slow turn never starves another session of a shared agent, and that the corpus reached
//! the model whole.
//!
//! ACP has no compaction request and no HTTP API to probe, so this is the check's form for agents:
//! the heavy turn is A's own prompt, and B's prompt latency is the measure.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::runtime::{RegistryConfig, TurnEnd, WorkspaceRuntime, DEFAULT_FACADE_CAPACITY};
use crate::scripted_model::{HoldRule, ObservedRequest, RequestKind, Script, ScriptedModelServer};
use crate::space::resolve_local;

use super::corpus::{list_some, CorpusPlan, CorpusScan};
use super::isolation::{run_prompt, IsolationOptions, RunOk, CONVERSATION_A, CONVERSATION_B, MARKER};
use super::isolation_steps::{ASSEMBLY_TIMEOUT, B_PROMPT_TIMEOUT, MIN_HOLD, PROBE_ROUNDS, SEED_TURN_TIMEOUT};
use super::kit::{self, FoundRuntime};
use super::sandbox::Sandbox;
use super::{ms, CheckError, Figure, ProgressSink, PromptError, ReportBuilder};

/// The step ids progress is reported under, in order.
pub const STEPS: &[&str] = &["sandbox", "launch", "seed", "idle", "held", "cancel", "after", "cleanup"];
/// From cancelling A until its turn ends.
pub const CANCEL_TIMEOUT: Duration = Duration::from_secs(15);
/// What A's corpus prompt carries, so the model server holds it and nothing else.
const HOLD_TAG: &str = "SELFTEST_HOLD_A";
const SEED_PROMPT_A: &str = "Read marker.txt to start conversation A (SELFTEST_SEED_A).";

pub(crate) async fn run(opts: &IsolationOptions, progress: &ProgressSink, cancel: &CancellationToken, report: &mut ReportBuilder) -> Result<(), CheckError> {
    let plan = CorpusPlan::new(opts.corpus_mib).map_err(|e| CheckError::Options(e.to_string()))?;
    if let Some(why) = super::choice::unavailable(&opts.runtime, &opts.agents) {
        return Err(CheckError::Options(why));
    }
    progress.report("sandbox", "Creating a throw-away sandbox and starting the scripted model server.");
    let sandbox = Sandbox::create(opts.sandbox_parent.as_deref()).map_err(|e| CheckError::Sandbox(e.to_string()))?;
    let sandbox_err = |e: &dyn std::fmt::Display| CheckError::Sandbox(e.to_string());
    let project = sandbox.project("project", &[("marker.txt", MARKER)]).map_err(|e| sandbox_err(&e))?;
    let space = resolve_local(&project).map_err(|e| sandbox_err(&e))?;
    let model = ScriptedModelServer::start(Script::default_agent()).map_err(|e| CheckError::ModelServer(e.to_string()))?;
    let found = FoundRuntime { binary: opts.runtime_binary.clone(), rg_dir: opts.rg_dir.clone().unwrap_or_default() };
    let mut config = kit::scripted_config(&found, &model, false);
    config.rg_dir = opts.rg_dir.clone();
    let setup = super::choice::CheckSetup { config, model: &model, gateway: None, skills: None, agents: &opts.agents, bridge: None, transport: Default::default(), project: &space.root, remote: None };
    let runtimes = kit::runtimes(&sandbox.runtime_root(), None, RegistryConfig::default(), DEFAULT_FACADE_CAPACITY);
    let outcome = async {
        let selection = super::choice::selection(&opts.runtime, setup)?;
        let rt = runtimes.get_runtime(&selection, &space).await.map_err(|e| CheckError::Runtime(e.to_string()))?;
        let process = rt.process().ok_or_else(|| CheckError::Runtime("the manager made no runtime".into()))?;
        progress.report("launch", "Starting the agent inside the sandbox.");
        let started = Instant::now();
        // A launch is never dropped half-way (its child would be lost).
        let launch = process.start();
        tokio::pin!(launch);
        tokio::select! {
            r = &mut launch => r.map_err(|e| CheckError::Runtime(e.to_string()))?,
            _ = cancel.cancelled() => {
                let _ = launch.await;
                return Err(CheckError::Cancelled);
            }
        }
        report.figure(Figure::value("agent launch", "ms", ms(started.elapsed())));
        report.runtime_version = process.status().version;
        let phases = Phases { rt, model: &model, plan, progress };
        tokio::select! {
            r = phases.run(report) => r,
            _ = cancel.cancelled() => Err(CheckError::Cancelled),
            free = sandbox.until_full_for_grace() => Err(CheckError::DiskFull {
                step: "The check stopped: the agent cannot write.".into(),
                free_kib: free / 1024,
                path: sandbox.path().display().to_string(),
            }),
        }
    }
    .await;

    progress.report("cleanup", "Stopping the agent and removing the sandbox.");
    let pids: Vec<u32> = runtimes.runtimes().iter().filter_map(|r| r.runtime.pid).collect();
    runtimes.dispose().await;
    model.shutdown().await;
    let mut left = Vec::new();
    for pid in &pids {
        if !kit::gone_within(*pid, super::reuse::STOP_WAIT).await {
            left.push(*pid);
        }
    }
    let sandbox_path = sandbox.path().to_path_buf();
    let removed = sandbox.remove();
    let detail = match (&removed, left.is_empty()) {
        (Ok(()), true) => format!("agent {pids:?} stopped; {} removed", sandbox_path.display()),
        (Err(e), _) => e.to_string(),
        (Ok(()), false) => format!("processes {left:?} are still running after they were stopped"),
    };
    report.check("Sandbox removed and agent stopped", removed.is_ok() && left.is_empty(), detail);
    outcome
}

struct Phases<'a> {
    rt: Arc<WorkspaceRuntime>,
    model: &'a ScriptedModelServer,
    plan: CorpusPlan,
    progress: &'a ProgressSink,
}

impl Phases<'_> {
    async fn prompt(&self, conversation: &str, text: String, timeout: Duration) -> Result<RunOk, PromptError> {
        run_prompt(self.rt.clone(), self.rt.space().clone(), conversation, text, timeout).await
    }

    /// `samples` prompts of B, one after another; each must answer the marker.
    async fn b_prompts(&self, phase: &str, samples: usize) -> Result<Vec<f64>, CheckError> {
        let mut took = Vec::new();
        for i in 0..samples {
            let what = format!("B's {phase} prompt {}", i + 1);
            let ok = self.prompt(CONVERSATION_B, format!("Read marker.txt while A is {phase} ({i})."), B_PROMPT_TIMEOUT).await;
            match ok {
                Ok(ok) if ok.text == MARKER => took.push(ms(ok.took)),
                Ok(ok) => return Err(CheckError::WrongAnswer { what, answered: ok.text, expected: MARKER }),
                Err(e) => return Err(CheckError::Prompt { what, detail: e.to_string() }),
            }
        }
        Ok(took)
    }

    async fn run(&self, report: &mut ReportBuilder) -> Result<(), CheckError> {
        self.progress.report("seed", "Starting conversations A and B with one turn each.");
        for (conversation, text) in [(CONVERSATION_A, SEED_PROMPT_A.to_string()), (CONVERSATION_B, "Read marker.txt to start conversation B.".to_string())] {
            match self.prompt(conversation, text, SEED_TURN_TIMEOUT).await {
                Ok(ok) if ok.text == MARKER => {}
                Ok(ok) => return Err(CheckError::WrongAnswer { what: format!("{conversation}'s first prompt"), answered: ok.text, expected: MARKER }),
                Err(e) => return Err(CheckError::Prompt { what: format!("{conversation}'s first prompt"), detail: e.to_string() }),
            }
        }

        self.progress.report("idle", "Measuring B's prompts while A is idle.");
        let idle = self.b_prompts("idle", PROBE_ROUNDS).await?;
        report.figure_opt(Figure::distribution("B prompt, A idle", "ms", &idle));

        self.progress.report("held", format!("A sends {} MiB of context; its request is held at the model while B keeps working.", self.plan.mib));
        let hold = self.model.hold(HoldRule::kind(RequestKind::Agent).with_predicate(|r: &ObservedRequest| r.last_user_text().contains(HOLD_TAG)));
        let corpus: String = (0..self.plan.items()).map(|i| self.plan.item(i)).collect();
        let cancel_a = CancellationToken::new();
        let a = {
            let (rt, cancel) = (self.rt.clone(), cancel_a.clone());
            let mut request = kit::run_request(CONVERSATION_A, &format!("{corpus}\nRead marker.txt with all of this in mind ({HOLD_TAG})."), rt.space());
            request.request_id = uuid::Uuid::new_v4().to_string();
            tokio::spawn(async move { kit::run_to_end(&*rt, request, cancel, ASSEMBLY_TIMEOUT + B_PROMPT_TIMEOUT * 8).await })
        };
        let sent = Instant::now();
        let mut a = a;
        // A's turn may end without calling the model at all (an agent that refuses a prompt this
        // large): that is the check's answer, not a wait for the bound.
        tokio::select! {
            held = hold.wait_until_held(1, ASSEMBLY_TIMEOUT) => if !held {
                cancel_a.cancel();
                return Err(CheckError::Timeout { what: "A's request to reach the model server".into(), secs: ASSEMBLY_TIMEOUT.as_secs() });
            },
            ended = &mut a => {
                let how = match ended {
                    Ok(Ok(f)) => format!("{:?}", f.end),
                    Ok(Err(e)) => e.to_string(),
                    Err(e) => e.to_string(),
                };
                return Err(CheckError::Prompt { what: format!("A's prompt with {} MiB of context", self.plan.mib), detail: format!("it ended before reaching the model: {how}") });
            }
        }
        report.figure(Figure::value("A's request assembled and sent", "ms", ms(sent.elapsed())));
        let held_since = Instant::now();
        let held = self.b_prompts("held", PROBE_ROUNDS).await;
        if held_since.elapsed() < MIN_HOLD {
            tokio::time::sleep(MIN_HOLD - held_since.elapsed()).await;
        }
        let still_held = hold.held_count() == 1;
        let held = held?;
        report.figure_opt(Figure::distribution("B prompt, A held", "ms", &held));
        let median = |v: &[f64]| Figure::distribution("", "", v).map(|f| f.median).unwrap_or(f64::NAN);
        report.figure(Figure::value("B prompt held/idle", "ratio", median(&held) / median(&idle)));
        report.check(
            "B answered while A's huge request was held",
            still_held,
            format!("{} prompts of B answered {MARKER} in {:.0} ms median (idle {:.0} ms); A still held: {still_held}", held.len(), median(&held), median(&idle)),
        );
        let requests = self.model.requests();
        let a_request = requests.iter().rev().find(|r| r.last_user_text().contains(HOLD_TAG)).ok_or_else(|| CheckError::Missing("recorded request of A".into()))?;
        verify_corpus(self.plan, a_request, report);

        self.progress.report("cancel", "Cancelling A while its request is held.");
        let asked = Instant::now();
        cancel_a.cancel();
        let ended = tokio::time::timeout(CANCEL_TIMEOUT, a).await;
        let took = asked.elapsed();
        let dropped = kit::wait_until(CANCEL_TIMEOUT, || async { hold.held_count() == 0 }).await;
        hold.release();
        report.figure(Figure::value("cancel of A", "ms", ms(took)));
        let (ok, detail) = match ended {
            Ok(Ok(Ok(f))) if f.end == TurnEnd::Cancelled && dropped => (true, format!("A ended cancelled {:.0} ms after the cancel; its model request was dropped", ms(took))),
            Ok(Ok(Ok(f))) => (false, format!("A ended {:?}; its model request dropped: {dropped}", f.end)),
            Ok(Ok(Err(e))) => (false, e.to_string()),
            Ok(Err(e)) => (false, e.to_string()),
            Err(_) => (false, format!("A did not end within {} s of the cancel", CANCEL_TIMEOUT.as_secs())),
        };
        report.check("A's cancel ended its turn and dropped its model request", ok, detail);

        self.progress.report("after", "A continues after the cancel; B is unaffected.");
        let after = self.prompt(CONVERSATION_A, "Read marker.txt after the cancel.".into(), B_PROMPT_TIMEOUT).await;
        // The same native session as A's first turn (an agent may have compacted the history,
        // huge as it is now, so the session is what must carry over, not every byte of it).
        let requests = self.model.requests();
        let seed_session = requests.iter().find(|r| r.last_user_text().contains("SELFTEST_SEED_A")).and_then(|r| r.session_id.clone());
        let continued = seed_session.is_some() && requests.iter().any(|r| r.last_user_text().contains("after the cancel") && r.session_id == seed_session);
        let (ok, detail) = match &after {
            Ok(ok) if ok.text == MARKER && continued => (true, format!("answered {MARKER} in {:.0} ms, in the session that holds A's first turn", ms(ok.took))),
            Ok(ok) => (false, format!("answered {:?}; in A's first session: {continued}", ok.text)),
            Err(e) => (false, e.to_string()),
        };
        report.check("A continues its own session after the cancel", ok, detail);
        let b_after = self.b_prompts("done", 1).await?;
        report.check("B still answers afterwards", true, format!("answered {MARKER} in {:.0} ms", b_after[0]));
        Ok(())
    }
}

/// A's held request carries, byte for byte, the whole corpus.
fn verify_corpus(plan: CorpusPlan, request: &ObservedRequest, report: &mut ReportBuilder) {
    report.figure(Figure::value("corpus", "bytes", plan.total_bytes() as f64));
    if plan.items() == 0 {
        return;
    }
    let scan = CorpusScan::of(&request.body_bytes);
    let missing = scan.missing(&plan);
    report.check(
        "Every corpus canary and fill byte reached the model server",
        missing.is_empty() && scan.fill_bytes == plan.fill_bytes(),
        if missing.is_empty() {
            format!("all {} canaries and {} fill bytes in a {}-byte request", plan.items(), scan.fill_bytes, request.body_bytes.len())
        } else {
            format!("{} of {} canaries missing: {}; {} of {} fill bytes", missing.len(), plan.items(), list_some(&missing), scan.fill_bytes, plan.fill_bytes())
        },
    );
}
