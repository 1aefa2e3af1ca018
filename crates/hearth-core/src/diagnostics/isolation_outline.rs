//! The isolation check's outline phase: a 128-turn conversation stored without the model, and its
//! outline read while A's compaction is held, with heartbeats alongside.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use serde_json::json;

use crate::opencode::wire::{Part, ToolState};

use super::isolation::Ctx;
use super::isolation_steps::runtime_err;
use super::outline::{conversation_outline, ToolCount};
use super::{ms, CheckError, Figure, ReportBuilder};

pub const OUTLINE_TIMEOUT: Duration = Duration::from_secs(60);
/// A heartbeat slower than this means the runtime stalled under the outline read.
pub const MAX_HEARTBEAT_LATENCY: Duration = Duration::from_secs(5);
/// The outline conversation: turns, and the tool output stored in each.
pub const OUTLINE_ENTRIES: usize = 128;
pub const OUTLINE_TOOL_OUTPUT_BYTES: usize = 128 * 1024;
/// Parts written at once while seeding the outline conversation.
pub const OUTLINE_SEED_CONCURRENCY: usize = 8;
pub const HEARTBEAT_PAUSE: Duration = Duration::from_millis(5);

/// A 128-turn conversation stored without the model: each turn a stored prompt carrying a copy of
/// a real tool part (from B's first turn) with a larger output.
pub(crate) async fn seed_outline(ctx: &Ctx, b: &str, report: &mut ReportBuilder) -> Result<String, CheckError> {
    ctx.progress.report("outline-seed", format!("Storing a {OUTLINE_ENTRIES}-turn conversation for the outline."));
    let started = Instant::now();
    // The stored part as the runtime sent it: copied as a template, so kept as JSON.
    let b_messages = ctx.client.messages_json(ctx.dir(), b).await.map_err(runtime_err)?;
    let template = b_messages
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["parts"].as_array().into_iter().flatten())
        .find(|p| serde_json::from_value::<Part>((*p).clone()).is_ok_and(|part| matches!(part, Part::Tool(t) if matches!(t.state, ToolState::Completed { .. }))))
        .cloned()
        .ok_or_else(|| CheckError::Missing("completed tool call in B's first turn to copy".into()))?;
    let permission = json!([{ "permission": "external_directory", "pattern": "*", "action": "deny" }]);
    let session =
        ctx.client.create_session(ctx.dir(), "Hearth self-test outline", &permission).await.map_err(runtime_err)?;
    let mut message_ids = Vec::with_capacity(OUTLINE_ENTRIES);
    for i in 0..OUTLINE_ENTRIES {
        let id = ctx.client.store_user_message(ctx.dir(), &session, &format!("Outline turn {i}: read marker.txt")).await.map_err(runtime_err)?;
        message_ids.push(id);
    }
    let output = "x".repeat(OUTLINE_TOOL_OUTPUT_BYTES);
    // Owned items: a borrowed stream item trips the compiler's Send check of the whole check.
    futures::stream::iter(message_ids.into_iter().enumerate())
        .map(|(i, message): (usize, String)| {
            let mut part = template.clone();
            let part_id = format!("prt_zzhearthoutline{i:011}");
            part["id"] = json!(part_id);
            part["messageID"] = json!(message);
            part["sessionID"] = json!(session);
            part["callID"] = json!(format!("call_outline_{i}"));
            part["state"]["output"] = json!(output);
            let route = format!("/session/{session}/message/{message}/part/{part_id}");
            async move {
                ctx.client
                    .send(&route, ctx.client.request(reqwest::Method::PATCH, &route, Some(ctx.dir())).json(&part))
                    .await
            }
        })
        .buffer_unordered(OUTLINE_SEED_CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .map_err(|e| CheckError::Store { what: "Storing a tool call in the outline conversation".into(), detail: e.to_string() })?;
    report.figure(Figure::value("outline conversation seed time", "ms", ms(started.elapsed())));
    Ok(session)
}

/// The outline of the 128-turn conversation while A is held, with heartbeats alongside.
pub(crate) async fn outline(ctx: &Ctx, session: &str, report: &mut ReportBuilder, a_held: impl Fn() -> bool) {
    ctx.progress
        .report("outline", format!("Outlining a {OUTLINE_ENTRIES}-turn conversation under the held compaction."));
    let outlining = AtomicBool::new(true);
    let started = Instant::now();
    let fetch = async {
        let fetched = ctx.lat.measure("outline · 128 entries", async {
            let messages = ctx.client.messages(ctx.dir(), session).await.map_err(|e| e.to_string())?;
            Ok::<_, String>(conversation_outline(&messages))
        });
        let result = tokio::time::timeout(OUTLINE_TIMEOUT, fetched)
            .await
            .unwrap_or_else(|_| Err(format!("no outline within {} s", OUTLINE_TIMEOUT.as_secs())));
        outlining.store(false, Ordering::SeqCst);
        (result, started.elapsed())
    };
    let heartbeats = async {
        let (mut sent, mut failed, mut during) = (0u32, 0u32, 0u32);
        while outlining.load(Ordering::SeqCst) {
            let r = ctx.lat.measure("outline · heartbeat", ctx.client.health()).await;
            sent += 1;
            failed += u32::from(r.is_err());
            during += u32::from(outlining.load(Ordering::SeqCst));
            tokio::time::sleep(HEARTBEAT_PAUSE).await;
        }
        (sent, failed, during)
    };
    let ((result, took), (sent, failed, during)) = tokio::join!(fetch, heartbeats);
    let expected = vec![ToolCount { tool: "read".into(), count: 1 }];
    let detail = match &result {
        Ok(entries)
            if entries.len() == OUTLINE_ENTRIES && entries.iter().all(|e| e.tool_calls == 1 && e.tools == expected) =>
        {
            Ok(format!("{OUTLINE_ENTRIES} entries, one read call each, in {:.0} ms", ms(took)))
        }
        Ok(entries) => Err(format!(
            "the outline has {} entries (expected {OUTLINE_ENTRIES} with one read call each)",
            entries.len()
        )),
        Err(e) => Err(format!("the outline failed: {e}")),
    };
    let held = a_held();
    report.check(
        "Outline of a 128-entry conversation completed under the held compaction",
        detail.is_ok() && held,
        match detail {
            Ok(d) if held => format!("{d}; A still held"),
            Ok(d) => format!("{d}, but A was no longer held"),
            Err(e) => e,
        },
    );
    let slowest = ctx.lat.of("outline · heartbeat").0.into_iter().fold(0.0, f64::max);
    report.check(
        "Heartbeats kept answering during the outline",
        sent > 0 && failed == 0 && slowest <= ms(MAX_HEARTBEAT_LATENCY),
        format!(
            "{sent} heartbeats sent ({during} completed while the outline ran), {failed} failed, slowest {slowest:.0} ms (limit {} ms)",
            MAX_HEARTBEAT_LATENCY.as_millis()
        ),
    );
    report.figure(Figure::value("heartbeats completed during the outline", "count", f64::from(during)));
}
