//! One run, from its request to its `Ended` event: checks, the runtime, the conversation's session,
//! the grant's hook, the prompt, then the turn's events until it ends — or the user cancels, the
//! runtime dies, or the event stream drops and the turn catches up from what the runtime stored.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::client::ApiError;
use super::event_hub::{HubEvent, Subscription};
use super::prompt::prompt_body;
use super::runtime::Shared;
use super::server::Live;
use super::sessions::SessionRules;
use super::turn::{Settled, TurnTracker};
use super::wire::Event;
use crate::runtime::{FailureKind, RunHooks, RunRequest, RuntimeError, RuntimeEvent, TurnEnd, TurnFailure};

/// After a cancel, how long to wait for the runtime to finish the aborted turn (so its late events
/// cannot reach the next turn) before giving up on it.
pub const ABORT_SETTLE_TIMEOUT: Duration = Duration::from_secs(10);
/// When the runtime's answer leaves the turn's state unclear (an idle with no step yet, a prompt not
/// stored yet after a gap), how long before asking again, and how many times before the turn is
/// declared lost.
pub const RECHECK_AFTER: Duration = Duration::from_millis(250);
pub const MAX_RECHECKS: u32 = 40;
/// How long the turn's stream may stay quiet before the turn asks the runtime whether its session
/// is still busy: a reconnected stream can miss what happened just before its subscription was live
/// there, and a missed idle must not leave the turn waiting forever. (One status request per quiet
/// period; the stored messages are read only when the session turns out idle.)
pub const QUIET_CHECK_AFTER: Duration = Duration::from_secs(2);
/// Most subagent sessions one run follows for their permission requests.
pub const MAX_FOLLOWED_SESSIONS: usize = 16;

pub(super) type Sink = mpsc::UnboundedSender<RuntimeEvent>;

/// Run `request` to its end; the last event sent is its `Ended`.
pub(super) async fn run(rt: Arc<Shared>, request: RunRequest, cancel: CancellationToken, out: Sink) {
    let _active = ActiveRun::new(rt.active_runs.clone());
    let hooks = rt.server.host().hooks.clone();
    let _ended = RunEnded(hooks.clone(), request.request_id.clone());
    let end = start(&rt, &request, hooks.as_deref(), &cancel, &out).await;
    let _ = out.send(RuntimeEvent::ended(end));
}

fn failed(kind: FailureKind, message: impl Into<String>) -> TurnEnd {
    TurnEnd::Failed(TurnFailure { kind, message: message.into() })
}

fn api_failed(what: &str, e: &ApiError) -> TurnEnd {
    let kind = match e {
        ApiError::Transport(_) => FailureKind::Unreachable,
        ApiError::Status { .. } | ApiError::Decode { .. } => FailureKind::Refused,
    };
    failed(kind, format!("{what}: {e}"))
}

/// Everything up to the prompt going out, then the watch.
async fn start(rt: &Arc<Shared>, request: &RunRequest, hooks: Option<&dyn RunHooks>, cancel: &CancellationToken, out: &Sink) -> TurnEnd {
    // A folder on another host was checked there when the project was added; the runtime there
    // says if it is gone.
    if request.space.is_local() && !request.space.root.is_dir() {
        return failed(
            FailureKind::ProjectMissing,
            format!("The project folder {} is gone (moved or deleted); the message was not sent.", request.space.root.display()),
        );
    }
    let message_id = rt.next_message_id();
    let body = match prompt_body(rt.server.config(), request, message_id.clone()) {
        Ok(b) => b,
        Err(e) => return failed(FailureKind::InvalidRequest, e.to_string()),
    };
    let live = match rt.server.ensure_live(|| rt.sessions.all_instances_closed()).await {
        Ok(live) => live,
        Err(e) => return e.turn_end(),
    };
    let lock = rt.sessions.conversation_lock(&request.conversation_id);
    let _one_turn_at_a_time = tokio::select! {
        guard = lock.lock() => guard,
        _ = cancel.cancelled() => return TurnEnd::Cancelled,
    };
    let directory = request.space.root_str();
    let directory_lock = rt.sessions.directory_lock(directory);
    let _instance_in_use = directory_lock.read().await;
    let rules = SessionRules { outside: request.outside_project, mode: request.work_mode };
    let session = match rt.sessions.session_for(&live.client, &request.conversation_id, &request.space, request.native_session.as_deref(), rules).await {
        Ok(s) => s,
        Err(e) => return api_failed("The runtime could not open the conversation's session", &e),
    };
    rt.sessions.instance_opened(directory);
    if let Some(hooks) = hooks {
        if let Err(e) = hooks.session_ready(&request.request_id, &session) {
            return failed(FailureKind::Grant, e.to_string());
        }
    }
    let _ = out.send(RuntimeEvent::Session { native_session_id: session.clone(), native_message_id: message_id.clone() });
    let sub = live.hub.subscribe(&session);
    if let Err(e) = live.client.prompt_async(directory, &session, &body).await {
        return api_failed("The runtime did not take the message", &e);
    }
    let mut watch = Watch {
        rt,
        live,
        request,
        hooks,
        out,
        tracker: TurnTracker::new(message_id, rt.max_retries),
        session,
        sub,
        recheck: None,
    };
    watch.until_end(cancel).await
}

/// The turn after its prompt went out.
struct Watch<'a> {
    rt: &'a Shared,
    live: Arc<Live>,
    request: &'a RunRequest,
    hooks: Option<&'a dyn RunHooks>,
    out: &'a Sink,
    tracker: TurnTracker,
    session: String,
    sub: Subscription,
    /// When to ask the runtime again, and how many times it was asked, while the turn's state is
    /// unclear.
    recheck: Option<(Instant, u32)>,
}

impl Watch<'_> {
    fn directory(&self) -> &str {
        self.request.space.root_str()
    }

    fn emit(&self, events: Vec<RuntimeEvent>) {
        for e in events {
            let _ = self.out.send(e);
        }
    }

    /// How the turn ended. (The steps below return `Err(end)` to stop the watch, whatever the end.)
    async fn until_end(&mut self, cancel: &CancellationToken) -> TurnEnd {
        match self.watch(cancel).await {
            Ok(never) => match never {},
            Err(end) => end,
        }
    }

    async fn watch(&mut self, cancel: &CancellationToken) -> Result<std::convert::Infallible, TurnEnd> {
        loop {
            let recheck_at = self.recheck.map(|(at, _)| at);
            let recheck = async move {
                match recheck_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            // Restarted by every event: fires only when the stream has been quiet that long.
            let quiet = tokio::time::sleep(QUIET_CHECK_AFTER);
            tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(self.cancel().await),
                status = self.live.server.wait_exit() => return Err(self.died(&status)),
                event = self.sub.rx.recv() => match event {
                    Some(HubEvent::Event { event, .. }) => self.on_event(&event).await?,
                    Some(HubEvent::Reconnected) => {
                        tracing::info!(session = %crate::host::logging::log_tag(&self.session), "event stream reconnected mid-turn; catching up from the stored messages");
                        self.catch_up().await?
                    }
                    None => return Err(failed(FailureKind::Unreachable, "The runtime's event stream closed.")),
                },
                _ = recheck => self.catch_up().await?,
                _ = quiet => self.quiet_check().await?,
            }
        }
    }

    async fn on_event(&mut self, event: &Event) -> Result<(), TurnEnd> {
        if event.session_id() != Some(self.session.as_str()) {
            return self.on_subagent_event(event);
        }
        let up = self.tracker.on_event(event);
        self.emit(up.events);
        if up.abort {
            let _ = self.live.client.abort(self.directory(), &self.session).await;
        }
        if !matches!(event, Event::SessionIdle(_)) {
            // Progress: whatever was unclear is being answered by the stream itself.
            self.recheck = None;
            return Ok(());
        }
        let settled = self.tracker.on_idle();
        tracing::debug!(?settled, "the turn's session went idle");
        match settled {
            // A finished turn with no text at all is read back from the store before it is
            // believed: a reply is never "done" with text the runtime did not keep.
            Settled::Over(Ok(())) if self.tracker.text().is_empty() => self.catch_up().await,
            Settled::Over(end) => Err(self.ended(end)),
            Settled::Running => Ok(()),
            Settled::Unknown => self.catch_up().await,
        }
    }

    /// A subagent's session: announce it to the grant's hooks, follow its permission requests.
    fn on_subagent_event(&mut self, event: &Event) -> Result<(), TurnEnd> {
        if event.spawned_by() == Some(self.session.as_str()) {
            if let Some(child) = event.session_id() {
                if let Some(hooks) = self.hooks {
                    hooks.child_session(&self.request.request_id, &self.session, child);
                }
                if self.sub.followed() <= MAX_FOLLOWED_SESSIONS {
                    self.sub.follow(child);
                }
            }
            return Ok(());
        }
        if let Event::PermissionAsked(p) = event {
            let _ = self.out.send(RuntimeEvent::PermissionAsked {
                permission_id: p.id.clone(),
                permission: p.permission.clone(),
                patterns: p.patterns.clone(),
            });
        }
        Ok(())
    }

    /// The stream has been quiet: a busy session is waiting on its model (nothing to do); an idle
    /// one ended while its events were lost on the way, so catch up from what it stored.
    async fn quiet_check(&mut self) -> Result<(), TurnEnd> {
        match self.live.client.session_status(self.request.space.root_str()).await {
            Ok(status) if status.contains_key(&self.session) => Ok(()),
            _ => self.catch_up().await,
        }
    }

    /// Ask the runtime what it stored for this turn and whether the session is still busy; emit
    /// what the stream missed, and end the turn if the runtime says it is over.
    async fn catch_up(&mut self) -> Result<(), TurnEnd> {
        let directory = self.request.space.root_str();
        let stored = self.live.client.messages(directory, &self.session).await;
        let status = self.live.client.session_status(directory).await;
        let (stored, status) = match (stored, status) {
            (Ok(m), Ok(s)) => (m, s),
            (Err(e), _) | (_, Err(e)) => return self.unclear(|| api_failed("The runtime stopped answering during the turn", &e)),
        };
        let events = self.tracker.reconcile(&stored);
        tracing::debug!(stored = stored.len(), caught_up = events.len(), busy = status.contains_key(&self.session), "caught up from the stored messages");
        self.emit(events);
        if status.contains_key(&self.session) {
            // Busy or retrying: the stream will tell the rest (and a quiet stream is asked again).
            self.recheck = None;
            return Ok(());
        }
        match self.tracker.settled_after_reconcile() {
            Settled::Over(end) => Err(self.ended(end)),
            Settled::Running | Settled::Unknown => self.unclear(|| {
                failed(FailureKind::Lost, "The runtime lost this message: it neither answered nor kept it. Send it again.")
            }),
        }
    }

    /// The end of a turn the runtime says is over: done with the text it stored, or its failure.
    fn ended(&self, outcome: Result<(), TurnFailure>) -> TurnEnd {
        match outcome {
            Ok(()) => TurnEnd::Done { native_session_id: self.session.clone(), text: self.tracker.text() },
            Err(failure) => TurnEnd::Failed(failure),
        }
    }

    /// The turn's state is unclear: ask again soon, and give up after [`MAX_RECHECKS`].
    fn unclear(&mut self, give_up: impl FnOnce() -> TurnEnd) -> Result<(), TurnEnd> {
        let asked = self.recheck.map_or(0, |(_, n)| n) + 1;
        if asked > MAX_RECHECKS {
            return Err(give_up());
        }
        self.recheck = Some((Instant::now() + RECHECK_AFTER, asked));
        Ok(())
    }

    /// Abort the turn in the runtime and wait (bounded) for it to be over there, so its late events
    /// never reach the conversation's next turn.
    async fn cancel(&mut self) -> TurnEnd {
        let _ = self.live.client.abort(self.directory(), &self.session).await;
        let settle = async {
            loop {
                tokio::select! {
                    _ = self.live.server.wait_exit() => return,
                    event = self.sub.rx.recv() => match event {
                        Some(HubEvent::Event { event, .. }) if event.session_id() == Some(self.session.as_str()) => {
                            self.tracker.on_event(&event);
                            if matches!(*event, Event::SessionIdle(_)) && !matches!(self.tracker.on_idle(), Settled::Running) {
                                return;
                            }
                        }
                        Some(_) => {}
                        None => return,
                    }
                }
            }
        };
        if tokio::time::timeout(ABORT_SETTLE_TIMEOUT, settle).await.is_err() {
            tracing::warn!("an aborted turn did not settle in time");
        }
        TurnEnd::Cancelled
    }

    fn died(&self, status: &str) -> TurnEnd {
        if self.rt.server.is_disposed() {
            return RuntimeError::Disposed.turn_end();
        }
        failed(
            FailureKind::RuntimeDied,
            format!("The runtime stopped unexpectedly ({status}) while answering. Your message is kept; send again to continue the conversation."),
        )
    }
}

/// Counts a run as active for as long as it lives.
struct ActiveRun(Arc<AtomicU32>);

impl ActiveRun {
    fn new(counter: Arc<AtomicU32>) -> Self {
        counter.fetch_add(1, Ordering::SeqCst);
        Self(counter)
    }
}

impl Drop for ActiveRun {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Tells the hooks a run ended, on every way out of it.
struct RunEnded(Option<Arc<dyn RunHooks>>, String);

impl Drop for RunEnded {
    fn drop(&mut self) {
        if let Some(h) = &self.0 {
            h.run_ended(&self.1);
        }
    }
}
