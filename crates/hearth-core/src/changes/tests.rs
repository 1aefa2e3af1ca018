//! The record against real folders: checkpoints, change lists, diffs, and undo/redo that restores
//! bytes exactly and refuses to overwrite what someone else changed.

use std::path::Path;

use super::*;

struct Project {
    _tmp: tempfile::TempDir,
    folder: PathBuf,
    tracker: ChangeTracker,
}

fn project() -> Project {
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().join("project");
    std::fs::create_dir(&folder).unwrap();
    let tracker = ChangeTracker::new(tmp.path().join("records"));
    Project { _tmp: tmp, folder, tracker }
}

impl Project {
    fn write(&self, path: &str, bytes: impl AsRef<[u8]>) {
        let full = self.folder.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, bytes).unwrap();
    }

    fn read(&self, path: &str) -> Option<Vec<u8>> {
        std::fs::read(self.folder.join(path)).ok()
    }

    fn checkpoint(&self) -> Checkpoint {
        self.tracker.checkpoint("p1", &self.folder).unwrap()
    }

    fn undo(&self, turns: &[(Checkpoint, Checkpoint)], force: bool) -> Result<Vec<FileMove>, ChangesError> {
        let moves = self.tracker.undo_moves("p1", turns)?;
        self.tracker.apply("p1", &self.folder, &moves, force)?;
        Ok(moves)
    }
}

fn tree_of(folder: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = walkdir::WalkDir::new(folder)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| (e.path().strip_prefix(folder).unwrap().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
        .collect();
    files.sort();
    files
}

#[test]
fn a_turn_lists_what_it_created_changed_and_deleted_with_line_counts() {
    let p = project();
    p.write("keep.txt", "same\n");
    p.write("edit.txt", "one\ntwo\nthree\n");
    p.write("gone.txt", "a\nb\n");
    let before = p.checkpoint();
    p.write("new/made.txt", "x\ny\n");
    p.write("edit.txt", "one\n2\nthree\nfour\n");
    std::fs::remove_file(p.folder.join("gone.txt")).unwrap();
    let after = p.checkpoint();
    let list = p.tracker.changes("p1", &before, &after).unwrap();
    let by_path = |path: &str| list.files.iter().find(|f| f.path == path).unwrap().clone();
    assert_eq!(list.total_files, 3);
    assert_eq!((by_path("new/made.txt").kind, by_path("new/made.txt").additions, by_path("new/made.txt").deletions), (ChangeKind::Added, Some(2), Some(0)));
    assert_eq!((by_path("edit.txt").kind, by_path("edit.txt").additions, by_path("edit.txt").deletions), (ChangeKind::Modified, Some(2), Some(1)));
    assert_eq!((by_path("gone.txt").kind, by_path("gone.txt").deletions), (ChangeKind::Deleted, Some(2)));
    assert_eq!((list.additions, list.deletions), (4, 3));

    let diff = p.tracker.file_diff("p1", &before, &after, "edit.txt", 0).unwrap();
    let shown: Vec<(DiffLineKind, &str)> = diff.lines.iter().map(|l| (l.kind, l.text.as_str())).collect();
    assert_eq!(shown[0].0, DiffLineKind::Hunk);
    assert_eq!(&shown[1..], &[(DiffLineKind::Context, "one"), (DiffLineKind::Removed, "two"), (DiffLineKind::Added, "2"), (DiffLineKind::Context, "three"), (DiffLineKind::Added, "four")]);
    assert_eq!(diff.lines[2].old_line, Some(2));
    assert_eq!(diff.lines[3].new_line, Some(2));
    assert!(matches!(p.tracker.file_diff("p1", &before, &after, "keep.txt", 0), Err(ChangesError::NotInTurn(_))));
}

#[test]
fn binary_and_oversized_files_are_named_not_compared_and_long_diffs_are_paged() {
    let p = project();
    let before = p.checkpoint();
    p.write("logo.bin", [0u8, 159, 146, 150, 0, 1, 2, 3]);
    p.write("big.log", "line\n".repeat((MAX_DIFF_BLOB_BYTES as usize / 5) + 10));
    p.write("long.txt", (0..5000).map(|i| format!("{i}\n")).collect::<String>());
    let after = p.checkpoint();
    let list = p.tracker.changes("p1", &before, &after).unwrap();
    let file = |path: &str| list.files.iter().find(|f| f.path == path).unwrap().clone();
    assert!(file("logo.bin").binary && file("logo.bin").additions.is_none());
    assert!(file("big.log").too_large && file("big.log").additions.is_none());
    assert_eq!(file("long.txt").additions, Some(5000));
    let big = p.tracker.file_diff("p1", &before, &after, "big.log", 0).unwrap();
    assert!(big.lines.is_empty() && big.pages == 0 && big.change.too_large);
    let first = p.tracker.file_diff("p1", &before, &after, "long.txt", 0).unwrap();
    assert_eq!(first.pages, 3);
    assert_eq!(first.lines.len(), MAX_DIFF_LINES_PER_PAGE);
    let last = p.tracker.file_diff("p1", &before, &after, "long.txt", 2).unwrap();
    assert_eq!(last.lines.last().unwrap().text, "4999");
}

#[test]
fn undo_restores_bytes_exactly_and_redo_brings_the_turn_back() {
    let p = project();
    // Line endings the project's attributes would convert are kept as they are on disk.
    p.write(".gitattributes", "* text=auto eol=lf\n");
    p.write("edit.txt", "one\r\ntwo\r\n");
    p.write("script.sh", "#!/bin/sh\necho hi\n");
    std::fs::set_permissions(p.folder.join("script.sh"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    p.write("user-notes.txt", "mine, untouched\n");
    let original = tree_of(&p.folder);
    let before = p.checkpoint();
    p.write("edit.txt", "changed\n");
    p.write("deep/new/file.txt", "created");
    std::fs::remove_file(p.folder.join("script.sh")).unwrap();
    let after = p.checkpoint();
    let agent_left = tree_of(&p.folder);
    // The user's own work the agent never touched, changed after the turn: not the turn's.
    p.write("user-notes.txt", "mine, edited later\n");

    let moves = p.undo(&[(before.clone(), after.clone())], false).unwrap();
    assert_eq!(moves.len(), 3);
    let mut expected = original.clone();
    expected.iter_mut().find(|(path, _)| path == "user-notes.txt").unwrap().1 = b"mine, edited later\n".to_vec();
    assert_eq!(tree_of(&p.folder), expected, "every file the turn touched is back byte for byte; the user's is kept");
    assert!(!p.folder.join("deep").exists(), "folders only the created file needed are gone");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p.folder.join("script.sh")).unwrap().permissions());
    assert_eq!(mode & 0o111, 0o111, "the deleted script comes back executable");

    let redo: Vec<FileMove> = moves.iter().map(FileMove::reversed).collect();
    p.tracker.apply("p1", &p.folder, &redo, false).unwrap();
    let mut expected = agent_left.clone();
    expected.iter_mut().find(|(path, _)| path == "user-notes.txt").unwrap().1 = b"mine, edited later\n".to_vec();
    assert_eq!(tree_of(&p.folder), expected);
}

#[test]
fn a_file_edited_after_the_turn_is_reported_and_nothing_is_changed_unless_forced() {
    let p = project();
    p.write("a.txt", "a0");
    p.write("b.txt", "b0");
    let before = p.checkpoint();
    p.write("a.txt", "a1 by the agent");
    p.write("b.txt", "b1 by the agent");
    p.write("c.txt", "c1 created by the agent");
    let after = p.checkpoint();
    p.write("a.txt", "a2 by the user");
    std::fs::remove_file(p.folder.join("c.txt")).unwrap();
    let turns = [(before, after)];
    let Err(ChangesError::Conflicts(conflicts)) = p.undo(&turns, false) else { panic!("conflicts expected") };
    assert_eq!(conflicts, vec![Conflict { path: "a.txt".into(), kind: ConflictKind::Edited }], "c.txt is already as undo would leave it");
    assert_eq!(p.read("b.txt").unwrap(), b"b1 by the agent", "nothing changed on a refusal");
    let sentence = ChangesError::Conflicts(conflicts).to_string();
    assert!(sentence.contains("a.txt (edited since)") && sentence.contains("Nothing was changed"), "{sentence}");
    p.undo(&turns, true).unwrap();
    assert_eq!((p.read("a.txt").unwrap(), p.read("b.txt").unwrap()), (b"a0".to_vec(), b"b0".to_vec()));
}

#[test]
fn undoing_several_turns_goes_back_to_before_the_first() {
    let p = project();
    p.write("a.txt", "v0");
    let c0 = p.checkpoint();
    p.write("a.txt", "v1");
    p.write("b.txt", "made in turn 1");
    let c1 = p.checkpoint();
    p.write("a.txt", "v2");
    std::fs::remove_file(p.folder.join("b.txt")).unwrap();
    let c2 = p.checkpoint();
    let moves = p.undo(&[(c0.clone(), c1.clone()), (c1, c2)], false).unwrap();
    assert_eq!(p.read("a.txt").unwrap(), b"v0");
    assert_eq!(p.read("b.txt"), None);
    assert_eq!(moves.len(), 1, "b.txt was made and removed again: no move");
}

#[test]
fn ignored_files_and_nested_repositories_are_left_alone() {
    let p = project();
    p.write(".gitignore", "build/\n");
    p.write("build/out.o", "old object");
    std::fs::create_dir_all(p.folder.join("vendor/lib/.git")).unwrap();
    p.write("vendor/lib/code.c", "int x;");
    let before = p.checkpoint();
    p.write("build/out.o", "new object");
    p.write("vendor/lib/code.c", "int y;");
    p.write("src.txt", "tracked");
    let after = p.checkpoint();
    let list = p.tracker.changes("p1", &before, &after).unwrap();
    assert_eq!(list.files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(), vec!["src.txt"]);
    p.undo(&[(before, after)], false).unwrap();
    assert_eq!(p.read("build/out.o").unwrap(), b"new object");
    assert_eq!(p.read("vendor/lib/code.c").unwrap(), b"int y;");
    assert_eq!(p.read("src.txt"), None);
}

#[test]
fn inside_a_git_repository_the_users_index_and_history_are_untouched() {
    let p = project();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git").args(args).current_dir(&p.folder).env("GIT_AUTHOR_NAME", "t").env("GIT_AUTHOR_EMAIL", "t@t").env("GIT_COMMITTER_NAME", "t").env("GIT_COMMITTER_EMAIL", "t@t").output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    git(&["init", "-q"]);
    p.write("tracked.txt", "committed\n");
    git(&["add", "tracked.txt"]);
    git(&["commit", "-q", "-m", "first"]);
    p.write("staged.txt", "staged by the user\n");
    git(&["add", "staged.txt"]);
    p.write("untracked.txt", "the user's untracked work\n");
    let index_before = std::fs::read(p.folder.join(".git/index")).unwrap();
    let status_before = git(&["status", "--porcelain"]);
    let before = p.checkpoint();
    p.write("tracked.txt", "changed by the agent\n");
    let after = p.checkpoint();
    p.undo(&[(before, after)], false).unwrap();
    assert_eq!(p.read("tracked.txt").unwrap(), b"committed\n");
    assert_eq!(std::fs::read(p.folder.join(".git/index")).unwrap(), index_before, "the user's index is byte for byte the same");
    assert_eq!(git(&["status", "--porcelain"]), status_before);
    assert_eq!(p.read("untracked.txt").unwrap(), b"the user's untracked work\n");
}

#[test]
fn an_unknown_checkpoint_is_a_sentence() {
    let p = project();
    let real = p.checkpoint();
    let bogus = Checkpoint("0123456789012345678901234567890123456789".into());
    let err = p.tracker.changes("p1", &bogus, &real).unwrap_err();
    assert!(matches!(err, ChangesError::UnknownCheckpoint(_)), "{err}");
    assert!(err.to_string().contains("no longer kept"));
}
