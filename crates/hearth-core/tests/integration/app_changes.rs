//! Review and undo against the real runtime and the built-in scripted model: a turn's change list
//! and diffs are exact, undo restores the files byte for byte and the runtime forgets the turn,
//! redo brings both back, a user's own edits are reported and never overwritten silently, forks
//! and the agent's plan come from the runtime.

use crate::support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hearth_core::app::*;
use hearth_core::changes::{ChangeKind, DiffLineKind};
use hearth_core::runtime::PlanStatus;
use hearth_core::store::{Message, MessageStatus, TurnState};

use support::{app_locate_inputs, app_options, Recorder};

struct App {
    _tmp: tempfile::TempDir,
    folder: PathBuf,
    hearth: Arc<Hearth>,
    events: Arc<Recorder>,
    conversation: String,
    turns: usize,
}

async fn app(setup: impl FnOnce(&Path)) -> Option<App> {
    support::require_runtime().await?;
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().join("project");
    std::fs::create_dir(&folder).unwrap();
    setup(&folder);
    let events = Arc::new(Recorder::default());
    let hearth = Hearth::open(app_options(&tmp.path().join("data"), app_locate_inputs()), events.clone()).await.unwrap();
    let project = hearth.store().add_project(&folder).unwrap();
    let conversation = hearth.store().create_conversation(&project.id, "Edits").unwrap().id;
    Some(App { _tmp: tmp, folder: std::fs::canonicalize(folder).unwrap(), hearth, events, conversation, turns: 0 })
}

impl App {
    async fn turn(&mut self, prompt: &str) -> Message {
        self.hearth.send_message(&self.conversation, prompt.into(), Vec::new()).await.unwrap();
        self.turns += 1;
        let reply = self.events.finished(&self.conversation, self.turns).await;
        assert_eq!(reply.status, MessageStatus::Done, "{reply:?}");
        reply
    }

    fn read(&self, path: &str) -> Option<Vec<u8>> {
        std::fs::read(self.folder.join(path)).ok()
    }

    fn write(&self, path: &str, text: &str) {
        std::fs::write(self.folder.join(path), text).unwrap();
    }

    fn state_of(&self, reply_id: &str) -> TurnState {
        let messages = self.hearth.store().list_messages(&self.conversation).unwrap();
        messages.into_iter().find(|m| m.id == reply_id).and_then(|m| m.changes).expect("a recorded turn").state
    }
}

const THREE_EDITS: &str = "write notes/a.txt first line\\nsecond line\nwrite b.txt only line\nedit c.txt beta -> gamma";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_turn_that_writes_and_edits_is_listed_exactly_undone_byte_for_byte_and_redone() {
    let Some(mut app) = app(|dir| {
        std::fs::write(dir.join("c.txt"), "alpha\r\nbeta\r\n").unwrap();
        std::fs::write(dir.join("mine.txt"), "the user's own file\n").unwrap();
    })
    .await
    else {
        return;
    };
    let reply = app.turn(THREE_EDITS).await;
    assert_eq!(reply.text, "Done: wrote notes/a.txt, wrote b.txt, edited c.txt.");
    assert_eq!(app.read("notes/a.txt").unwrap(), b"first line\nsecond line");
    assert_eq!(app.read("c.txt").unwrap(), b"alpha\r\ngamma\r\n", "the agent's own edit tool changed the file");

    // The change list the window shows with the reply.
    let changes = reply.changes.clone().expect("the reply carries its changes");
    assert_eq!(changes.state, TurnState::Kept);
    let files: Vec<(&str, ChangeKind, Option<u32>, Option<u32>)> = changes.list.files.iter().map(|f| (f.path.as_str(), f.kind, f.additions, f.deletions)).collect();
    assert_eq!(
        files,
        vec![("b.txt", ChangeKind::Added, Some(1), Some(0)), ("c.txt", ChangeKind::Modified, Some(1), Some(1)), ("notes/a.txt", ChangeKind::Added, Some(2), Some(0))]
    );
    let diff = app.hearth.file_diff(&reply.id, "c.txt", 0).await.unwrap();
    let lines: Vec<(DiffLineKind, &str)> = diff.lines.iter().skip(1).map(|l| (l.kind, l.text.as_str())).collect();
    assert_eq!(lines, vec![(DiffLineKind::Context, "alpha"), (DiffLineKind::Removed, "beta"), (DiffLineKind::Added, "gamma")]);

    // Undo: the two created files are gone, the edited one is back byte for byte, the user's own
    // file is untouched; the turn is kept in the conversation, shown as undone.
    app.write("mine.txt", "the user's own file, edited meanwhile\n");
    app.hearth.undo_turn(&app.conversation, &reply.id, false).await.unwrap();
    assert_eq!(app.read("notes/a.txt"), None);
    assert!(!app.folder.join("notes").exists());
    assert_eq!(app.read("b.txt"), None);
    assert_eq!(app.read("c.txt").unwrap(), b"alpha\r\nbeta\r\n");
    assert_eq!(app.read("mine.txt").unwrap(), b"the user's own file, edited meanwhile\n");
    assert_eq!(app.state_of(&reply.id), TurnState::Undone);
    assert_eq!(app.hearth.store().list_messages(&app.conversation).unwrap().len(), 2, "undone, not deleted");

    // Redo brings the agent's files back.
    app.hearth.redo_turns(&app.conversation, false).await.unwrap();
    assert_eq!(app.read("notes/a.txt").unwrap(), b"first line\nsecond line");
    assert_eq!(app.read("b.txt").unwrap(), b"only line");
    assert_eq!(app.read("c.txt").unwrap(), b"alpha\r\ngamma\r\n");
    assert_eq!(app.state_of(&reply.id), TurnState::Kept);

    // Undo again, then a new message: it works on the restored files, and the runtime no longer
    // has the undone turn in the history it sends the model.
    app.hearth.undo_turn(&app.conversation, &reply.id, false).await.unwrap();
    let next = app.turn("read c.txt").await;
    assert!(next.text.contains("beta") && !next.text.contains("gamma"), "{}", next.text);
    let model = app.hearth.builtin_model().unwrap();
    let last = model.requests().into_iter().rev().find(|r| r.kind == hearth_core::scripted_model::RequestKind::Agent).unwrap();
    assert!(!last.contains_text("write notes/a.txt"), "the undone turn is not in the model's history");
    assert_eq!(app.state_of(&reply.id), TurnState::Discarded, "redo is no longer offered");
    assert!(matches!(app.hearth.redo_turns(&app.conversation, false).await, Err(AppError::NothingToRedo)));
    app.hearth.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn in_a_git_repository_undo_leaves_the_users_index_and_untracked_files_alone() {
    let git = |dir: &Path, args: &[&str]| {
        let out = std::process::Command::new("git").args(args).current_dir(dir).env("GIT_AUTHOR_NAME", "t").env("GIT_AUTHOR_EMAIL", "t@t").env("GIT_COMMITTER_NAME", "t").env("GIT_COMMITTER_EMAIL", "t@t").output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let Some(mut app) = app(|dir| {
        git(dir, &["init", "-q"]);
        std::fs::write(dir.join("c.txt"), "alpha\nbeta\n").unwrap();
        git(dir, &["add", "c.txt"]);
        git(dir, &["commit", "-q", "-m", "first"]);
        std::fs::write(dir.join("staged.txt"), "staged by the user\n").unwrap();
        git(dir, &["add", "staged.txt"]);
        std::fs::write(dir.join("untracked.txt"), "untracked work\n").unwrap();
    })
    .await
    else {
        return;
    };
    let index = std::fs::read(app.folder.join(".git/index")).unwrap();
    let status = git(&app.folder, &["status", "--porcelain"]);
    let reply = app.turn(THREE_EDITS).await;
    assert_eq!(reply.changes.as_ref().unwrap().list.total_files, 3);
    app.hearth.undo_turn(&app.conversation, &reply.id, false).await.unwrap();
    assert_eq!(std::fs::read(app.folder.join(".git/index")).unwrap(), index, "the user's index is byte for byte as it was");
    assert_eq!(git(&app.folder, &["status", "--porcelain"]), status);
    assert_eq!(app.read("untracked.txt").unwrap(), b"untracked work\n");
    assert_eq!(app.read("c.txt").unwrap(), b"alpha\nbeta\n");
    app.hearth.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_file_the_user_edited_after_the_turn_is_named_and_not_overwritten() {
    let Some(mut app) = app(|dir| std::fs::write(dir.join("c.txt"), "alpha\nbeta\n").unwrap()).await else { return };
    let reply = app.turn(THREE_EDITS).await;
    app.write("b.txt", "the user rewrote this\n");
    let err = app.hearth.undo_turn(&app.conversation, &reply.id, false).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::ChangeConflict);
    assert!(err.to_string().contains("b.txt (edited since)"), "{err}");
    assert_eq!(app.read("b.txt").unwrap(), b"the user rewrote this\n");
    assert_eq!(app.read("notes/a.txt").unwrap(), b"first line\nsecond line", "nothing was undone");
    assert_eq!(app.state_of(&reply.id), TurnState::Kept);
    // Asked and confirmed: undone, the user's edit included.
    app.hearth.undo_turn(&app.conversation, &reply.id, true).await.unwrap();
    assert_eq!(app.read("b.txt"), None);
    assert_eq!(app.read("c.txt").unwrap(), b"alpha\nbeta\n");
    app.hearth.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn binary_and_huge_files_are_named_undo_waits_for_a_running_turn_and_a_gone_folder_is_a_sentence() {
    let Some(mut app) = app(|_| {}).await else { return };
    let reply = app.turn("run head -c 50000000 /dev/zero | tr '\\0' 'x' | fold -w 100 > big.txt\nrun printf '\\000\\001\\002PNG' > blob.bin").await;
    assert!(std::fs::metadata(app.folder.join("big.txt")).unwrap().len() > 50_000_000, "the agent generated a 50 MB file");
    let list = reply.changes.clone().unwrap().list;
    let file = |p: &str| list.files.iter().find(|f| f.path == p).unwrap_or_else(|| panic!("{p} in {list:?}")).clone();
    assert!(file("big.txt").too_large && file("big.txt").additions.is_none());
    assert!(file("blob.bin").binary, "{:?}", file("blob.bin"));
    let big = app.hearth.file_diff(&reply.id, "big.txt", 0).await.unwrap();
    assert!(big.change.too_large && big.lines.is_empty());

    // A turn running in the project: undo is refused with a sentence, and nothing changes.
    app.hearth.send_message(&app.conversation, "[hold] wait".into(), Vec::new()).await.unwrap();
    let err = app.hearth.undo_turn(&app.conversation, &reply.id, false).await.unwrap_err();
    assert!(matches!(err, AppError::TurnRunningInProject), "{err}");
    assert!(err.to_string().contains("running in this project"));
    assert!(app.folder.join("big.txt").exists());
    app.hearth.cancel_turn(&app.conversation).unwrap();
    app.turns += 1;
    app.events.finished(&app.conversation, app.turns).await;

    app.hearth.undo_turn(&app.conversation, &reply.id, false).await.unwrap();
    assert!(!app.folder.join("big.txt").exists() && !app.folder.join("blob.bin").exists());

    std::fs::remove_dir_all(&app.folder).unwrap();
    let err = app.hearth.redo_turns(&app.conversation, false).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::ProjectFolder, "{err}");
    app.hearth.shutdown().await;
}

/// The window shows a reply as ended before its turn has recorded its changes (a large file takes
/// a moment): what the user does the moment they see it is taken, not refused as still running.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn what_the_user_does_the_moment_a_reply_shows_as_ended_waits_for_the_turn_to_finish() {
    let Some(mut app) = app(|_| {}).await else { return };
    let big = "run head -c 30000000 /dev/zero | tr '\\0' 'x' | fold -w 100 > big.txt";
    app.hearth.send_message(&app.conversation, big.into(), Vec::new()).await.unwrap();
    app.turns += 1;
    let reply = app.events.reply_ended_shown(&app.conversation, app.turns).await;
    // At once, as a user clicking Undo on the reply just shown as done.
    app.hearth.undo_turn(&app.conversation, &reply, false).await.expect("undo is taken once the turn's changes are recorded");
    assert!(!app.folder.join("big.txt").exists(), "the turn's file is gone");

    app.hearth.send_message(&app.conversation, big.into(), Vec::new()).await.unwrap();
    app.turns += 1;
    app.events.reply_ended_shown(&app.conversation, app.turns).await;
    // At once, as a user pressing Enter on the next message.
    app.hearth.send_message(&app.conversation, "run echo next".into(), Vec::new()).await.expect("the next message is taken");
    app.turns += 1;
    let next = app.events.finished(&app.conversation, app.turns).await;
    assert_eq!(next.status, MessageStatus::Done, "{next:?}");
    app.hearth.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fork_starts_from_the_reply_and_the_plan_comes_from_the_runtime() {
    let Some(mut app) = app(|dir| std::fs::write(dir.join("c.txt"), "alpha\nbeta\n").unwrap()).await else { return };
    let first = app.turn("plan: [x] read the code; [~] change it; run the tests").await;
    let plan = app.hearth.conversation_plan(&app.conversation).await.unwrap();
    let steps: Vec<(&str, PlanStatus)> = plan.iter().map(|s| (s.content.as_str(), s.status)).collect();
    assert_eq!(steps, vec![("read the code", PlanStatus::Completed), ("change it", PlanStatus::InProgress), ("run the tests", PlanStatus::Pending)]);
    app.turn("the second question").await;

    let fork = app.hearth.fork_conversation(&app.conversation, &first.id).await.unwrap();
    assert_ne!(fork.native_session_id, app.hearth.store().get_conversation(&app.conversation).unwrap().native_session_id);
    let texts: Vec<String> = app.hearth.store().list_messages(&fork.id).unwrap().into_iter().map(|m| m.text).collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert_eq!(app.hearth.store().list_messages(&app.conversation).unwrap().len(), 4, "the original is untouched");

    // The fork continues in its own session: the model sees the first turn, not the second.
    app.hearth.send_message(&fork.id, "read c.txt".into(), Vec::new()).await.unwrap();
    let reply = app.events.finished(&fork.id, 1).await;
    assert_eq!(reply.status, MessageStatus::Done, "{reply:?}");
    let model = app.hearth.builtin_model().unwrap();
    let last = model.requests().into_iter().rev().find(|r| r.kind == hearth_core::scripted_model::RequestKind::Agent && r.contains_text("read c.txt")).unwrap();
    assert!(last.contains_text("read the code") && !last.contains_text("the second question"), "the fork's history is the first turn only");
    app.hearth.shutdown().await;
}
