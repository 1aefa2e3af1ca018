//! The isolation check's phases, in order: seed, idle baseline, corpus, outline seed, A's
//! compaction (assembly, held, both held), the outline under the held compaction, release, and the
//! verification of what reached the model server.

use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::opencode::client::ApiError;
use crate::opencode::wire::{Event, Part, SessionStatus, StatusMap, StoredMessage};
use crate::runtime::{AgentRuntime, CompactRequest};
use crate::scripted_model::{HoldRule, RequestKind};

use super::corpus::{list_some, CorpusScan};
use super::isolation::{run_prompt, Ctx, RunOk, Sabotage, Task, CONVERSATION_A, CONVERSATION_B, MARKER};
use super::isolation_outline::{outline, seed_outline};
use super::measure::EventLog;
use super::{ms, CheckError, Figure, PromptError, ReportBuilder};

/// First prompt in a new project takes 3–10 s here, more on a loaded machine.
pub const SEED_TURN_TIMEOUT: Duration = Duration::from_secs(120);
/// One warm prompt of B (a tool call and an answer).
pub const B_PROMPT_TIMEOUT: Duration = Duration::from_secs(60);
/// From starting A's compaction until its request is held at the model server (32 MiB corpus on 2
/// busy cores included).
pub const ASSEMBLY_TIMEOUT: Duration = Duration::from_secs(180);
/// For B's request to reach the model server while both are held.
pub const B_HOLD_TIMEOUT: Duration = Duration::from_secs(30);
/// From releasing A until its compaction call returns.
pub const COMPACTION_FINISH_TIMEOUT: Duration = Duration::from_secs(180);
/// For one expected runtime event.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(30);
/// A genuinely pending model call, not a race through a fast reply.
pub const MIN_HOLD: Duration = Duration::from_secs(1);
/// Probe rounds while idle and while A is held, and the pauses between probes: enough samples
/// for a p95 that means something.
pub const PROBE_ROUNDS: usize = 20;
/// Whole B prompts while idle and while A is held (the first one's window gives the event lags).
pub const B_PROMPT_SAMPLES: usize = 20;
pub const PROBE_PAUSE: Duration = Duration::from_millis(50);
pub const ASSEMBLY_PROBE_PAUSE: Duration = Duration::from_millis(5);

const SEED_PROMPT_A: &str = "Read marker.txt to start conversation A (SELFTEST_SEED_A).";
const SEED_PROMPT_B: &str = "Read marker.txt to start conversation B.";

pub(crate) fn runtime_err(e: impl std::fmt::Display) -> CheckError {
    CheckError::Runtime(e.to_string())
}

/// A B prompt and the window it ran in (for event lags).
struct Window {
    from: Instant,
    to: Instant,
    result: Result<RunOk, PromptError>,
}

impl Window {
    /// A sentence about the outcome; `Err` when it failed or answered something else.
    fn verdict(&self, what: &str) -> Result<String, CheckError> {
        verdict(what, &self.result)
    }
}

fn verdict(what: &str, result: &Result<RunOk, PromptError>) -> Result<String, CheckError> {
    match result {
        Ok(ok) if ok.text == MARKER => Ok(format!("{what}: answered {MARKER} in {:.0} ms", ms(ok.took))),
        Ok(ok) => Err(CheckError::WrongAnswer { what: what.into(), answered: ok.text.clone(), expected: MARKER }),
        Err(e) => Err(CheckError::Prompt { what: what.into(), detail: e.to_string() }),
    }
}

pub(crate) async fn steps(ctx: &Ctx, report: &mut ReportBuilder) -> Result<(), CheckError> {
    let (a, b) = seed(ctx).await?;
    let mut log_b = EventLog::new(ctx.runtime.subscribe_session(&b).await.map_err(runtime_err)?);

    ctx.progress.report("idle", "Measuring the runtime and B while nothing else runs.");
    for _ in 0..PROBE_ROUNDS {
        probe(ctx, "idle", None, &b).await;
        tokio::time::sleep(PROBE_PAUSE).await;
    }
    let idle = prompt_b(ctx, "idle", "Read marker.txt while A is idle.").await;
    idle.verdict("B's idle prompt")?;
    more_b_prompts(ctx, "idle", "Read marker.txt while A is idle.").await?;

    corpus(ctx, &a, report).await?;
    let outline_session = seed_outline(ctx, &b, report).await?;

    // ---- A's compaction: assembly ----
    ctx.progress.report(
        "assembly",
        format!("Starting A's compaction ({} MiB corpus) and probing while it is assembled.", ctx.plan.mib),
    );
    let mut log_a = EventLog::new(ctx.runtime.subscribe_session(&a).await.map_err(runtime_err)?);
    let hold_a = ctx.model.hold(HoldRule::kind(RequestKind::Compaction).with_session(a.clone()));
    if ctx.sabotage == Some(Sabotage::RefuseB) {
        *ctx.refuse.lock().unwrap_or_else(|p| p.into_inner()) = Some(b.clone());
    }
    let compaction_started = Instant::now();
    let mut compaction = {
        let (rt, space) = (ctx.rt.clone(), ctx.space.clone());
        Task::spawn(async move {
            let request = CompactRequest {
                request_id: uuid::Uuid::new_v4().to_string(),
                conversation_id: CONVERSATION_A.into(),
                profile_id: None,
                space,
                native_session: None,
            };
            (rt.compact_conversation(request, CancellationToken::new()).await, Instant::now())
        })
    };
    let deadline = compaction_started + ASSEMBLY_TIMEOUT;
    let (mut rounds, mut probe_failures) = (0u32, Vec::new());
    let probing = async {
        while hold_a.held_count() == 0 && !compaction.is_finished() && Instant::now() < deadline {
            let (info, get, messages) = tokio::join!(
                ctx.lat.measure("assembly · runtime info", ctx.client.health()),
                ctx.lat.measure("assembly · B session", get_session(ctx, &b)),
                ctx.lat.measure("assembly · B messages", ctx.client.messages(ctx.dir(), &b)),
            );
            rounds += 1;
            probe_failures.extend([info.err(), get.err(), messages.err()].into_iter().flatten().map(|e| e.to_string()));
            tokio::time::sleep(ASSEMBLY_PROBE_PAUSE).await;
        }
    };
    let ((), early) =
        tokio::join!(probing, prompt_b(ctx, "assembly", "Read marker.txt while A's compaction is assembled."));
    let remaining = deadline.saturating_duration_since(Instant::now());
    if !hold_a.wait_until_held(1, remaining).await {
        if compaction.is_finished() {
            let outcome = compaction.join().await.map(|(r, _)| r);
            return Err(CheckError::CompactionNotSent(format!("{outcome:?}")));
        }
        return Err(CheckError::Timeout {
            what: "A's compaction request to reach the model server".into(),
            secs: ASSEMBLY_TIMEOUT.as_secs(),
        });
    }
    let request = ctx
        .model
        .requests_for_session(&a)
        .into_iter()
        .find(|r| r.kind == RequestKind::Compaction)
        .ok_or_else(|| CheckError::Missing("record of A's held compaction request".into()))?;
    let held_at = request.received_at;
    let assembly = held_at.saturating_duration_since(compaction_started);
    report.check(
        "A's compaction reached the model server and was held",
        true,
        format!("assembled and sent in {:.0} ms; {} bytes", ms(assembly), request.body_bytes.len()),
    );
    report.figure(Figure::value("compaction assembly", "ms", ms(assembly)));
    report.figure(Figure::value("compaction request size", "bytes", request.body_bytes.len() as f64));
    report.check(
        "Runtime info and B's reads answered while A's compaction was assembled",
        rounds > 0 && probe_failures.is_empty(),
        if probe_failures.is_empty() {
            format!("{rounds} probe rounds before the request reached the model server")
        } else {
            format!("{} of {rounds} probe rounds failed: {}", probe_failures.len(), probe_failures[0])
        },
    );
    let a_held = |compaction: &Task<_>| !compaction.is_finished() && hold_a.held_count() == 1;

    // ---- held ----
    ctx.progress.report("held", "A's compaction is held: probing the runtime, A, B and a whole B prompt.");
    let mut held_failures = Vec::new();
    for _ in 0..PROBE_ROUNDS {
        let (failures, status) = probe(ctx, "held", Some(&a), &b).await;
        held_failures.extend(failures);
        if !status.as_ref().is_some_and(|s| active(s, &a)) {
            held_failures.push(format!("the session status did not show A active: {:?}", status.unwrap_or_default()));
        }
        tokio::time::sleep(PROBE_PAUSE).await;
    }
    report.check(
        "Runtime info, A's and B's reads and the session status answered while A was held",
        held_failures.is_empty() && a_held(&compaction),
        held_failures
            .first()
            .cloned()
            .unwrap_or_else(|| format!("{PROBE_ROUNDS} rounds of 5 probes, A shown active in each")),
    );
    let held = prompt_b(ctx, "held", "Read marker.txt while A's compaction is held.").await;
    if held.result.is_ok() {
        more_b_prompts(ctx, "held", "Read marker.txt while A's compaction is held.").await?;
    }

    // ---- both held ----
    ctx.progress.report("both-held", "Holding B's prompt too: both sessions must show active.");
    let hold_b = ctx.model.hold(HoldRule::kind(RequestKind::Agent).with_session(b.clone()));
    let both_from = Instant::now();
    let mut b_task = {
        let (rt, space) = (ctx.rt.clone(), ctx.space.clone());
        Task::spawn(run_prompt(
            rt,
            space,
            CONVERSATION_B,
            "Read marker.txt while both are held.".into(),
            B_PROMPT_TIMEOUT + B_HOLD_TIMEOUT,
        ))
    };
    let b_caught = hold_b.wait_until_held(1, B_HOLD_TIMEOUT).await;
    let status = ctx.lat.measure("both-held · session status", ctx.client.session_status(ctx.dir())).await;
    let _ = ctx.lat.measure("both-held · B session", get_session(ctx, &b)).await;
    let both_active = b_caught && status.as_ref().is_ok_and(|s| active(s, &a) && active(s, &b));
    report.check(
        "Both sessions shown active while held",
        both_active,
        match (&status, b_caught) {
            (_, false) => format!("B's request did not reach the model server within {} s", B_HOLD_TIMEOUT.as_secs()),
            (Ok(s), true) => format!("session status: {s:?}"),
            (Err(e), true) => format!("the session status failed: {e}"),
        },
    );
    let b_released = Instant::now();
    hold_b.release();
    let both_result = b_task.join().await.map_err(PromptError::from).and_then(|r| r);
    let both_done = Instant::now();
    // B's own hold is not B's latency: time it from its release.
    let both = Window {
        from: both_from,
        to: both_done,
        result: both_result.map(|ok| RunOk { took: both_done - b_released, ..ok }),
    };
    if let Ok(ok) = &both.result {
        ctx.lat.record("both-held · B prompt after its release", ok.took, false);
    }
    let verdicts = [
        early.verdict("B's prompt during assembly"),
        held.verdict("B's prompt while A was held"),
        both.verdict("B's prompt while both were held"),
    ];
    let still_held = a_held(&compaction);
    let failures: Vec<String> = verdicts.iter().filter_map(|v| v.as_ref().err().map(|e| e.to_string())).collect();
    report.check(
        "B completed before A was released",
        failures.is_empty() && still_held,
        if !failures.is_empty() {
            let all: Vec<&str> = failures.iter().map(|s| s.as_str()).collect();
            format!("{} (A was still held: {still_held})", all.join("; "))
        } else if !still_held {
            "A's compaction finished before B did: nothing was held".to_string()
        } else {
            let oks: Vec<&String> = verdicts.iter().filter_map(|v| v.as_ref().ok()).collect();
            format!("{}; A stayed held", oks.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("; "))
        },
    );

    // ---- outline under the held compaction ----
    outline(ctx, &outline_session, report, || a_held(&compaction)).await;
    tokio::time::sleep(MIN_HOLD.saturating_sub(held_at.elapsed())).await;
    let (final_failures, _) = probe(ctx, "held", Some(&a), &b).await;
    let held_for = held_at.elapsed();
    report.check(
        "A stayed held at the model server until released",
        a_held(&compaction) && final_failures.is_empty(),
        format!("held {:.0} ms{}", ms(held_for), final_failures.first().map(|f| format!("; {f}")).unwrap_or_default()),
    );
    report.figure(Figure::value("A held", "ms", ms(held_for)));

    // ---- release ----
    ctx.progress.report("release", "Releasing A's compaction.");
    let released_at = Instant::now();
    hold_a.release();
    let finished = tokio::time::timeout(COMPACTION_FINISH_TIMEOUT, compaction.join()).await;
    let compacted_event = log_a.wait_for(released_at, EVENT_TIMEOUT, |e| matches!(*e.event, Event::SessionCompacted(_))).await;
    let summary = ctx.client.messages(ctx.dir(), &a).await.map(|m| has_summary(&m));
    let detail = match &finished {
        Err(_) => format!("the compaction did not finish within {} s of release", COMPACTION_FINISH_TIMEOUT.as_secs()),
        Ok(Err(e)) => format!("the task running the compaction failed: {e}"),
        Ok(Ok((Err(e), _))) => format!("the compaction failed: {e}"),
        Ok(Ok((Ok(outcome), at))) => {
            report.figure(Figure::value(
                "A completion after release",
                "ms",
                ms(at.saturating_duration_since(released_at)),
            ));
            format!(
                "compacted: {}, {:.0} ms after release; session.compacted event: {}; summary message stored: {}",
                outcome.compacted,
                ms(at.saturating_duration_since(released_at)),
                compacted_event.map_or("not seen".into(), |t| format!("after {:.0} ms", ms(t - released_at))),
                summary.as_ref().map_or_else(|e| e.to_string(), |s| s.to_string()),
            )
        }
    };
    let completed =
        matches!(&finished, Ok(Ok((Ok(o), _))) if o.compacted) && compacted_event.is_some() && summary == Ok(true);
    report.check("A's compaction completed after release", completed, detail);

    // ---- verify ----
    ctx.progress.report("verify", "Checking what reached the model server.");
    verify_corpus(ctx, &request.body_bytes, request.contains_text("SELFTEST_SEED_A"), report);
    let b_actions = |w: &Window, floor: Option<Instant>| -> Vec<Instant> {
        ctx.model
            .requests_for_session(&b)
            .iter()
            .filter(|r| r.kind == RequestKind::Agent && r.received_at >= w.from && r.received_at < w.to)
            .map(|r| floor.map_or(r.received_at, |f| r.received_at.max(f)))
            .collect()
    };
    for (phase, window, floor) in [
        ("idle", &idle, None),
        ("assembly", &early, None),
        ("held", &held, None),
        ("both-held", &both, Some(b_released)),
    ] {
        let lags = log_b.output_lags(&b_actions(window, floor));
        report.figure_opt(Figure::distribution(format!("event lag · {phase}"), "ms", &lags));
    }
    report.figure_opt(Figure::distribution("event lag · release", "ms", &log_a.output_lags(&[released_at])));
    for f in ctx.lat.figures() {
        report.figure(f);
    }
    report.figure_opt(ratio(ctx, "B prompt held/idle (median)", "held · B prompt", "idle · B prompt", |f| f.median));
    report.figure_opt(ratio(ctx, "B prompt held/idle (p95)", "held · B prompt", "idle · B prompt", |f| f.p95));
    report.figure_opt(ratio(ctx, "GET held/idle (median)", "held · B session", "idle · B session", |f| f.median));
    report.figure_opt(ratio(ctx, "GET held/idle (p95)", "held · B session", "idle · B session", |f| f.p95));
    Ok(())
}

/// One real turn in A and in B (tool use), concurrently: gives both native sessions and a real
/// tool part to copy.
async fn seed(ctx: &Ctx) -> Result<(String, String), CheckError> {
    ctx.progress.report("seed", "Seeding conversations A and B with one real turn each.");
    let (ra, rb) = tokio::join!(
        run_prompt(ctx.rt.clone(), ctx.space.clone(), CONVERSATION_A, SEED_PROMPT_A.into(), SEED_TURN_TIMEOUT),
        run_prompt(ctx.rt.clone(), ctx.space.clone(), CONVERSATION_B, SEED_PROMPT_B.into(), SEED_TURN_TIMEOUT),
    );
    for (name, r) in [("A", ra), ("B", rb)] {
        verdict(&format!("Seeding conversation {name}"), &r)?;
    }
    let session = |c: &str| {
        ctx.runtime
            .native_session(c)
            .ok_or_else(|| CheckError::Missing(format!("native session for conversation {c} after its first turn")))
    };
    Ok((session(CONVERSATION_A)?, session(CONVERSATION_B)?))
}

/// The rest of a phase's [`B_PROMPT_SAMPLES`], each of which must answer the marker.
async fn more_b_prompts(ctx: &Ctx, phase: &str, prompt: &str) -> Result<(), CheckError> {
    for _ in 1..B_PROMPT_SAMPLES {
        prompt_b(ctx, phase, prompt).await.verdict(&format!("B's {phase} prompt"))?;
    }
    Ok(())
}

async fn prompt_b(ctx: &Ctx, phase: &str, prompt: &str) -> Window {
    let from = Instant::now();
    let result = run_prompt(ctx.rt.clone(), ctx.space.clone(), CONVERSATION_B, prompt.into(), B_PROMPT_TIMEOUT).await;
    ctx.lat.record(&format!("{phase} · B prompt"), from.elapsed(), result.is_err());
    Window { from, to: Instant::now(), result }
}

async fn get_session(ctx: &Ctx, id: &str) -> Result<Value, ApiError> {
    let route = format!("/session/{id}");
    ctx.client.send(&route, ctx.client.request(reqwest::Method::GET, &route, Some(ctx.dir()))).await
}

/// One round of reads: runtime info, A's session (if given), B's session and messages, and the
/// session status. Returns the failures and the status.
async fn probe(ctx: &Ctx, phase: &str, a: Option<&str>, b: &str) -> (Vec<String>, Option<StatusMap>) {
    let name = |op: &str| format!("{phase} · {op}");
    let (info, get_a, get_b, messages_b, status) = tokio::join!(
        ctx.lat.measure(&name("runtime info"), ctx.client.health()),
        async {
            match a {
                Some(a) => ctx.lat.measure(&name("A session"), get_session(ctx, a)).await.map(Some),
                None => Ok(None),
            }
        },
        ctx.lat.measure(&name("B session"), get_session(ctx, b)),
        ctx.lat.measure(&name("B messages"), ctx.client.messages(ctx.dir(), b)),
        ctx.lat.measure(&name("session status"), ctx.client.session_status(ctx.dir())),
    );
    let failures = [info.err(), get_a.err(), get_b.err(), messages_b.err(), status.as_ref().err().cloned()]
        .into_iter()
        .flatten()
        .map(|e| format!("{phase} probe failed: {e}"))
        .collect();
    (failures, status.ok())
}

/// `GET /session/status` lists busy and retrying sessions; idle ones are left out.
fn active(status: &StatusMap, session: &str) -> bool {
    status.get(session).is_some_and(|s| *s != SessionStatus::Idle)
}

fn has_summary(messages: &[StoredMessage]) -> bool {
    messages.iter().any(|m| m.info.is_compaction_summary())
}

/// Store the corpus in A as user messages the model is not asked to answer.
async fn corpus(ctx: &Ctx, a: &str, report: &mut ReportBuilder) -> Result<(), CheckError> {
    let plan = ctx.plan;
    if plan.items() == 0 {
        ctx.progress.report("corpus", "No context corpus requested.");
        return Ok(());
    }
    let model_calls = || ctx.model.requests_for_session(a).iter().filter(|r| r.kind != RequestKind::Title).count();
    let calls_before = model_calls();
    let started = Instant::now();
    for i in 0..plan.items() {
        if i % 4 == 0 {
            ctx.progress.report(
                "corpus",
                format!("Storing the {} MiB corpus in A: item {} of {}.", plan.mib, i + 1, plan.items()),
            );
        }
        ctx.lat
            .measure("corpus · store item", ctx.client.store_user_message(ctx.dir(), a, &plan.item(i)))
            .await
            .map_err(|e| CheckError::Store { what: format!("Storing corpus item {i} in A"), detail: e.to_string() })?;
    }
    report.figure(Figure::value("corpus store time", "ms", ms(started.elapsed())));
    let messages = ctx.client.messages(ctx.dir(), a).await.map_err(runtime_err)?;
    let mut stored = CorpusScan::default();
    for text in messages.iter().flat_map(|m| &m.parts).filter_map(|p| match p {
        Part::Text(t) => Some(t.text.as_str()),
        _ => None,
    }) {
        let scan = CorpusScan::of(text.as_bytes());
        stored.canaries.extend(scan.canaries);
        stored.fill_bytes += scan.fill_bytes;
    }
    let missing = stored.missing(&plan);
    let calls = model_calls() - calls_before;
    report.check(
        "Corpus stored in A without calling the model",
        missing.is_empty() && stored.fill_bytes == plan.fill_bytes() && calls == 0,
        format!(
            "{} of {} items ({} bytes) stored{}; {} fill bytes of {}; model calls while storing: {calls}",
            plan.items() - missing.len(),
            plan.items(),
            plan.total_bytes(),
            if missing.is_empty() { String::new() } else { format!(", missing {}", list_some(&missing)) },
            stored.fill_bytes,
            plan.fill_bytes(),
        ),
    );
    report.figure(Figure::value("corpus", "bytes", plan.total_bytes() as f64));
    Ok(())
}

/// The recorded compaction request carries A's conversation and, byte for byte, its corpus.
fn verify_corpus(ctx: &Ctx, body: &[u8], has_seed: bool, report: &mut ReportBuilder) {
    report.check(
        "A's conversation reached the model server",
        has_seed,
        if has_seed {
            "the compaction request carries A's first prompt"
        } else {
            "A's first prompt is missing from the compaction request"
        },
    );
    let plan = ctx.plan;
    if plan.items() == 0 {
        return;
    }
    let scan = CorpusScan::of(body);
    let missing = scan.missing(&plan);
    report.check(
        "Every corpus canary reached the model server",
        missing.is_empty(),
        if missing.is_empty() {
            format!("all {} canaries in a {}-byte compaction request", plan.items(), body.len())
        } else {
            format!("{} of {} canaries missing: {}", missing.len(), plan.items(), list_some(&missing))
        },
    );
    report.check(
        "Every fill byte reached the model server",
        scan.fill_bytes >= plan.fill_bytes(),
        format!("{} fill bytes received of {} stored", scan.fill_bytes, plan.fill_bytes()),
    );
}

fn ratio(ctx: &Ctx, name: &str, held: &str, idle: &str, at: fn(&Figure) -> f64) -> Option<Figure> {
    let value = |op: &str| Figure::distribution(op, "ms", &ctx.lat.of(op).0).map(|f| at(&f));
    let (h, i) = (value(held)?, value(idle)?);
    (i > 0.0).then(|| Figure::value(name, "ratio", h / i))
}
