//! One run on an ACP agent, from its request to its `Ended` event: checks, the agent, the
//! conversation's session, the grant's hook, the session's model and mode, the prompt, then the
//! session's updates until the prompt's answer — or the user cancels, the agent dies, or the agent
//! falls silent past the bound.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    CancelNotification, ContentBlock, ImageContent, PermissionOptionKind, PromptRequest, RequestPermissionRequest, SessionConfigOptionValue,
    SetSessionConfigOptionRequest, SetSessionModeRequest, SessionUpdate, StopReason, TextContent, ToolKind,
};
use base64::Engine as _;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::connection::{ConnectError, PendingPermission, SessionEvent};
use super::runtime::{Live, Shared};
use super::translate::{inside, paths_of, Translator};
use crate::runtime::{FailureKind, OutsideProject, PermissionReply, RunRequest, RuntimeEvent, TurnEnd, TurnFailure, WorkMode};

pub(super) type Sink = mpsc::UnboundedSender<RuntimeEvent>;

/// The permission name the window knows for a reach outside the project folder.
pub const OUTSIDE_PERMISSION: &str = "external_directory";

fn failed(kind: FailureKind, message: impl Into<String>) -> TurnEnd {
    TurnEnd::Failed(TurnFailure { kind, message: message.into() })
}

/// Counts the run as active, and tells the hooks it ended, however it ends.
struct RunGuard<'a> {
    rt: &'a Shared,
    request_id: &'a str,
}

impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        self.rt.active_runs.fetch_sub(1, Ordering::SeqCst);
        if let Some(h) = self.rt.hooks() {
            h.run_ended(self.request_id);
        }
    }
}

/// Run `request` to its end; the last event sent is its `Ended`.
pub(super) async fn run(rt: Arc<Shared>, request: RunRequest, cancel: CancellationToken, out: Sink) {
    rt.active_runs.fetch_add(1, Ordering::SeqCst);
    let _guard = RunGuard { rt: &rt, request_id: &request.request_id };
    let end = start(&rt, &request, &cancel, &out).await;
    let _ = out.send(RuntimeEvent::ended(end));
}

async fn start(rt: &Shared, request: &RunRequest, cancel: &CancellationToken, out: &Sink) -> TurnEnd {
    let agent = &rt.spec.name;
    if !request.space.root.is_dir() {
        return failed(
            FailureKind::ProjectMissing,
            format!("The project folder {} is gone (moved or deleted); the message was not sent.", request.space.root.display()),
        );
    }
    for image in &request.images {
        if let Err(e) = crate::images::check_attachment(&image.name, &image.media_type, &image.bytes) {
            return failed(FailureKind::InvalidRequest, e.to_string());
        }
    }
    let live = tokio::select! {
        live = rt.ensure_live() => match live {
            Ok(live) => live,
            Err(e) => return e.turn_end(),
        },
        _ = cancel.cancelled() => return TurnEnd::Cancelled,
    };
    if !request.images.is_empty() && !live.connection.info.images {
        return failed(FailureKind::InvalidRequest, format!("{agent} does not accept images; remove the attachment or choose another runtime for this conversation. The message was not sent."));
    }
    let lock = rt.sessions.conversation_lock(&request.conversation_id);
    let _one_turn_at_a_time = tokio::select! {
        guard = lock.lock() => guard,
        _ = cancel.cancelled() => return TurnEnd::Cancelled,
    };
    let hooks = rt.hooks();
    let opened = rt.sessions.session_for(&live.connection, &rt.spec, hooks, &request.conversation_id, &request.space, request.native_session.as_deref()).await;
    let (session, _how) = match opened {
        Ok(s) => s,
        Err(e) => return session_failed(&live, agent, &e),
    };
    if let Some(h) = hooks {
        if let Err(e) = h.session_ready(&request.request_id, &session.id) {
            return failed(FailureKind::Grant, e.to_string());
        }
    }
    // ACP names no user message: undo and fork, which cut a history at one, are not offered.
    let _ = out.send(RuntimeEvent::Session { native_session_id: session.id.clone(), native_message_id: String::new() });
    configure(rt, &live, request, &session).await;

    let mut prompt = vec![ContentBlock::Text(TextContent::new(request.prompt.clone()))];
    for image in &request.images {
        let data = base64::engine::general_purpose::STANDARD.encode(image.bytes.as_slice());
        prompt.push(ContentBlock::Image(ImageContent::new(data, image.media_type.clone())));
    }
    let mut sub = live.connection.subscribe(&session.id);
    let mut watch = Watch { rt, request, session: &session.id, out, translator: Translator::default(), asked: Vec::new() };
    let answer = live.connection.call_unbounded(PromptRequest::new(session.id.clone(), prompt));
    tokio::pin!(answer);
    let bounds = rt.spec.bounds;
    let mut silent_until = Instant::now() + bounds.prompt_silence;
    let mut cancelling = false;
    let end = loop {
        tokio::select! {
            biased;
            event = sub.events.recv() => {
                if let Some(event) = event {
                    watch.on_event(event);
                    if !cancelling {
                        silent_until = Instant::now() + bounds.prompt_silence;
                    }
                }
            }
            answer = &mut answer => {
                // Every update sent before the answer is routed already: take them first.
                while let Ok(event) = sub.events.try_recv() {
                    watch.on_event(event);
                }
                break match answer {
                    Ok(a) => match a.stop_reason {
                        StopReason::Cancelled => TurnEnd::Cancelled,
                        StopReason::Refusal => failed(FailureKind::Model, format!("{agent} refused to answer this request.")),
                        _ => TurnEnd::Done { native_session_id: session.id.clone(), text: watch.translator.text().to_string() },
                    },
                    Err(e) => {
                        if cancelling {
                            TurnEnd::Cancelled
                        } else {
                            prompt_failed(&live, agent, &e).await
                        }
                    }
                };
            }
            status = live.process.wait_exit() => {
                break failed(FailureKind::RuntimeDied, format!("{agent} stopped unexpectedly ({status}). Its last output: {}", live.process.tail.text()));
            }
            _ = cancel.cancelled(), if !cancelling => {
                cancelling = true;
                live.connection.notify(CancelNotification::new(session.id.clone()));
                silent_until = Instant::now() + bounds.cancel_settle;
            }
            _ = tokio::time::sleep_until(silent_until) => {
                if cancelling {
                    tracing::warn!(agent = %rt.spec.agent_id, "the agent did not end a cancelled prompt in time");
                    break TurnEnd::Cancelled;
                }
                live.connection.notify(CancelNotification::new(session.id.clone()));
                break failed(FailureKind::Unreachable, format!("{agent} sent nothing for {}, so the reply was stopped.", spoken(bounds.prompt_silence)));
            }
        }
    };
    for id in watch.asked.drain(..) {
        rt.drop_permission(&id);
    }
    if !matches!(end, TurnEnd::Done { .. }) {
        let note = if matches!(end, TurnEnd::Cancelled) { "Stopped before it finished." } else { "The reply ended before this tool finished." };
        for e in watch.translator.unfinished(note) {
            let _ = out.send(e);
        }
    }
    end
}

/// Tell the session which model to use (once) and which mode the turn's work mode needs.
async fn configure(rt: &Shared, live: &Live, request: &RunRequest, session: &super::sessions::OpenSession) {
    let call = rt.spec.bounds.call;
    // The conversation's profile, as this agent names its model; set only when it changes.
    if let Some(model) = rt.spec.model_for(request.profile_id.as_deref()).filter(|m| session.model.as_ref() != Some(m)) {
        let choose = SetSessionConfigOptionRequest::new(session.id.clone(), "model", SessionConfigOptionValue::value_id(model.clone()));
        match live.connection.call(choose, call).await {
            Ok(_) => rt.sessions.update(&request.conversation_id, |s| s.model = Some(model)),
            Err(e) => tracing::warn!(error = %e, model, "the agent did not take the model choice; it uses its own default"),
        }
    }
    let wanted = match request.work_mode {
        WorkMode::Ask => rt.spec.read_only_mode.clone(),
        WorkMode::Execute => session.default_mode.clone(),
    };
    if let Some(mode) = wanted.filter(|m| session.mode.as_ref() != Some(m)) {
        match live.connection.call(SetSessionModeRequest::new(session.id.clone(), mode.clone()), call).await {
            Ok(_) => rt.sessions.update(&request.conversation_id, |s| s.mode = Some(mode)),
            Err(e) => tracing::warn!(error = %e, mode, "the agent did not switch modes"),
        }
    }
}

fn session_failed(live: &Live, agent: &str, e: &ConnectError) -> TurnEnd {
    match e {
        ConnectError::Closed { .. } => failed(FailureKind::RuntimeDied, format!("{agent} stopped while opening the conversation. Its last output: {}", live.process.tail.text())),
        ConnectError::Timeout { .. } => failed(FailureKind::Unreachable, format!("{agent} could not open the conversation: {e}.")),
        _ => failed(FailureKind::Refused, format!("{agent} could not open the conversation: {e}.")),
    }
}

async fn prompt_failed(live: &Live, agent: &str, e: &ConnectError) -> TurnEnd {
    match e {
        ConnectError::Closed { .. } => {
            let status = live.process.wait_exit().await;
            failed(FailureKind::RuntimeDied, format!("{agent} stopped unexpectedly ({status}). Its last output: {}", live.process.tail.text()))
        }
        // What the agent says of a failed prompt is usually its model provider's error.
        _ => failed(FailureKind::Model, format!("{agent} could not answer: {e}.")),
    }
}

/// "3 seconds", "10 minutes": a bound in a sentence.
fn spoken(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    if secs < 120 {
        format!("{secs} seconds")
    } else {
        format!("{} minutes", secs / 60)
    }
}

/// The turn after its prompt went out.
struct Watch<'a> {
    rt: &'a Shared,
    request: &'a RunRequest,
    session: &'a str,
    out: &'a Sink,
    translator: Translator,
    /// Permission requests shown to the user in this turn (dropped, so cancelled, when it ends).
    asked: Vec<String>,
}

impl Watch<'_> {
    fn on_event(&mut self, event: SessionEvent) {
        match event {
            SessionEvent::Update(update) => {
                let is_plan = matches!(*update, SessionUpdate::Plan(_));
                for e in self.translator.on_update(*update) {
                    let _ = self.out.send(e);
                }
                if is_plan {
                    if let Some(plan) = self.translator.plan() {
                        self.rt.sessions.set_plan(self.session, plan.to_vec());
                    }
                }
            }
            SessionEvent::Permission(pending) => self.on_permission(*pending),
        }
    }

    /// The project's policy answers what it can; a reach outside the folder under "Ask me" goes to
    /// the user.
    fn on_permission(&mut self, pending: PendingPermission) {
        let root = &self.request.space.root;
        let fields = &pending.request.tool_call.fields;
        let outside: Vec<String> = paths_of(fields).into_iter().filter(|p| !inside(p, root)).map(|p| p.display().to_string()).collect();
        let changes = matches!(fields.kind, Some(ToolKind::Edit | ToolKind::Delete | ToolKind::Move | ToolKind::Execute));
        let reply = if !outside.is_empty() {
            match self.request.outside_project {
                OutsideProject::Deny => Some(PermissionReply::Reject),
                OutsideProject::Ask => None,
            }
        } else if self.request.work_mode == WorkMode::Ask && changes {
            Some(PermissionReply::Reject)
        } else {
            Some(PermissionReply::Once)
        };
        match reply {
            Some(reply) => {
                let option = option_for(&pending.request, reply);
                pending.answer(option);
            }
            None => {
                let id = self.rt.hold_permission(pending);
                self.asked.push(id.clone());
                let _ = self.out.send(RuntimeEvent::PermissionAsked { permission_id: id, permission: OUTSIDE_PERMISSION.into(), patterns: outside });
            }
        }
    }
}

/// The agent's option that means `reply` (chosen by kind, never by position or name); `None`
/// when it offers none, which cancels the tool call. Hearth never picks "always": that would
/// hold for the whole session beyond what the user chose (the app keeps "always" itself).
pub(super) fn option_for(request: &RequestPermissionRequest, reply: PermissionReply) -> Option<String> {
    let kinds: &[PermissionOptionKind] = match reply {
        PermissionReply::Once | PermissionReply::Always => &[PermissionOptionKind::AllowOnce],
        PermissionReply::Reject => &[PermissionOptionKind::RejectOnce, PermissionOptionKind::RejectAlways],
    };
    kinds.iter().find_map(|kind| request.options.iter().find(|o| o.kind == *kind).map(|o| o.option_id.0.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn permission(options: serde_json::Value) -> RequestPermissionRequest {
        serde_json::from_value(json!({"sessionId": "s", "toolCall": {"toolCallId": "t"}, "options": options})).unwrap()
    }

    #[test]
    fn options_are_chosen_by_kind_and_always_is_never_sent() {
        // Claude Code's option ids.
        let claude = permission(json!([
            {"optionId":"allow-with-updates","name":"Yes, allow all edits","kind":"allow_always"},
            {"optionId":"allow-once","name":"Yes","kind":"allow_once"},
            {"optionId":"reject","name":"No","kind":"reject_once"}
        ]));
        assert_eq!(option_for(&claude, PermissionReply::Once).as_deref(), Some("allow-once"));
        assert_eq!(option_for(&claude, PermissionReply::Always).as_deref(), Some("allow-once"));
        assert_eq!(option_for(&claude, PermissionReply::Reject).as_deref(), Some("reject"));
        let only_always = permission(json!([{"optionId":"a","name":"Always","kind":"allow_always"}]));
        assert_eq!(option_for(&only_always, PermissionReply::Once), None, "no one-time allow: the call is cancelled");
    }
}
