//! One turn of a conversation, end to end: the user's message is stored before anything is sent,
//! the reply streams into the store and to the window, and a failure ends the turn with a sentence
//! while keeping everything the user wrote.

use std::sync::Arc;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::updates::{ConversationSnapshot, ConversationUpdateKind};
use super::turns::{RunningTurn, TurnScope};
use super::{blocking, AppError, AppResult, Hearth};
use crate::images::PreparedImage;
use crate::runtime::*;
use crate::store::{Message, MessageStatus, ToolCall, ToolCallStatus};

/// Logged when a reply's first text arrives from the runtime.
pub const FIRST_TEXT_LOG: &str = "first text from the runtime";

impl Hearth {
    fn emit(&self, conversation_id: &str, kind: ConversationUpdateKind) {
        self.updates.send(conversation_id, kind);
    }

    /// Store a reply's event and tell the window, as one step no snapshot falls between.
    fn store_and_emit(&self, conversation_id: &str, user_id: &str, reply_id: &str, event: RuntimeEvent) {
        if event.is_terminal() {
            // Before the window sees the end: from then on a send waits for the turn's last steps.
            self.turn_finishing(conversation_id);
        }
        self.updates.change_and_send(
            conversation_id,
            || {
                if let Err(e) = self.store_event(conversation_id, user_id, reply_id, &event) {
                    tracing::warn!(error = %e, "could not store a reply event");
                }
            },
            |_| ConversationUpdateKind::Runtime { message_id: reply_id.into(), event: event.clone() },
        );
    }

    /// A conversation as a view opens it: its messages and the last update they contain, so that a
    /// view opened while a reply streams applies exactly the updates after it.
    pub async fn conversation_snapshot(&self, conversation_id: String) -> AppResult<ConversationSnapshot> {
        let updates = self.updates.clone();
        let (messages, update_seq) = blocking(&self.store, move |s| updates.snapshot(|| s.list_messages(&conversation_id))).await?;
        Ok(ConversationSnapshot { messages, update_seq })
    }

    /// Send a message: store it, start the reply, return the stored user message at once. The reply
    /// streams as events.
    pub async fn send_message(self: &Arc<Self>, conversation_id: &str, text: String, attachment_ids: Vec<String>) -> AppResult<Message> {
        self.settle_finishing(TurnScope::Conversation(conversation_id)).await;
        if self.turns.lock().unwrap().contains_key(conversation_id) {
            return Err(AppError::Busy);
        }
        let cid = conversation_id.to_string();
        let (conversation, project, profiles, settings) = blocking(&self.store, move |s| {
            let c = s.get_conversation(&cid)?;
            let p = s.get_project(&c.project_id)?;
            Ok((c, p, s.list_profiles()?, s.app_settings()?))
        })
        .await?;
        let space = super::space_of(&project)?;
        if self.is_rewinding(&project.id) {
            return Err(AppError::Rewinding);
        }
        // Model profiles choose the model of OpenCode (its server and its ACP agent); another agent
        // says itself whether it takes images, and the run refuses them before sending if not.
        let profiles_apply = crate::acp::agents::is_opencode(&super::choice_of(&conversation, &project));
        if !attachment_ids.is_empty() && profiles_apply {
            let profile_id = conversation.profile_id.clone().or(settings.default_profile_id.clone());
            let profile = profiles.iter().find(|p| Some(&p.id) == profile_id.as_ref()).or(profiles.first());
            if let Some(p) = profile.filter(|p| !p.image_input) {
                return Err(AppError::NoImageInput(p.name.clone()));
            }
        }
        let images = self.take_staged(&attachment_ids)?;
        let attachments = self.save_attachments(conversation_id, &images).await?;

        let cid = conversation_id.to_string();
        let retitle = (conversation.title == DEFAULT_CONVERSATION_TITLE).then(|| title_from(&text)).flatten();
        let project_choice = project.runtime.clone();
        let (user, reply, choice) = blocking(&self.store, move |s| {
            let choice = s.fix_conversation_runtime(&cid, &project_choice)?;
            let user = s.add_user_message(&cid, &text, attachments)?;
            if let Some(title) = retitle {
                s.rename_conversation(&cid, &title)?;
            }
            let reply = s.begin_assistant_message(&cid)?;
            Ok((user, reply, choice))
        })
        .await?;
        self.emit(conversation_id, ConversationUpdateKind::MessageStored { message: user.clone() });
        self.emit(conversation_id, ConversationUpdateKind::MessageStored { message: reply.clone() });

        let cancel = CancellationToken::new();
        {
            let mut turns = self.turns.lock().unwrap();
            if turns.contains_key(conversation_id) {
                return Err(AppError::Busy);
            }
            // Checked again under the turns lock, which an undo takes too: one of the two waits.
            if self.is_rewinding(&project.id) {
                return Err(AppError::Rewinding);
            }
            turns.insert(conversation_id.into(), RunningTurn::new(cancel.clone(), project.id.clone()));
        }
        let request_id = uuid::Uuid::new_v4().to_string();
        // The grant lives exactly as long as the turn: revoked when this guard goes, whether the
        // run ended, failed, or never started.
        let grant = match self.grant_for(&request_id, &conversation.library_ids).await {
            Ok(g) => g,
            Err(e) => {
                self.turns.lock().unwrap().remove(conversation_id);
                return Err(e);
            }
        };
        let request = RunRequest {
            request_id,
            conversation_id: conversation_id.into(),
            prompt: user.text.clone(),
            work_mode: conversation.work_mode,
            outside_project: project.outside_project,
            images: images.into_iter().map(image_input).collect(),
            profile_id: conversation.profile_id.clone(),
            space,
            native_session: conversation.native_session_id.clone(),
        };
        let me = self.clone();
        let (user_id, reply_id) = (user.id.clone(), reply.id.clone());
        let project_id = project.id.clone();
        tokio::spawn(async move {
            let cid = request.conversation_id.clone();
            me.discard_undone(&cid).await;
            // Only a turn that may edit is framed by checkpoints (Ask mode cannot change files).
            let space = request.space.clone();
            let before = match request.work_mode {
                WorkMode::Execute if space.is_local() => me.checkpoint(&project_id, &space).await,
                _ => None,
            };
            me.drive_turn(&choice, request, &user_id, &reply_id, cancel).await;
            if let Some(before) = before {
                me.record_turn(&project_id, &space, &user_id, &reply_id, before).await;
            }
            drop(grant);
            me.turns.lock().unwrap().remove(&cid);
            let (uid, rid) = (user_id.clone(), reply_id.clone());
            if let Ok((user, message)) = blocking(&me.store, move |s| Ok((s.get_message(&uid)?, s.get_message(&rid)?))).await {
                // The user's message moved on too (taken by the runtime, or not sent): the window
                // shows what the store has.
                me.emit(&cid, ConversationUpdateKind::MessageStored { message: user });
                me.emit(&cid, ConversationUpdateKind::TurnFinished { message });
            }
        });
        Ok(user)
    }

    async fn drive_turn(&self, choice: &RuntimeChoice, request: RunRequest, user_id: &str, reply_id: &str, cancel: CancellationToken) {
        let cid = request.conversation_id.clone();
        let facade = match self.runtime_for(choice, &request.space).await {
            Ok(f) => f,
            Err(e) => {
                // The run never started: end the turn here, as the runtime would have.
                let end = TurnEnd::Failed(TurnFailure { kind: failure_kind(&e), message: e.to_string() });
                self.agent_failures.turn_ended(choice, &end);
                self.store_and_emit(&cid, user_id, reply_id, RuntimeEvent::ended(end));
                return;
            }
        };
        let _ = blocking(&self.store, {
            let uid = user_id.to_string();
            move |s| s.set_status(&uid, MessageStatus::Sending)
        })
        .await;
        let space = request.space.clone();
        let sent = std::time::Instant::now();
        let mut first_text = true;
        let mut stream = facade.run(request, cancel);
        while let Some(event) = stream.next().await {
            if first_text && matches!(event, RuntimeEvent::TextDelta { .. }) {
                first_text = false;
                // The runtime's end of "send → first text": the render benchmark sets the window's
                // end beside it.
                tracing::info!(conversation = %crate::host::logging::log_tag(&cid), after_ms = sent.elapsed().as_millis() as u64, "{FIRST_TEXT_LOG}");
            }
            if let RuntimeEvent::PermissionAsked { permission_id, permission, patterns } = &event {
                if self.permissions.asked(&cid, permission_id, permission, patterns) {
                    // Answered "always" earlier in this conversation: answered again, not shown.
                    if let Err(e) = facade.reply_permission(&space, permission_id, PermissionReply::Once).await {
                        tracing::warn!(error = %e, "could not answer a permission the user always allows");
                    }
                    continue;
                }
            }
            let terminal = event.is_terminal();
            if let RuntimeEvent::Ended { end } = &event {
                self.agent_failures.turn_ended(choice, end);
            }
            self.store_and_emit(&cid, user_id, reply_id, event);
            if terminal {
                break;
            }
        }
        self.permissions.turn_ended(&cid);
    }

    /// Persist one runtime event of a reply. Cheap calls (buffered text) run inline.
    fn store_event(&self, conversation_id: &str, user_id: &str, reply_id: &str, event: &RuntimeEvent) -> Result<(), crate::store::StoreError> {
        let s = &self.store;
        match event {
            RuntimeEvent::Session { native_session_id, native_message_id } => {
                s.set_native_session(conversation_id, Some(native_session_id))?;
                s.set_native_id(user_id, native_message_id)?;
                s.set_status(user_id, MessageStatus::Done)
            }
            RuntimeEvent::TextDelta { text } => s.append_text(reply_id, text),
            RuntimeEvent::ToolStarted { call_id, tool, input } => s.upsert_tool_call(
                reply_id,
                &ToolCall { call_id: call_id.clone(), tool: tool.clone(), input: input.clone(), output: None, error: None, status: ToolCallStatus::Running },
            ),
            RuntimeEvent::ToolFinished { call_id, tool, input, output, error } => s.upsert_tool_call(
                reply_id,
                &ToolCall {
                    call_id: call_id.clone(),
                    tool: tool.clone(),
                    input: input.clone(),
                    output: Some(output.clone()),
                    error: error.clone(),
                    status: if error.is_some() { ToolCallStatus::Error } else { ToolCallStatus::Done },
                },
            ),
            RuntimeEvent::Usage(u) => s.set_usage(reply_id, u),
            RuntimeEvent::Ended { end } => {
                // A user message the runtime never took says why; one it took stays done (statuses
                // only move forward, so this changes only a message still sending).
                let unsent = match end {
                    TurnEnd::Done { .. } => MessageStatus::Done,
                    TurnEnd::Cancelled => MessageStatus::Cancelled,
                    TurnEnd::Failed(_) => MessageStatus::Error,
                };
                let _ = s.set_status(user_id, unsent);
                match end {
                    TurnEnd::Done { text, .. } => s.finish_done(reply_id, text),
                    TurnEnd::Cancelled => s.finish(reply_id, MessageStatus::Cancelled, None),
                    TurnEnd::Failed(f) => s.finish(reply_id, MessageStatus::Error, Some(&f.message)),
                }
            }
            RuntimeEvent::PermissionAsked { .. } | RuntimeEvent::Retrying { .. } => Ok(()),
        }
    }

    /// Stop the running reply of a conversation.
    pub fn cancel_turn(&self, conversation_id: &str) -> AppResult<()> {
        let turns = self.turns.lock().unwrap();
        let turn = turns.get(conversation_id).ok_or(AppError::NotRunning)?;
        turn.cancel.cancel();
        Ok(())
    }

    pub fn is_running(&self, conversation_id: &str) -> bool {
        self.turns.lock().unwrap().contains_key(conversation_id)
    }

    /// Compact a conversation natively in the runtime.
    pub async fn compact_conversation(self: &Arc<Self>, conversation_id: &str) -> AppResult<CompactOutcome> {
        self.settle_finishing(TurnScope::Conversation(conversation_id)).await;
        if self.is_running(conversation_id) {
            return Err(AppError::Busy);
        }
        let (conversation, project, space) = self.conversation_and_space(conversation_id).await?;
        let facade = self.runtime_for(&super::choice_of(&conversation, &project), &space).await?;
        let request = CompactRequest {
            request_id: uuid::Uuid::new_v4().to_string(),
            conversation_id: conversation_id.into(),
            profile_id: conversation.profile_id,
            space,
            native_session: conversation.native_session_id,
        };
        let outcome = facade.compact_conversation(request, CancellationToken::new()).await?;
        if outcome.compacted {
            let cid = conversation_id.to_string();
            blocking(&self.store, move |s| s.mark_compacted(&cid)).await?;
        }
        Ok(outcome)
    }

    /// Answer a permission request of a running reply ("always" holds for this conversation only:
    /// see `permissions.rs`).
    pub async fn reply_permission(&self, conversation_id: &str, permission_id: &str, reply: PermissionReply) -> AppResult<()> {
        let (conversation, project, space) = self.conversation_and_space(conversation_id).await?;
        let facade = self.runtime_for(&super::choice_of(&conversation, &project), &space).await?;
        facade.reply_permission(&space, permission_id, super::permissions::Permissions::to_runtime(reply)).await?;
        self.permissions.answered(conversation_id, permission_id, reply);
        Ok(())
    }

    /// Delete a conversation: stop its turn, forget its runtime session, remove it from the store.
    pub async fn delete_conversation(&self, conversation_id: &str) -> AppResult<()> {
        if let Some(turn) = self.turns.lock().unwrap().get(conversation_id) {
            turn.cancel.cancel();
        }
        self.runtimes.release_conversation(conversation_id).await?;
        self.permissions.forget([conversation_id]);
        let cid = conversation_id.to_string();
        blocking(&self.store, move |s| s.delete_conversation(&cid)).await?;
        let _ = tokio::fs::remove_dir_all(self.attachments_dir().join(conversation_id)).await;
        Ok(())
    }
}

/// Title of a conversation nobody has named yet; its first message names it.
pub const DEFAULT_CONVERSATION_TITLE: &str = "New conversation";
/// Longest automatic title, in characters.
pub const AUTO_TITLE_CHARS: usize = 60;

/// A title from the first line of the first message.
fn title_from(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    let mut title: String = line.chars().take(AUTO_TITLE_CHARS).collect();
    if line.chars().count() > AUTO_TITLE_CHARS {
        title.push('…');
    }
    Some(title)
}

/// The failure kind of a turn that could not start.
fn failure_kind(e: &AppError) -> FailureKind {
    match e {
        AppError::Runtime(r) => r.failure_kind(),
        AppError::Space(_) => FailureKind::ProjectMissing,
        AppError::RuntimeMissing(_) | AppError::RipgrepMissing(_) | AppError::AgentMissing(_) | AppError::UnknownAgent(_) | AppError::BuiltinModel(_) => FailureKind::Start,
        _ => FailureKind::InvalidRequest,
    }
}

fn image_input(img: PreparedImage) -> ImageInput {
    ImageInput { name: img.name, media_type: img.media_type, bytes: Arc::new(img.bytes) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_come_from_the_first_line() {
        assert_eq!(title_from("\n  Fix the build\nplease").as_deref(), Some("Fix the build"));
        assert_eq!(title_from("   "), None);
        let long = "x".repeat(AUTO_TITLE_CHARS + 5);
        assert_eq!(title_from(&long).unwrap().chars().count(), AUTO_TITLE_CHARS + 1);
    }
}
