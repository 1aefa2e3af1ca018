//! Recovery against the real runtime: a turn whose event stream is cut (before its first delta, in
//! the middle of its text, between two tool steps, ten times) ends with exactly the reply the
//! runtime stored for it; a runtime killed mid-turn ends every running turn with a sentence at
//! once, and the next message starts it again and continues the same native session; a runtime past
//! its memory bound is replaced only when no turn runs, and every conversation continues; nor is a
//! process someone reads directly.

use crate::support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use hearth_core::app::{ConversationUpdateKind, Hearth};
use hearth_core::opencode::OpenCodeRuntime;
use hearth_core::runtime::*;
use hearth_core::scripted_model::{default_reply, Gate, HoldRule, Reply, RequestKind, Script, ScriptedModelServer};
use hearth_core::store::Message;
use hearth_core::space::{resolve_local, ExecutionSpace};
use hearth_core::store::MessageStatus;
use serde_json::json;
use support::proxy::SeverableProxy;
use support::{FoundRuntime, TURN_TIMEOUT};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const MARKER: &str = "PROJECT_9";
/// Tool steps of the turn whose stream is cut at each of them.
const MANY_DROPS: usize = 10;
/// A running turn ends this soon after its runtime is killed.
const DEATH_NOTICED_WITHIN: Duration = Duration::from_secs(2);
/// Bound on waiting for the runtime to reach a state (busy at the model, idle after a gap).
const STATE_TIMEOUT: Duration = Duration::from_secs(60);

/// A run in flight: its events as they arrive, and its end.
struct Running {
    events: mpsc::UnboundedReceiver<RuntimeEvent>,
    seen: Vec<RuntimeEvent>,
}

impl Running {
    fn start(rt: &OpenCodeRuntime, request: RunRequest) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut stream = rt.run(request, CancellationToken::new());
        tokio::spawn(async move {
            while let Some(ev) = stream.next().await {
                let _ = tx.send(ev);
            }
        });
        Self { events: rx, seen: Vec::new() }
    }

    /// Wait for an event matching `pred`.
    async fn until(&mut self, pred: impl Fn(&RuntimeEvent) -> bool) {
        if self.seen.iter().any(&pred) {
            return;
        }
        let found = tokio::time::timeout(TURN_TIMEOUT, async {
            while let Some(ev) = self.events.recv().await {
                let hit = pred(&ev);
                self.seen.push(ev);
                if hit {
                    return true;
                }
            }
            false
        })
        .await;
        assert!(matches!(found, Ok(true)), "the event never came; seen {:?}", self.seen);
    }

    /// Every event to the end, and the end.
    async fn end(mut self) -> (Vec<RuntimeEvent>, TurnEnd) {
        self.until(RuntimeEvent::is_terminal).await;
        let Some(RuntimeEvent::Ended { end }) = self.seen.last().cloned() else { unreachable!() };
        (self.seen, end)
    }
}

/// The reply streamed exactly once and each tool call reported once, and the turn ended with
/// `expect` as its text.
fn assert_exact(events: &[RuntimeEvent], end: &TurnEnd, expect: &str, tools: usize) {
    let TurnEnd::Done { text, .. } = end else { panic!("the turn did not finish: {end:?}; events {events:?}") };
    assert_eq!(text, expect, "the final text is the stored reply");
    let streamed: String = events.iter().filter_map(|e| match e { RuntimeEvent::TextDelta { text } => Some(text.as_str()), _ => None }).collect();
    assert_eq!(streamed, expect, "the text streamed once, whole: {events:?}");
    let mut started: HashMap<&str, usize> = HashMap::new();
    let mut finished: HashMap<&str, usize> = HashMap::new();
    for e in events {
        match e {
            RuntimeEvent::ToolStarted { call_id, .. } => *started.entry(call_id).or_default() += 1,
            RuntimeEvent::ToolFinished { call_id, error: None, output, .. } => {
                assert!(output.contains(MARKER), "{output}");
                *finished.entry(call_id).or_default() += 1;
            }
            RuntimeEvent::ToolFinished { error: Some(e), .. } => panic!("a tool failed: {e}"),
            _ => {}
        }
    }
    assert_eq!((started.len(), finished.len()), (tools, tools), "{events:?}");
    assert!(started.values().chain(finished.values()).all(|n| *n == 1), "a tool event came twice: {events:?}");
}

/// Until the runtime reports the session idle (the turn ran to its end during a gap).
async fn until_idle(rt: &OpenCodeRuntime, space: &ExecutionSpace, session: &str) {
    let client = rt.client().await.unwrap();
    let idle = support::wait_until(STATE_TIMEOUT, || {
        let client = client.clone();
        async move { client.session_status(space.root_str()).await.is_ok_and(|s| !s.contains_key(session)) }
    })
    .await;
    assert!(idle, "the session never went idle");
}

fn session_of(events: &[RuntimeEvent]) -> String {
    events.iter().find_map(|e| match e { RuntimeEvent::Session { native_session_id, .. } => Some(native_session_id.clone()), _ => None }).expect("a session")
}

/// The agent: `GAP-TEXT` answers in two halves with a gate between; `GAP-MANY` reads the marker
/// ten times, one step each; otherwise the default (read, then answer the marker).
fn script(gate: Gate) -> Script {
    Script::custom(move |r| {
        let prompt = r.last_user_text();
        let results = r.tool_results_after_last_user();
        if r.kind == RequestKind::Agent && prompt.contains("GAP-TEXT") {
            return Reply::PausedText { before: "PROJECT_".into(), after: "9 done".into(), gate: gate.clone() };
        }
        if r.kind == RequestKind::Agent && prompt.contains("GAP-MANY") {
            return if results.len() < MANY_DROPS { Reply::tool_call("read", json!({ "filePath": "marker.txt" })) } else { Reply::text(MARKER) };
        }
        default_reply(r)
    })
}

struct Rig {
    _tmp: tempfile::TempDir,
    space: ExecutionSpace,
    model: ScriptedModelServer,
    proxy: SeverableProxy,
    rt: OpenCodeRuntime,
    gate: Gate,
}

async fn rig(found: &FoundRuntime) -> Rig {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().canonicalize().unwrap().join("project");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(project.join("marker.txt"), MARKER).unwrap();
    let space = resolve_local(&project).unwrap();
    let gate = Gate::new();
    let model = ScriptedModelServer::start(script(gate.clone())).unwrap();
    let proxy = SeverableProxy::start().await;
    let host = RuntimeHost { connect_via: Some(proxy.via()), ..Default::default() };
    let rt = OpenCodeRuntime::new(support::scripted_config(found, &model, false), tmp.path().join("rt"), host);
    Rig { _tmp: tmp, space, model, proxy, rt, gate }
}

/// Cut the stream and keep it down while `during` runs, then let it reconnect.
async fn gap<F: std::future::Future<Output = ()>>(proxy: &SeverableProxy, during: F) {
    proxy.hold_reconnects(true);
    assert_eq!(proxy.sever(), 1, "one event stream was open");
    during.await;
    let before = proxy.streams_opened();
    proxy.hold_reconnects(false);
    assert!(support::wait_until(STATE_TIMEOUT, || async { proxy.streams_opened() > before }).await, "the stream never came back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_turn_whose_event_stream_drops_ends_with_exactly_its_stored_reply() {
    let Some(found) = support::require_runtime().await else { return };
    let r = rig(&found).await;

    // 1. Before the first delta: the model call is held, the stream cut, and the whole turn (a
    //    tool step, then the answer) runs while the stream is down.
    let hold = r.model.hold(HoldRule::kind(RequestKind::Agent).with_predicate(|q| q.last_user_text().contains("GAP-BEFORE")));
    let mut run = Running::start(&r.rt, support::run_request("before", "read marker.txt GAP-BEFORE", &r.space));
    assert!(hold.wait_until_held(1, TURN_TIMEOUT).await);
    run.until(|e| matches!(e, RuntimeEvent::Session { .. })).await;
    let session = session_of(&run.seen);
    gap(&r.proxy, async {
        hold.release();
        until_idle(&r.rt, &r.space, &session).await;
    })
    .await;
    let (events, end) = run.end().await;
    assert_exact(&events, &end, MARKER, 1);

    // 2. In the middle of its text: the first half streamed, the stream cut, the rest written
    //    while it is down.
    let mut run = Running::start(&r.rt, support::run_request("middle", "GAP-TEXT", &r.space));
    run.until(|e| matches!(e, RuntimeEvent::TextDelta { .. })).await;
    let session = session_of(&run.seen);
    gap(&r.proxy, async {
        r.gate.open();
        until_idle(&r.rt, &r.space, &session).await;
    })
    .await;
    let (events, end) = run.end().await;
    assert_exact(&events, &end, "PROJECT_9 done", 0);

    // 3. Between two tool steps: the first step's result is in, the answer is held; the stream
    //    is cut, and the answer is written while it is down.
    let hold = r.model.hold(HoldRule::kind(RequestKind::Agent).with_predicate(|q| q.last_user_text().contains("GAP-STEPS") && !q.tool_results_after_last_user().is_empty()));
    let mut run = Running::start(&r.rt, support::run_request("steps", "read marker.txt GAP-STEPS", &r.space));
    assert!(hold.wait_until_held(1, TURN_TIMEOUT).await);
    run.until(|e| matches!(e, RuntimeEvent::ToolFinished { .. })).await;
    let session = session_of(&run.seen);
    gap(&r.proxy, async {
        hold.release();
        until_idle(&r.rt, &r.space, &session).await;
    })
    .await;
    let (events, end) = run.end().await;
    assert_exact(&events, &end, MARKER, 1);

    // 4. Ten drops in one turn: each of its ten steps is held at the model, the stream cut, the
    //    step released while the stream is down, and the stream let back before the next.
    let held = Arc::new(Mutex::new(0usize));
    let counted = held.clone();
    let hold = r.model.hold(HoldRule::kind(RequestKind::Agent).with_predicate(move |q| {
        let ours = q.last_user_text().contains("GAP-MANY");
        if ours {
            *counted.lock().unwrap() += 1;
        }
        ours
    }));
    let opened = r.proxy.streams_opened();
    let run = Running::start(&r.rt, support::run_request("many", "GAP-MANY", &r.space));
    for step in 1..=MANY_DROPS {
        assert!(hold.wait_until_held(1, TURN_TIMEOUT).await, "step {step} never reached the model");
        gap(&r.proxy, async {
            hold.release_held();
        })
        .await;
    }
    hold.release();
    let (events, end) = run.end().await;
    assert_exact(&events, &end, MARKER, MANY_DROPS);
    assert!(r.proxy.streams_opened() >= opened + MANY_DROPS, "the stream came back after each of the {MANY_DROPS} drops");
    // Each step was seen by the hold (the answer's request may come after the hold was released).
    assert!(*held.lock().unwrap() >= MANY_DROPS);

    assert_eq!(r.rt.status().launches, 1, "the runtime itself never stopped");
    r.rt.dispose().await;
    r.model.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_runtime_killed_mid_turn_ends_the_turn_at_once_and_the_next_message_continues() {
    if support::require_runtime().await.is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().canonicalize().unwrap().join("project");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(project.join("marker.txt"), MARKER).unwrap();
    let data = tmp.path().join("data");
    let updates = Arc::new(support::Recorder::default());
    let hearth = Hearth::open(support::app_options(&data, support::app_locate_inputs()), updates.clone()).await.unwrap();
    let p = hearth.store().add_project(&project).unwrap();
    let c = hearth.store().create_conversation(&p.id, "Killed").unwrap();

    // A turn held at the built-in model ("[hold]" holds it until stopped).
    let sent = hearth.send_message(&c.id, "[hold] wait for me".into(), vec![]).await.unwrap();
    let held = support::wait_until(TURN_TIMEOUT, || async { hearth.builtin_model().is_some_and(|m| m.requests().iter().any(|r| r.last_user_text().contains("[hold]"))) }).await;
    assert!(held, "the turn never reached the model");
    let status = hearth.runtime_statuses();
    let pid = status[0].runtime.pid.expect("a running runtime");
    let session_before = hearth.store().get_conversation(&c.id).unwrap().native_session_id.expect("a native session");

    let killed = Instant::now();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL).unwrap();
    let reply = updates.finished(&c.id, 1).await;
    let took = killed.elapsed();
    assert!(took < DEATH_NOTICED_WITHIN, "the turn ended {took:?} after the runtime died");
    assert_eq!(reply.status, MessageStatus::Error);
    assert!(reply.error.as_deref().unwrap_or("").contains("stopped unexpectedly"), "{reply:?}");
    let ended = updates.0.lock().unwrap().iter().any(|u| {
        matches!(&u.kind, ConversationUpdateKind::Runtime { event: RuntimeEvent::Ended { end: TurnEnd::Failed(f) }, .. } if f.kind == FailureKind::RuntimeDied)
    });
    assert!(ended, "the window was told the runtime died");
    let messages = hearth.list_messages(c.id.clone()).await.unwrap();
    assert_eq!(messages[0].id, sent.id);
    assert_eq!(messages[0].text, "[hold] wait for me", "the user's message is kept");
    assert!(!hearth.is_running(&c.id));

    // The next message starts the runtime again and continues the same native session.
    hearth.send_message(&c.id, "read marker.txt".into(), vec![]).await.unwrap();
    let reply = updates.finished(&c.id, 2).await;
    assert_eq!((reply.status, reply.text.as_str()), (MessageStatus::Done, MARKER), "{reply:?}");
    let session_after = hearth.store().get_conversation(&c.id).unwrap().native_session_id.unwrap();
    assert_eq!(session_after, session_before, "the conversation continues its native session");
    let continued = hearth.builtin_model().unwrap().requests().into_iter().filter(|r| r.last_user_text().contains("read marker.txt")).all(|r| r.contains_text("[hold] wait for me"));
    assert!(continued, "the model saw the earlier message when the conversation continued");
    let status = hearth.runtime_statuses();
    assert_eq!(status[0].runtime.launches, 2, "restarted once: {status:?}");
    assert!(status[0].runtime.last_exit.is_some(), "how the last process ended is kept: {status:?}");
    assert!(!hearth_core::host::procinfo::is_running(pid));
    let new_pid = status[0].runtime.pid.unwrap();
    hearth.shutdown().await;
    assert!(support::gone_within(new_pid, Duration::from_secs(10)).await);
}

/// `hearth`'s one runtime process: (pid, launches, recycles).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_process_read_directly_is_not_replaced_under_its_reader() {
    let Some(found) = support::require_runtime().await else { return };
    let r = rig(&found).await;
    let client = r.rt.client().await.unwrap();
    let pid = r.rt.status().pid;
    assert!(!ProcessRuntime::recycle(&r.rt).await.unwrap(), "replaced while a client held it");
    assert_eq!(r.rt.status().pid, pid);
    assert!(client.session_status(r.space.root_str()).await.is_ok(), "the reader still reaches it");
    drop(client);
    assert!(ProcessRuntime::recycle(&r.rt).await.unwrap(), "nobody holds it any more");
    assert_ne!(r.rt.status().pid, pid, "a fresh process");
    assert!(support::gone_within(pid.unwrap(), Duration::from_secs(10)).await, "the old process is gone");
    r.rt.dispose().await;
    r.model.shutdown().await;
}

fn process(hearth: &Hearth) -> (u32, u32, u32) {
    let status = &hearth.runtime_statuses()[0].runtime;
    (status.pid.unwrap_or_default(), status.launches, status.recycles)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_runtime_past_its_memory_bound_is_replaced_between_turns_never_during_one() {
    if support::require_runtime().await.is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let updates = Arc::new(support::Recorder::default());
    let mut options = support::app_options(&root.join("data"), support::app_locate_inputs());
    // Every process is past a 1-byte bound: it is replaced at every moment no turn runs.
    options.registry.recycle = RecyclePolicy { above_bytes: 1, above_bytes_after_spaces: 0, ..RecyclePolicy::NEVER };
    let hearth = Hearth::open(options, updates.clone()).await.unwrap();
    let mut conversations = Vec::new();
    for (i, name) in ["one", "two"].into_iter().enumerate() {
        let dir = root.join(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("marker.txt"), format!("PROJECT_{i}")).unwrap();
        let project = hearth.store().add_project(&dir).unwrap();
        conversations.push(hearth.store().create_conversation(&project.id, name).unwrap().id);
    }
    let (a, b) = (&conversations[0], &conversations[1]);
    let reply = |m: Message| (m.status, m.text);

    hearth.send_message(a, "read marker.txt".into(), vec![]).await.unwrap();
    assert_eq!(reply(updates.finished(a, 1).await), (MessageStatus::Done, "PROJECT_0".into()));
    let first = process(&hearth);
    let replaced = support::wait_until(STATE_TIMEOUT, || async { process(&hearth).2 >= 1 && process(&hearth).0 != 0 }).await;
    assert!(replaced, "the idle runtime past its bound was not replaced: {:?}", hearth.runtime_statuses());
    let second = process(&hearth);
    assert_ne!(second.0, first.0, "a fresh process");
    assert!(support::gone_within(first.0, Duration::from_secs(10)).await, "the old process is gone");
    assert_eq!(second.1, second.2 + 1, "every launch after the first was a replacement, none a restart");
    let history = hearth.diagnostics_status().await.memory_history;
    assert_eq!(history.recycles.first().map(|r| r.reason), Some(RecycleReason::Memory), "{history:?}");

    // B's turn is held at the model while A's turn runs and ends: the process must stay.
    let model = hearth.builtin_model().unwrap();
    let hold = model.hold(HoldRule::kind(RequestKind::Agent).with_predicate(|r| r.last_user_text().contains("slowly")));
    hearth.send_message(b, "read marker.txt slowly".into(), vec![]).await.unwrap();
    assert!(hold.wait_until_held(1, STATE_TIMEOUT).await, "B's turn never reached the model");
    let during = process(&hearth);
    hearth.send_message(a, "read marker.txt".into(), vec![]).await.unwrap();
    assert_eq!(reply(updates.finished(a, 2).await), (MessageStatus::Done, "PROJECT_0".into()), "A continues in the fresh process");
    // Checked before B is released: once B's turn ends, replacing the process is due at once.
    assert_eq!(process(&hearth), during, "no replacement while B's turn ran, though A's ended");
    hold.release();
    assert_eq!(reply(updates.finished(b, 1).await), (MessageStatus::Done, "PROJECT_1".into()), "B's turn was never cut");

    // Once B's turn ended, the process goes too; a message sent at once waits for the fresh one and
    // continues its conversation's native session.
    let session_b = hearth.store().get_conversation(b).unwrap().native_session_id.unwrap();
    hearth.send_message(b, "read marker.txt".into(), vec![]).await.unwrap();
    assert_eq!(reply(updates.finished(b, 2).await), (MessageStatus::Done, "PROJECT_1".into()));
    assert_eq!(hearth.store().get_conversation(b).unwrap().native_session_id.unwrap(), session_b, "the same native session");
    let saw_earlier = model.requests().into_iter().filter(|r| r.kind == RequestKind::Agent && r.session_id.as_deref() == Some(session_b.as_str())).last().is_some_and(|r| r.contains_text("read marker.txt slowly"));
    assert!(saw_earlier, "the model saw B's earlier turn after the replacement");
    // The replacement follows the end of a turn, so it is awaited rather than read at once.
    let replaced_again = support::wait_until(STATE_TIMEOUT, || async { process(&hearth).2 > during.2 && process(&hearth).0 != 0 }).await;
    assert!(replaced_again, "replaced again once nothing ran: {:?}", hearth.runtime_statuses());
    let last = process(&hearth);
    for m in hearth.list_messages(a.clone()).await.unwrap().iter().chain(hearth.list_messages(b.clone()).await.unwrap().iter()) {
        assert_ne!(m.status, MessageStatus::Error, "no message lost or failed: {m:?}");
    }
    hearth.shutdown().await;
    assert!(support::gone_within(last.0, Duration::from_secs(10)).await);
}
