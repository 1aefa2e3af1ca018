//! What an action of the app can fail with: one variant per kind of failure, each with a stable
//! [`ErrorCode`] the window (and anything else) branches on, and a Display that is the user's
//! sentence. The shell sends both across the IPC edge; nothing compares sentences.

use std::path::PathBuf;

use crate::binaries::opencode::LocateError;
use crate::binaries::ripgrep::RgError;
use crate::images::ImageError;
use crate::knowledge::KnowledgeError;
use crate::runtime::RuntimeError;
use crate::scripted_model::ModelServerError;
use crate::space::SpaceError;
use crate::store::StoreError;
use crate::toolbox::gateway::{GatewayError, GrantError};
use crate::toolbox::skills::{AddSkillError, SkillError};

/// A failure's meaning, stable across versions and wordings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub enum ErrorCode {
    /// The thing asked for does not exist (any more).
    NotFound,
    /// The input is not acceptable as given (empty, too long, malformed).
    InvalidInput,
    /// A bound was reached (too many of something, too large).
    LimitReached,
    /// A reply is running in the conversation.
    Busy,
    /// Nothing is running that could be stopped.
    NotRunning,
    /// The project folder is gone or unreadable.
    ProjectFolder,
    /// An attached image was refused.
    Image,
    /// The runtime (or ripgrep) is missing or the wrong version.
    RuntimeMissing,
    /// The runtime could not start.
    RuntimeStart,
    /// The runtime did not answer, refused, or died.
    RuntimeFailed,
    /// The runtime was stopped (Hearth is closing, or its configuration changed).
    RuntimeStopped,
    /// Hearth's own files (database, secrets, attachments, reports) could not be read or written.
    Storage,
    /// The knowledge base failed.
    Knowledge,
    /// The MCP gateway failed.
    Gateway,
    /// A skill package was refused.
    Skill,
    /// A self-test is running already, or none has run yet.
    Selftest,
    /// Undo or redo would overwrite files changed since the agent's turn; the sentence names them.
    ChangeConflict,
    /// The record of the project's files could not be read or written.
    Changes,
    /// A host could not be reached, or refused (its key, the user's key), or cannot run the runtime.
    Host,
    /// Hearth itself failed (a bug): the sentence says what.
    Internal,
}

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Space(#[from] SpaceError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    RuntimeMissing(#[from] LocateError),
    #[error(transparent)]
    RipgrepMissing(#[from] RgError),
    #[error(transparent)]
    AgentMissing(#[from] crate::acp::AgentMissing),
    #[error("There is no agent “{0}”; choose another runtime for this project.")]
    UnknownAgent(String),
    #[error("The built-in scripted model could not start: {0}")]
    BuiltinModel(#[from] ModelServerError),
    #[error(transparent)]
    Image(#[from] ImageError),
    #[error(transparent)]
    Knowledge(#[from] KnowledgeError),
    #[error(transparent)]
    Gateway(#[from] GatewayError),
    #[error(transparent)]
    Grant(#[from] GrantError),
    #[error(transparent)]
    Skill(#[from] SkillError),
    #[error(transparent)]
    AddSkill(#[from] AddSkillError),
    #[error("A reply is still running in this conversation; wait for it or stop it first.")]
    Busy,
    #[error("Nothing is running in this conversation.")]
    NotRunning,
    #[error("That attachment is no longer prepared; attach the image again.")]
    UnknownAttachment,
    #[error("The model profile “{0}” does not accept images; choose a profile with image input or remove the images.")]
    NoImageInput(String),
    #[error("Hearth could not write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("Choose the runtime binary by its full path; “{0}” is a relative one.")]
    RelativeBinaryPath(String),
    #[error("A self-test is already running; wait for it or cancel it.")]
    SelftestRunning,
    #[error("Run the self-test first.")]
    NoSelftestReport,
    #[error(transparent)]
    Changes(#[from] crate::changes::ChangesError),
    #[error("A reply is running in this project; undo and redo wait until it ends (or stop it first).")]
    TurnRunningInProject,
    #[error("Hearth is undoing or redoing changes in this project; try again when it is done.")]
    Rewinding,
    #[error("Hearth has no record of what this reply changed (it ran in Ask mode, or before Hearth kept records), so it cannot be undone.")]
    NoChangesRecorded,
    #[error("Nothing in this conversation is undone.")]
    NothingToRedo,
    #[error("Hearth stopped a task unexpectedly: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error(transparent)]
    Remote(#[from] crate::remote::RemoteError),
    #[error("Agents over ACP run only for projects on this machine; a project on another host runs on OpenCode's server there.")]
    AgentsLocalOnly,
    #[error("Undo and redo keep a record of the files on this machine, so they are not offered for a project on another host.")]
    UndoLocalOnly,
}

impl AppError {
    pub fn code(&self) -> ErrorCode {
        match self {
            AppError::Store(e) => store_code(e),
            AppError::Space(_) => ErrorCode::ProjectFolder,
            AppError::Runtime(e) => runtime_code(e),
            AppError::RuntimeMissing(_) | AppError::RipgrepMissing(_) | AppError::AgentMissing(_) | AppError::UnknownAgent(_) => ErrorCode::RuntimeMissing,
            AppError::BuiltinModel(_) => ErrorCode::RuntimeStart,
            AppError::Image(_) | AppError::NoImageInput(_) | AppError::UnknownAttachment => ErrorCode::Image,
            AppError::Knowledge(e) => knowledge_code(e),
            AppError::Gateway(_) => ErrorCode::Gateway,
            AppError::Grant(_) => ErrorCode::LimitReached,
            AppError::Skill(_) | AppError::AddSkill(_) => ErrorCode::Skill,
            AppError::RelativeBinaryPath(_) => ErrorCode::InvalidInput,
            AppError::Busy => ErrorCode::Busy,
            AppError::NotRunning => ErrorCode::NotRunning,
            AppError::Write { .. } => ErrorCode::Storage,
            AppError::SelftestRunning | AppError::NoSelftestReport => ErrorCode::Selftest,
            AppError::Changes(crate::changes::ChangesError::Conflicts(_)) => ErrorCode::ChangeConflict,
            AppError::Changes(_) => ErrorCode::Changes,
            AppError::TurnRunningInProject | AppError::Rewinding => ErrorCode::Busy,
            AppError::NoChangesRecorded | AppError::NothingToRedo => ErrorCode::NotFound,
            AppError::Task(_) => ErrorCode::Internal,
            AppError::Remote(crate::remote::RemoteError::NoFolder { .. } | crate::remote::RemoteError::Relative { .. }) => ErrorCode::ProjectFolder,
            AppError::Remote(_) => ErrorCode::Host,
            AppError::AgentsLocalOnly | AppError::UndoLocalOnly => ErrorCode::InvalidInput,
        }
    }
}

fn store_code(e: &StoreError) -> ErrorCode {
    match e {
        StoreError::NotFound { .. } => ErrorCode::NotFound,
        StoreError::Space(_) => ErrorCode::ProjectFolder,
        StoreError::Empty { .. }
        | StoreError::TooLong { .. }
        | StoreError::InvalidBaseUrl { .. }
        | StoreError::InvalidEnvName { .. }
        | StoreError::BuiltinProfile
        | StoreError::StatusChange { .. }
        | StoreError::NotStreaming { .. }
        | StoreError::RuntimeFixed => ErrorCode::InvalidInput,
        StoreError::MessageTooLong { .. }
        | StoreError::ReplyTooLong
        | StoreError::TooManyAttachments { .. }
        | StoreError::ThumbnailTooLarge { .. }
        | StoreError::TooMany { .. }
        | StoreError::SettingTooLarge { .. } => ErrorCode::LimitReached,
        _ => ErrorCode::Storage,
    }
}

fn runtime_code(e: &RuntimeError) -> ErrorCode {
    match e {
        RuntimeError::Start(_) => ErrorCode::RuntimeStart,
        RuntimeError::Died(_) | RuntimeError::Unreachable(_) | RuntimeError::Refused(_) => ErrorCode::RuntimeFailed,
        RuntimeError::InvalidRequest(_) | RuntimeError::WrongSpace { .. } | RuntimeError::Unsupported { .. } => ErrorCode::InvalidInput,
        RuntimeError::NoSession => ErrorCode::NotFound,
        RuntimeError::Cancelled | RuntimeError::Disposed | RuntimeError::Replaced => ErrorCode::RuntimeStopped,
    }
}

fn knowledge_code(e: &KnowledgeError) -> ErrorCode {
    match e {
        KnowledgeError::LibraryNotFound(_) | KnowledgeError::DocumentNotFound(_) | KnowledgeError::SourceMissing { .. } => ErrorCode::NotFound,
        KnowledgeError::InvalidName { .. } | KnowledgeError::OutsideRoot { .. } => ErrorCode::InvalidInput,
        KnowledgeError::TooManyLibraries { .. } => ErrorCode::LimitReached,
        _ => ErrorCode::Knowledge,
    }
}

pub type AppResult<T> = Result<T, AppError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_has_its_code_and_its_sentence() {
        assert_eq!(AppError::Busy.code(), ErrorCode::Busy);
        assert!(AppError::Busy.to_string().contains("still running"));
        let missing = AppError::from(StoreError::NotFound { what: "conversation", id: "c1".into() });
        assert_eq!(missing.code(), ErrorCode::NotFound);
        let too_long = AppError::from(StoreError::MessageTooLong { bytes: usize::MAX / 2 });
        assert_eq!(too_long.code(), ErrorCode::LimitReached);
        assert_eq!(AppError::from(RuntimeError::Disposed).code(), ErrorCode::RuntimeStopped);
        assert_eq!(AppError::from(SpaceError::Missing { path: "/gone".into() }).code(), ErrorCode::ProjectFolder);
    }
}
