//! Helpers of the runtime benchmark: finding the runtime, timing one turn each way, statistics and
//! the printed table. Nothing here asserts on speed: figures are printed for people to read.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use hearth_core::diagnostics::kit;
use hearth_core::host::procinfo::TreeRss;
use hearth_core::opencode::client::Client;
use hearth_core::opencode::event_hub::{EventHub, HubEvent};
use hearth_core::opencode::wire::{Event, Part, Role, StoredMessage};
use hearth_core::runtime::{AgentRuntime, RuntimeEvent, TurnEnd, WorkspaceRuntime};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Bound on one turn. A first prompt in a new project takes 3–10 s on a 2-core machine; a warm one
/// well under 1 s. Past this the bench reports the run as failed rather than hanging.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(60);
const BYTES_PER_MIB: f64 = 1024.0 * 1024.0;
const MS_PER_SEC: f64 = 1000.0;
/// Width of the first (label) column of the printed tables.
const LABEL_WIDTH: usize = 40;

/// One facade run, from `run()` to its `Done` as the caller receives it. Checks the reply text.
pub async fn facade_turn(facade: &WorkspaceRuntime, conversation: &str, prompt: &str, expect: &str) -> Result<Duration, String> {
    Ok(timed_facade_turn(facade, conversation, prompt, expect).await?.done)
}

/// When a facade run's events reached the caller, counted from `run()`.
pub struct FacadeTiming {
    /// The `Session` event, sent just before the prompt goes out: the facade's own overhead.
    pub session: Duration,
    pub done: Duration,
}

/// [`facade_turn`] with the time to the `Session` event as well.
pub async fn timed_facade_turn(facade: &WorkspaceRuntime, conversation: &str, prompt: &str, expect: &str) -> Result<FacadeTiming, String> {
    let request = kit::run_request(conversation, prompt, facade.space());
    let start = Instant::now();
    let mut stream = facade.run(request, CancellationToken::new());
    let mut session = Duration::ZERO;
    let outcome = tokio::time::timeout(RUN_TIMEOUT, async {
        while let Some(ev) = stream.next().await {
            match ev {
                RuntimeEvent::Session { .. } => session = start.elapsed(),
                RuntimeEvent::Ended { end: TurnEnd::Done { text, .. } } => return Ok((start.elapsed(), text)),
                RuntimeEvent::Ended { end } => return Err(format!("{end:?}")),
                _ => {}
            }
        }
        Err("the run's stream ended without its end".to_string())
    })
    .await
    .map_err(|_| format!("facade run in {conversation} took over {} s", RUN_TIMEOUT.as_secs()))??;
    let (done, text) = outcome;
    if text != expect {
        return Err(format!("facade run in {conversation} answered {text:?}, expected {expect:?}"));
    }
    Ok(FacadeTiming { session, done })
}

/// One raw turn: `prompt_async`, then wait on our own event stream for the session's
/// `session.idle`, as the caller receives it (the same end the facade's run waits for).
pub async fn raw_turn(client: &Client, hub: &Arc<EventHub>, directory: &str, session: &str, body: &Value) -> Result<Duration, String> {
    // Subscribe first so the idle event cannot slip past between the prompt and the subscription.
    let mut sub = hub.subscribe(session);
    let start = Instant::now();
    client.prompt_async(directory, session, body).await.map_err(|e| e.to_string())?;
    tokio::time::timeout(RUN_TIMEOUT, async {
        while let Some(ev) = sub.rx.recv().await {
            match ev {
                HubEvent::Event { event, .. } if matches!(*event, Event::SessionIdle(_)) => return Ok(start.elapsed()),
                HubEvent::Reconnected => return Err("the event stream reconnected mid-turn; figures would be wrong".to_string()),
                _ => {}
            }
        }
        Err("the event stream closed".to_string())
    })
    .await
    .map_err(|_| format!("raw turn took over {} s", RUN_TIMEOUT.as_secs()))?
}

/// The text of the last assistant message of a session.
pub fn last_assistant_text(messages: &[StoredMessage]) -> String {
    let Some(last) = messages.iter().rev().find(|m| m.info.role == Role::Assistant) else {
        return String::new();
    };
    last.parts.iter().filter_map(|p| match p { Part::Text(t) => Some(t.text.as_str()), _ => None }).collect()
}

/// min / median / max of a sample, in milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub n: usize,
}

impl Summary {
    pub fn of(samples: &[Duration]) -> Self {
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * MS_PER_SEC).collect();
        ms.sort_by(f64::total_cmp);
        let n = ms.len();
        let median = match n {
            0 => f64::NAN,
            _ if n % 2 == 1 => ms[n / 2],
            _ => (ms[n / 2 - 1] + ms[n / 2]) / 2.0,
        };
        Self { min: ms.first().copied().unwrap_or(f64::NAN), median, max: ms.last().copied().unwrap_or(f64::NAN), n }
    }
}

pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / BYTES_PER_MIB
}

pub fn print_timing_header() {
    println!("  {:<LABEL_WIDTH$} {:>5} {:>9} {:>10} {:>9}", "path", "n", "min ms", "median ms", "max ms");
}

pub fn print_timing_row(label: &str, s: &Summary) {
    println!("  {label:<LABEL_WIDTH$} {:>5} {:>9.0} {:>10.0} {:>9.0}", s.n, s.min, s.median, s.max);
}

pub fn print_memory_header() {
    println!("  {:<LABEL_WIDTH$} {:>9} {:>10} {:>15}", "state", "RSS MiB", "processes", "open instances");
}

pub fn print_memory_row(label: &str, rss: &TreeRss, open_instances: usize) {
    println!("  {label:<LABEL_WIDTH$} {:>9.1} {:>10} {:>15}", mib(rss.bytes), rss.processes, open_instances);
}

