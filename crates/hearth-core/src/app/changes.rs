//! What a turn changed, and taking it back: each turn in Execute mode is framed by two checkpoints of
//! its project's files (`changes::ChangeTracker`); its reply carries the change list; undo writes
//! the files back and makes the runtime forget the turns, redo brings both back; a conversation can
//! be forked at a reply; the agent's plan is read from the runtime.

use std::sync::Arc;

use super::updates::ConversationUpdateKind;
use super::turns::TurnScope;
use super::{blocking, AppError, AppResult, Hearth};
use crate::changes::{ChangeTracker, ChangesError, Checkpoint, FileDiff, FileMove};
use crate::runtime::{AgentRuntime, PlanStep, RuntimeChoice, RuntimeError, WorkspaceRuntime};
use crate::space::ExecutionSpace;
use crate::store::{Conversation, Project, TurnRecord, TurnState};

/// A project's folder, held by an undo or redo: no turn starts there until it is done.
pub(crate) struct FolderHold<'a> {
    hearth: &'a Hearth,
    project_id: String,
}

impl Drop for FolderHold<'_> {
    fn drop(&mut self) {
        self.hearth.rewinding.lock().unwrap().remove(&self.project_id);
    }
}

impl Hearth {
    /// Run a call of the change record off the async threads (every call reads or writes files).
    pub(crate) async fn tracked<T: Send + 'static>(&self, f: impl FnOnce(&ChangeTracker) -> Result<T, ChangesError> + Send + 'static) -> AppResult<T> {
        let tracker = self.changes.clone();
        Ok(tokio::task::spawn_blocking(move || f(&tracker)).await??)
    }

    /// Record the project's files now; a failure is logged and the turn goes on unrecorded.
    pub(crate) async fn checkpoint(&self, project_id: &str, space: &ExecutionSpace) -> Option<Checkpoint> {
        let (id, folder) = (project_id.to_owned(), space.root.clone());
        self.tracked(move |t| t.checkpoint(&id, &folder))
            .await
            .inspect_err(|e| tracing::warn!(error = %e, "could not record the project's files; this turn's changes will not be shown"))
            .ok()
    }

    /// After a turn: record the files again and keep the difference with the reply.
    pub(crate) async fn record_turn(&self, project_id: &str, space: &ExecutionSpace, user_id: &str, reply_id: &str, before: Checkpoint) {
        let Some(after) = self.checkpoint(project_id, space).await else { return };
        let (pid, b, a) = (project_id.to_owned(), before.clone(), after.clone());
        let list = match self.tracked(move |t| t.changes(&pid, &b, &a)).await {
            Ok(list) => list,
            Err(e) => return tracing::warn!(error = %e, "could not list the turn's changes"),
        };
        let (uid, rid) = (user_id.to_owned(), reply_id.to_owned());
        if let Err(e) = blocking(&self.store, move |s| s.record_turn_changes(&rid, &uid, &before, &after, &list)).await {
            tracing::warn!(error = %e, "could not keep the turn's changes");
        }
    }

    /// Refuse while a turn runs in the project (its agent is changing files), and keep turns
    /// from starting there until the returned hold is dropped.
    pub(crate) fn hold_folder(&self, project_id: &str) -> AppResult<FolderHold<'_>> {
        // The turns lock is held while the hold is taken; a turn starting checks the hold under it.
        let turns = self.turns.lock().unwrap();
        if turns.values().any(|t| t.project_id == project_id) {
            return Err(AppError::TurnRunningInProject);
        }
        if !self.rewinding.lock().unwrap().insert(project_id.to_owned()) {
            return Err(AppError::Rewinding);
        }
        drop(turns);
        Ok(FolderHold { hearth: self, project_id: project_id.to_owned() })
    }

    pub(crate) fn is_rewinding(&self, project_id: &str) -> bool {
        self.rewinding.lock().unwrap().contains(project_id)
    }

    pub(crate) async fn conversation_and_space(&self, conversation_id: &str) -> AppResult<(Conversation, Project, ExecutionSpace)> {
        let cid = conversation_id.to_owned();
        let (conversation, project) = blocking(&self.store, move |s| {
            let c = s.get_conversation(&cid)?;
            let p = s.get_project(&c.project_id)?;
            Ok((c, p))
        })
        .await?;
        let space = super::space_of(&project)?;
        Ok((conversation, project, space))
    }

    /// One page of one file's difference in a reply's turn.
    pub async fn file_diff(&self, reply_id: &str, path: &str, page: u32) -> AppResult<FileDiff> {
        let rid = reply_id.to_owned();
        let (record, project_id) = blocking(&self.store, move |s| s.turn_record(&rid)).await?.ok_or(AppError::NoChangesRecorded)?;
        let path = path.to_owned();
        self.tracked(move |t| t.file_diff(&project_id, &record.before, &record.after, &path, page)).await
    }

    /// Undo a reply's turn and every later one of the conversation: their files go back to what
    /// they were before it (refused, with the list, where a file changed since, unless `force`),
    /// and the runtime forgets those turns. They stay in the conversation, shown as undone.
    pub async fn undo_turn(&self, conversation_id: &str, reply_id: &str, force: bool) -> AppResult<()> {
        let (conversation, project, space) = self.conversation_and_space(conversation_id).await?;
        if !space.is_local() {
            return Err(AppError::UndoLocalOnly);
        }
        self.settle_finishing(TurnScope::Project(&project.id)).await;
        let _hold = self.hold_folder(&project.id)?;
        let records = self.records(conversation_id).await?;
        let at = records.iter().position(|r| r.reply_id == reply_id && r.state == TurnState::Kept).ok_or(AppError::NoChangesRecorded)?;
        let turns: Vec<&TurnRecord> = records[at..].iter().filter(|r| r.state == TurnState::Kept).collect();
        let moves = self.moves(&project.id, &turns).await?;
        let history = conversation.native_session_id.clone().zip(records[at].native_user_id.clone());
        self.move_files_then_history(&super::choice_of(&conversation, &project), &project.id, &space, moves, force, |facade, space| async move {
            match history {
                Some((session, native)) => facade.rewind_history(&space, &session, &native).await,
                None => Ok(()),
            }
        })
        .await?;
        self.set_states(conversation_id, turns.iter().map(|r| r.reply_id.clone()).collect(), TurnState::Undone).await
    }

    /// Redo the conversation's undone turns: their files come back as the agent left them, and so
    /// does the runtime's history.
    pub async fn redo_turns(&self, conversation_id: &str, force: bool) -> AppResult<()> {
        let (conversation, project, space) = self.conversation_and_space(conversation_id).await?;
        if !space.is_local() {
            return Err(AppError::UndoLocalOnly);
        }
        self.settle_finishing(TurnScope::Project(&project.id)).await;
        let _hold = self.hold_folder(&project.id)?;
        let records = self.records(conversation_id).await?;
        let turns: Vec<&TurnRecord> = records.iter().filter(|r| r.state == TurnState::Undone).collect();
        if turns.is_empty() {
            return Err(AppError::NothingToRedo);
        }
        let moves: Vec<FileMove> = self.moves(&project.id, &turns).await?.iter().map(FileMove::reversed).collect();
        let session = conversation.native_session_id.clone();
        self.move_files_then_history(&super::choice_of(&conversation, &project), &project.id, &space, moves, force, |facade, space| async move {
            match session {
                Some(session) => facade.restore_history(&space, &session).await,
                None => Ok(()),
            }
        })
        .await?;
        self.set_states(conversation_id, turns.iter().map(|r| r.reply_id.clone()).collect(), TurnState::Kept).await
    }

    /// A new message ends the chance to redo: the runtime drops undone turns at its next prompt.
    pub(crate) async fn discard_undone(&self, conversation_id: &str) {
        let cid = conversation_id.to_owned();
        match blocking(&self.store, move |s| s.discard_undone_turns(&cid)).await {
            Ok(ids) => self.emit_messages(conversation_id, ids).await,
            Err(e) => tracing::warn!(error = %e, "could not mark undone turns as discarded"),
        }
    }

    /// Fork the conversation at a reply: a new conversation in the same project with everything up
    /// to that reply, continuing in its own native session.
    pub async fn fork_conversation(&self, conversation_id: &str, reply_id: &str) -> AppResult<Conversation> {
        let (conversation, project, space) = self.conversation_and_space(conversation_id).await?;
        self.settle_finishing(TurnScope::Conversation(conversation_id)).await;
        if self.is_running(conversation_id) {
            return Err(AppError::Busy);
        }
        let session = conversation.native_session_id.clone().ok_or(RuntimeError::NoSession)?;
        // The runtime copies the messages before the next user message: this reply's turn included.
        let (cid, rid) = (conversation_id.to_owned(), reply_id.to_owned());
        let before = blocking(&self.store, move |s| s.next_user_native_id(&cid, &rid)).await?;
        let facade = self.runtime_for(&super::choice_of(&conversation, &project), &space).await?;
        let forked = facade.fork_session(&space, &session, before.as_deref()).await?;
        let title = fork_title(&conversation.title);
        let (cid, rid) = (conversation_id.to_owned(), reply_id.to_owned());
        blocking(&self.store, move |s| s.fork_conversation(&cid, &rid, &title, &forked)).await
    }

    /// The plan the agent keeps for this conversation (empty before its first turn).
    pub async fn conversation_plan(&self, conversation_id: &str) -> AppResult<Vec<PlanStep>> {
        let (conversation, project, space) = self.conversation_and_space(conversation_id).await?;
        let choice = super::choice_of(&conversation, &project);
        let Some(session) = conversation.native_session_id else { return Ok(Vec::new()) };
        let facade = self.runtime_for(&choice, &space).await?;
        Ok(facade.plan(&space, &session).await?)
    }

    async fn records(&self, conversation_id: &str) -> AppResult<Vec<TurnRecord>> {
        let cid = conversation_id.to_owned();
        blocking(&self.store, move |s| s.turn_records(&cid)).await
    }

    async fn moves(&self, project_id: &str, turns: &[&TurnRecord]) -> AppResult<Vec<FileMove>> {
        let pairs: Vec<(Checkpoint, Checkpoint)> = turns.iter().map(|r| (r.before.clone(), r.after.clone())).collect();
        let pid = project_id.to_owned();
        self.tracked(move |t| t.undo_moves(&pid, &pairs)).await
    }

    /// Move the files, then bring the runtime's history along; if the runtime fails, the files go
    /// back, so the conversation and the folder agree.
    async fn move_files_then_history<F, Fut>(&self, choice: &RuntimeChoice, project_id: &str, space: &ExecutionSpace, moves: Vec<FileMove>, force: bool, history: F) -> AppResult<()>
    where
        F: FnOnce(Arc<WorkspaceRuntime>, ExecutionSpace) -> Fut,
        Fut: std::future::Future<Output = Result<(), RuntimeError>>,
    {
        self.apply_moves(project_id, space, moves.clone(), force).await?;
        let moved = match self.runtime_for(choice, space).await {
            Ok(facade) => history(facade, space.clone()).await.map_err(AppError::from),
            Err(e) => Err(e),
        };
        if let Err(e) = moved {
            let back: Vec<FileMove> = moves.iter().map(FileMove::reversed).collect();
            if let Err(undo) = self.apply_moves(project_id, space, back, true).await {
                tracing::warn!(error = %undo, "could not put the files back after the runtime failed");
            }
            return Err(e);
        }
        Ok(())
    }

    async fn apply_moves(&self, project_id: &str, space: &ExecutionSpace, moves: Vec<FileMove>, force: bool) -> AppResult<()> {
        let (pid, folder) = (project_id.to_owned(), space.root.clone());
        self.tracked(move |t| t.apply(&pid, &folder, &moves, force)).await
    }

    async fn set_states(&self, conversation_id: &str, ids: Vec<String>, state: TurnState) -> AppResult<()> {
        let changed = ids.clone();
        blocking(&self.store, move |s| s.set_turn_states(&changed, state)).await?;
        self.emit_messages(conversation_id, ids).await;
        Ok(())
    }

    /// Tell the window these messages changed.
    async fn emit_messages(&self, conversation_id: &str, ids: Vec<String>) {
        for id in ids {
            let mid = id.clone();
            if let Ok(message) = blocking(&self.store, move |s| s.get_message(&mid)).await {
                self.updates.send(conversation_id, ConversationUpdateKind::MessageStored { message });
            }
        }
    }
}

/// The title of a fork, within the bound of a conversation title.
fn fork_title(title: &str) -> String {
    let base: String = title.chars().take(super::conversations::AUTO_TITLE_CHARS).collect();
    format!("{base} (fork)")
}
