//! The reuse check's phases: two concurrent waves of one run per conversation, then what the model
//! server and the gateway recorded, a cancel, compaction (OpenCode's server), and the runtime's own
//! view of itself.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use tokio_util::sync::CancellationToken;

use crate::runtime::{AgentRuntime, CompactRequest, ImageInput, RegistryConfig, RuntimeChoice, TurnEnd, WorkspaceRuntime};
use crate::scripted_model::{HoldRule, RequestKind};
use crate::toolbox::gateway::{fixture, GrantScope, DEFAULT_GRANT_TTL, FORBIDDEN_SENTENCE};

use super::kit;
use super::reuse::{marker, Ctx, CONVERSATIONS_PER_PROJECT, FIXTURE_SERVER_ID, RUN_TIMEOUT, SKILL_CANARY, WAVES};
use super::{ms, CheckError, PromptError, Figure, ReportBuilder};

/// Bound on the gateway's answer to the caller check.
const CALLER_CHECK_TIMEOUT: Duration = Duration::from_secs(10);
/// From cancelling a turn held at the model until it ends, and until its model request is dropped.
pub const CANCEL_TIMEOUT: Duration = Duration::from_secs(15);
/// What the cancelled turn's prompt says, so the model server holds it and nothing else.
const CANCEL_PROMPT: &str = "Read marker.txt slowly (SELFTEST_CANCEL_ME).";

/// One finished (or failed) run.
struct RunResult {
    project: usize,
    conversation: String,
    request_id: String,
    /// `Err` says why the run did not finish.
    outcome: Result<Finished, PromptError>,
}

struct Finished {
    streamed: String,
    final_text: String,
    session: String,
    /// (tool, output) of every finished tool call.
    tools: Vec<(String, String)>,
    took: Duration,
}

pub(crate) async fn steps(ctx: &Ctx, report: &mut ReportBuilder) -> Result<(), CheckError> {
    let images: Vec<Vec<u8>> = (0..ctx.facades.len()).map(|i| png(i as u32 + 1)).collect();
    let mut sessions: HashMap<String, String> = HashMap::new(); // conversation → native session
    let mut grant_tags: HashMap<String, String> = HashMap::new(); // request → token tag
    let mut wave0_requests: Vec<(String, usize)> = Vec::new(); // request → project
    for wave in 0..WAVES {
        let step = format!("wave-{}", wave + 1);
        ctx.progress.report(
            &step,
            format!("Wave {}: {} concurrent runs across {} projects.", wave + 1, ctx.facades.len() * CONVERSATIONS_PER_PROJECT, ctx.facades.len()),
        );
        let mut runs = Vec::new();
        // Each wave's grants end with the wave, whatever becomes of its runs.
        let mut grants = Vec::new();
        for (p, facade) in ctx.facades.iter().enumerate() {
            for c in 0..CONVERSATIONS_PER_PROJECT {
                let request_id = uuid::Uuid::new_v4().to_string();
                if let Some(hooks) = &ctx.hooks {
                    let scope = GrantScope {
                        libraries: vec![],
                        custom_servers: vec![FIXTURE_SERVER_ID.into()],
                        ttl: DEFAULT_GRANT_TTL,
                    };
                    match hooks.grant(&request_id, scope) {
                        Ok(grant) => {
                            grant_tags.insert(request_id.clone(), grant.tag().to_string());
                            grants.push(grant);
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                // Images only in wave 1: wave 2 must not need them to continue.
                let image = (ctx.full_seed() && ctx.takes_images() && wave == 0).then(|| images[p].clone());
                let conversation = format!("project-{p}-{c}");
                // As the app does: a conversation continues the native session stored for it.
                let stored = sessions.get(&conversation).cloned();
                runs.push(one_run(facade.clone(), p, conversation, request_id, wave, image, stored));
            }
        }
        let results = futures::future::join_all(runs).await;
        drop(grants);
        verify_wave(ctx, report, wave, &results, &mut sessions, &mut wave0_requests);
    }

    ctx.progress.report("verify", "Checking sessions, continuation, images and MCP calls as the model and the gateway saw them.");
    let expected_sessions = ctx.facades.len() * CONVERSATIONS_PER_PROJECT;
    let distinct: HashSet<_> = sessions.values().collect();
    report.check(
        "Distinct native sessions",
        distinct.len() == expected_sessions,
        format!("{} distinct of {expected_sessions} conversations", distinct.len()),
    );
    let requests = ctx.model.requests();
    let unseen: Vec<_> = sessions
        .iter()
        .filter(|(_, session)| {
            !requests.iter().any(|r| {
                r.session_id.as_deref() == Some(session.as_str())
                    && r.kind == RequestKind::Agent
                    && r.last_user_text().contains("for wave 1")
                    && r.contains_text("for wave 0")
            })
        })
        .map(|(c, _)| c.clone())
        .collect();
    report.check(
        "The model saw wave 1 when continuing in wave 2",
        unseen.is_empty() && sessions.len() == expected_sessions,
        if unseen.is_empty() { format!("{} conversations", sessions.len()) } else { format!("not seen in {unseen:?}") },
    );

    if ctx.full_seed() {
        if ctx.takes_images() {
            verify_images(report, &requests, &wave0_requests, &images);
        }
        verify_mcp(ctx, report, &grant_tags);
        verify_callers(ctx, report).await;
    }

    ctx.progress.report("cancel", "Cancelling a turn while its model request is held.");
    cancel_held_turn(ctx, report).await;
    // An ACP agent compacts on its own terms (there is no protocol request for it).
    if ctx.runtime == RuntimeChoice::OpenCode {
        compact_every_project(ctx, report, &sessions).await;
    }

    ctx.progress.report("runtime", "Checking the one runtime behind every project.");
    verify_runtime(ctx, report).await;
    Ok(())
}

/// A turn held at the model is cancelled: it ends as cancelled within [`CANCEL_TIMEOUT`], the
/// runtime drops its model request, and the conversation answers its next prompt.
async fn cancel_held_turn(ctx: &Ctx, report: &mut ReportBuilder) {
    let facade = &ctx.facades[0];
    let conversation = "project-0-cancel";
    let hold = ctx.model.hold(HoldRule::kind(RequestKind::Agent).with_predicate(|r| r.last_user_text().contains("SELFTEST_CANCEL_ME")));
    let cancel = CancellationToken::new();
    let request = kit::run_request(conversation, CANCEL_PROMPT, facade.space());
    let run = {
        let (facade, cancel) = (facade.clone(), cancel.clone());
        tokio::spawn(async move { kit::run_to_end(&*facade, request, cancel, RUN_TIMEOUT).await })
    };
    let held = hold.wait_until_held(1, RUN_TIMEOUT).await;
    let asked = std::time::Instant::now();
    cancel.cancel();
    let ended = tokio::time::timeout(CANCEL_TIMEOUT, run).await;
    let took = asked.elapsed();
    let dropped = kit::wait_until(CANCEL_TIMEOUT, || async { hold.held_count() == 0 }).await;
    hold.release();
    let (ok, detail) = match ended {
        Ok(Ok(Ok(f))) if f.end == TurnEnd::Cancelled && held && dropped => (true, format!("cancelled in {:.0} ms; the model request was dropped", ms(took))),
        Ok(Ok(Ok(f))) => (false, format!("held {held}, ended {:?}, model request dropped {dropped}", f.end)),
        Ok(Ok(Err(e))) => (false, e.to_string()),
        Ok(Err(e)) => (false, e.to_string()),
        Err(_) => (false, format!("the turn did not end within {} s of the cancel", CANCEL_TIMEOUT.as_secs())),
    };
    report.figure(Figure::value("cancel of a held turn", "ms", ms(took)));
    if !report.check("A cancelled turn ends at once and its model request is dropped", ok, detail) {
        return;
    }
    let next = kit::run_request(conversation, "Read marker.txt after the cancel.", facade.space());
    let again = kit::run_to_end(&**facade, next, CancellationToken::new(), RUN_TIMEOUT).await;
    let (ok, detail) = match &again {
        Ok(f) if f.done_text() == Some(marker(0).as_str()) => (true, format!("answered {} in {:.0} ms", marker(0), ms(f.took))),
        Ok(f) => (false, format!("ended {:?}", f.end)),
        Err(e) => (false, e.to_string()),
    };
    report.check("The conversation answers again after the cancel", ok, detail);
}

async fn compact_every_project(ctx: &Ctx, report: &mut ReportBuilder, sessions: &HashMap<String, String>) {
    ctx.progress.report("compaction", "Compacting every project's first conversation.");
    let mut failures = Vec::new();
    for (i, facade) in ctx.facades.iter().enumerate() {
        let conversation = format!("project-{i}-0");
        let request = CompactRequest {
            request_id: uuid::Uuid::new_v4().to_string(),
            conversation_id: conversation.clone(),
            profile_id: None,
            space: facade.space().clone(),
            native_session: sessions.get(&conversation).cloned(),
        };
        match tokio::time::timeout(RUN_TIMEOUT, facade.compact_conversation(request, CancellationToken::new())).await {
            Ok(Ok(o)) if o.compacted && Some(&o.native_session_id) == sessions.get(&conversation) => {}
            Ok(Ok(o)) => failures.push(format!("{conversation}: compacted {} in {}", o.compacted, o.native_session_id)),
            Ok(Err(e)) => failures.push(format!("{conversation}: {e}")),
            Err(_) => failures.push(format!("{conversation}: no answer within {} s", RUN_TIMEOUT.as_secs())),
        }
    }
    let compaction_seen = ctx.model.requests().iter().any(|r| r.kind == RequestKind::Compaction);
    report.check(
        "Every project's first conversation compacted",
        failures.is_empty() && compaction_seen,
        if failures.is_empty() {
            format!("{} conversations compacted in their own native session", ctx.facades.len())
        } else {
            failures.join("; ")
        },
    );
}

/// One run through the facade, bounded by [`RUN_TIMEOUT`]; errors are results, not panics.
async fn one_run(
    facade: Arc<WorkspaceRuntime>,
    project: usize,
    conversation: String,
    request_id: String,
    wave: usize,
    image: Option<Vec<u8>>,
    native_session: Option<String>,
) -> RunResult {
    let mut request = kit::run_request(&conversation, &format!("Read marker.txt for wave {wave}. REQUEST_{request_id}"), facade.space());
    request.request_id = request_id.clone();
    request.native_session = native_session;
    request.images = image
        .map(|bytes| vec![ImageInput { name: format!("project-{project}.png"), media_type: "image/png".into(), bytes: Arc::new(bytes) }])
        .unwrap_or_default();
    let outcome = match kit::run_to_end(&*facade, request, CancellationToken::new(), RUN_TIMEOUT).await {
        Ok(finished) => match &finished.end {
            TurnEnd::Done { native_session_id, text } => Ok(Finished {
                streamed: finished.streamed(),
                final_text: text.clone(),
                session: native_session_id.clone(),
                tools: finished.tools().into_iter().map(|(tool, output, _)| (tool, output)).collect(),
                took: finished.took,
            }),
            TurnEnd::Cancelled => Err(PromptError::Cancelled),
            TurnEnd::Failed(f) => Err(PromptError::Failed(f.message.clone())),
        },
        Err(e) => Err(e.into()),
    };
    RunResult { project, conversation, request_id, outcome }
}

fn verify_wave(
    ctx: &Ctx,
    report: &mut ReportBuilder,
    wave: usize,
    results: &[RunResult],
    sessions: &mut HashMap<String, String>,
    wave0_requests: &mut Vec<(String, usize)>,
) {
    let n = wave + 1;
    let errors: Vec<String> =
        results.iter().filter_map(|r| r.outcome.as_ref().err().map(|e| format!("{}: {e}", r.conversation))).collect();
    report.check(
        &format!("Wave {n}: every run finished"),
        errors.is_empty(),
        if errors.is_empty() { format!("{} runs", results.len()) } else { errors.join("; ") },
    );
    let mut latencies = Vec::new();
    let (mut wrong_marker, mut no_read, mut no_skill, mut moved) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for r in results {
        let Ok(f) = &r.outcome else { continue };
        latencies.push(ms(f.took));
        let own = marker(r.project);
        if f.streamed != own || f.final_text != own {
            wrong_marker.push(format!("{}: streamed {:?}, final {:?}", r.conversation, f.streamed, f.final_text));
        }
        if !f.tools.iter().any(|(t, out)| t == "read" && out.contains(&own)) {
            no_read.push(r.conversation.clone());
        }
        if ctx.full_seed() && ctx.loads_skills() && !f.tools.iter().any(|(t, out)| t == "skill" && out.contains(SKILL_CANARY)) {
            no_skill.push(r.conversation.clone());
        }
        if wave == 0 {
            sessions.insert(r.conversation.clone(), f.session.clone());
            wave0_requests.push((r.request_id.clone(), r.project));
        } else if sessions.get(&r.conversation) != Some(&f.session) {
            moved.push(format!("{}: {:?} then {}", r.conversation, sessions.get(&r.conversation), f.session));
        }
    }
    report.check(
        &format!("Wave {n}: each run answered its own project's marker"),
        errors.is_empty() && wrong_marker.is_empty(),
        if wrong_marker.is_empty() { "streamed and final text are the run's own marker".into() } else { wrong_marker.join("; ") },
    );
    report.check(
        &format!("Wave {n}: each run read its own marker with the runtime's read tool"),
        errors.is_empty() && no_read.is_empty(),
        if no_read.is_empty() { "read output holds the project's marker".into() } else { format!("not read in {no_read:?}") },
    );
    if ctx.full_seed() && ctx.loads_skills() {
        report.check(
            &format!("Wave {n}: the skill loaded in every run"),
            errors.is_empty() && no_skill.is_empty(),
            if no_skill.is_empty() { format!("skill output holds {SKILL_CANARY}") } else { format!("not loaded in {no_skill:?}") },
        );
    }
    if wave > 0 {
        report.check(
            "Wave 2 continued each conversation's native session",
            errors.is_empty() && moved.is_empty(),
            if moved.is_empty() { "same session in both waves".into() } else { moved.join("; ") },
        );
    }
    report.figure_opt(Figure::distribution(format!("wave {n} run latency"), "ms", &latencies));
}

/// Each wave-1 request's image reached every agent call of that request, and no other image
/// reached any of its calls.
fn verify_images(
    report: &mut ReportBuilder,
    requests: &[crate::scripted_model::ObservedRequest],
    wave0_requests: &[(String, usize)],
    images: &[Vec<u8>],
) {
    let encoded: Vec<String> = images.iter().map(|b| base64::engine::general_purpose::STANDARD.encode(b)).collect();
    let mut problems = Vec::new();
    let mut calls = 0;
    for (request_id, p) in wave0_requests {
        let seen: Vec<_> = requests.iter().filter(|r| r.last_user_text().contains(request_id.as_str())).collect();
        if seen.is_empty() {
            problems.push(format!("request {request_id}: no model call"));
        }
        calls += seen.len();
        for r in seen {
            // A title request carries the prompt's text only; the agent's own calls carry all of it.
            if r.kind == RequestKind::Agent && !r.contains_text(&encoded[*p]) {
                problems.push(format!("request {request_id}: its own image is missing"));
            }
            if encoded.iter().enumerate().any(|(q, img)| q != *p && r.contains_text(img)) {
                problems.push(format!("request {request_id}: another project's image leaked in"));
            }
        }
    }
    report.check(
        "Each request's image reached only its own model calls",
        problems.is_empty() && !wave0_requests.is_empty(),
        if problems.is_empty() { format!("{} requests, {calls} model calls", wave0_requests.len()) } else { problems.join("; ") },
    );
}

/// Every run called the fixture through the gateway once, under its own request's grant.
fn verify_mcp(ctx: &Ctx, report: &mut ReportBuilder, grant_tags: &HashMap<String, String>) {
    let Some(hooks) = &ctx.hooks else { return };
    let expected = ctx.facades.len() * CONVERSATIONS_PER_PROJECT * super::reuse::WAVES;
    let results = ctx.capability_results.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let bad_results: Vec<_> =
        results.iter().filter(|r| !(r.contains(fixture::GAME_GLOBAL) && r.contains(fixture::RELAY_NAME))).collect();
    let calls = hooks.gateway().recorded_calls();
    let mut problems = Vec::new();
    if results.len() != expected || !bad_results.is_empty() {
        problems.push(format!("{} of {expected} runs saw the blueprint; unexpected results {bad_results:?}", results.len() - bad_results.len()));
    }
    if calls.len() != expected {
        problems.push(format!("{} calls through the gateway, not {expected}", calls.len()));
    }
    for call in &calls {
        if call.args["seed"] != serde_json::json!(call.request_id) {
            problems.push(format!("call of {} made with seed {}", call.request_id, call.args["seed"]));
        }
        if Some(&call.token_tag) != grant_tags.get(&call.request_id) {
            problems.push(format!("call of {} not under that request's own token", call.request_id));
        }
    }
    let distinct = calls.iter().map(|c| &c.request_id).collect::<HashSet<_>>().len();
    if distinct != expected {
        problems.push(format!("{distinct} distinct requests made calls, not {expected}"));
    }
    report.check(
        &format!("{expected} MCP calls through the gateway, each under its own request's grant"),
        problems.is_empty(),
        if problems.is_empty() { format!("{expected} calls, {distinct} requests, each with its own token") } else { problems.join("; ") },
    );
}

/// The runtime's calls went through (above); a process that is not the runtime — Hearth itself
/// here — is refused even with the gateway's secret.
async fn verify_callers(ctx: &Ctx, report: &mut ReportBuilder) {
    let Some(hooks) = &ctx.hooks else { return };
    let gateway = hooks.gateway();
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "hearth-selftest", "version": "1"}}});
    let answer = async {
        let http = reqwest::Client::builder().no_proxy().timeout(CALLER_CHECK_TIMEOUT).build().map_err(|e| e.to_string())?;
        let response = http
            .post(gateway.url())
            .header("authorization", gateway.authorization())
            .header("accept", "application/json, text/event-stream")
            .json(&init)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        Ok::<_, String>((status, response.text().await.unwrap_or_default()))
    };
    let (refused, detail) = match answer.await {
        Ok((403, body)) if body == FORBIDDEN_SENTENCE => (true, "Hearth's own process, with the secret: 403".to_string()),
        Ok((status, body)) => (false, format!("Hearth's own process got {status}: {body}")),
        Err(e) => (false, format!("the gateway did not answer: {e}")),
    };
    report.check("Only the runtime's process may call the gateway", refused, detail);
}

async fn verify_runtime(ctx: &Ctx, report: &mut ReportBuilder) {
    let mut unhealthy = Vec::new();
    for (i, facade) in ctx.facades.iter().enumerate() {
        match facade.test_connection().await {
            Ok(c) if c.healthy => {}
            Ok(_) => unhealthy.push(format!("project {i}: not healthy")),
            Err(e) => unhealthy.push(format!("project {i}: {e}")),
        }
    }
    report.check(
        "Every project's facade answers a connection check",
        unhealthy.is_empty(),
        if unhealthy.is_empty() { format!("{} facades", ctx.facades.len()) } else { unhealthy.join("; ") },
    );
    let owners: HashSet<_> = ctx.facades.iter().map(|f| f.owner_id()).collect();
    report.check(
        "One process-owning runtime behind every facade",
        owners.len() == 1 && !owners.contains(&None),
        format!("{} facades, owners {owners:?}, manager capacity {}", ctx.facades.len(), super::reuse::MANAGER_CAPACITY),
    );
    let created = ctx.runtimes.runtime_count();
    let status = ctx.process.status();
    // A recycle replaces the idle process on purpose (memory past its bound); any other launch
    // would be a restart after a death, or a second process.
    let (launches, recycles) = (status.launches, status.recycles);
    report.check(
        "One runtime launch",
        created == 1 && launches == 1 + recycles,
        format!("{created} runtime created, launched {launches} time(s), {recycles} of them to give memory back"),
    );
    let warm = RegistryConfig::default().max_warm_instances;
    report.check(
        "Idle project instances bounded inside the runtime",
        status.open_instances.len() <= warm,
        format!("{} open, bound {warm}", status.open_instances.len()),
    );
    let mut changed = Vec::new();
    for (i, space) in ctx.spaces.iter().enumerate() {
        if ctx.read_project_file(space, "marker.txt").await != Some(marker(i)) {
            changed.push(i);
        }
    }
    report.check(
        "Marker files intact",
        changed.is_empty(),
        if changed.is_empty() { format!("{} markers unchanged", ctx.spaces.len()) } else { format!("changed in projects {changed:?}") },
    );
    if ctx.remote.is_some() {
        // Measured on the host by the runtime's keeper (a pid there means nothing here).
        match status.host_memory {
            Some(m) => {
                report.figure(Figure::value("runtime RSS on the host (process tree)", "bytes", m.rss_bytes as f64));
                report.figure(Figure::value("runtime processes on the host", "count", f64::from(m.processes)));
            }
            None => tracing::warn!("the host has not reported the runtime's memory yet"),
        }
    } else if let Some(pid) = status.pid {
        match crate::host::procinfo::tree_rss(pid) {
            Ok(rss) => {
                report.figure(Figure::value("runtime RSS (process tree)", "bytes", rss.bytes as f64));
                report.figure(Figure::value("runtime processes", "count", f64::from(rss.processes)));
            }
            Err(e) => tracing::warn!(pid, error = %e, "could not read the runtime's memory"),
        }
    }
}

/// A small PNG, distinct per `width`.
fn png(width: u32) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    // Encoding a 1-pixel-high image into memory cannot fail; an empty image would fail the check.
    let _ = image::RgbaImage::from_pixel(width, 1, image::Rgba([200, 80, 20, 255])).write_to(&mut out, image::ImageFormat::Png);
    out.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_differ_per_project() {
        let (a, b) = (png(1), png(2));
        assert!(!a.is_empty() && a != b);
    }
}
