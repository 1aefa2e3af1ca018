//! Differences between two checkpoints: the change list of a turn, and one file's lines.

use git2::{Delta, Diff, DiffOptions, Patch, Repository, Tree};

use super::{ChangeKind, ChangeList, ChangesError, FileChange, MAX_LISTED_CHANGES};

/// Largest side of a file compared line by line; a larger file is named "too large to show".
pub const MAX_DIFF_BLOB_BYTES: u64 = 4 * 1024 * 1024;
/// Lines of one file's diff sent to the window at once.
pub const MAX_DIFF_LINES_PER_PAGE: usize = 2_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub enum DiffLineKind {
    /// A hunk's header (`@@ -1,3 +1,4 @@`).
    Hunk,
    Context,
    Added,
    Removed,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct DiffLine {
    pub kind: DiffLineKind,
    pub old_line: Option<u32>,
    pub new_line: Option<u32>,
    /// Without its line ending.
    pub text: String,
}

/// One page of one file's difference.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct FileDiff {
    pub change: FileChange,
    pub lines: Vec<DiffLine>,
    /// This page (from 0) and how many there are; a binary or too large file has none.
    pub page: u32,
    pub pages: u32,
}

fn options() -> DiffOptions {
    let mut opts = DiffOptions::new();
    // Over the bound, git calls a file binary without reading it through; told apart below.
    opts.max_size(MAX_DIFF_BLOB_BYTES as i64).context_lines(3).ignore_submodules(true);
    opts
}

fn tree_diff<'r>(repo: &'r Repository, before: &Tree, after: &Tree, path: Option<&str>) -> Result<Diff<'r>, ChangesError> {
    let mut opts = options();
    if let Some(path) = path {
        opts.pathspec(path).disable_pathspec_match(true);
    }
    repo.diff_tree_to_tree(Some(before), Some(after), Some(&mut opts)).map_err(ChangesError::Scan)
}

fn kind(delta: Delta) -> ChangeKind {
    match delta {
        Delta::Added => ChangeKind::Added,
        Delta::Deleted => ChangeKind::Deleted,
        _ => ChangeKind::Modified,
    }
}

fn path_of(delta: &git2::DiffDelta) -> String {
    delta.new_file().path().or(delta.old_file().path()).map(|p| p.to_string_lossy().replace('\\', "/")).unwrap_or_default()
}

/// The paths that differ, without reading any file's lines.
pub(super) fn changed_paths(repo: &Repository, before: &Tree, after: &Tree) -> Result<Vec<String>, ChangesError> {
    let diff = tree_diff(repo, before, after, None)?;
    Ok(diff.deltas().map(|d| path_of(&d)).collect())
}

/// A blob's size from its header, without reading it (0 for none: an added or deleted side).
fn blob_size(odb: &git2::Odb, id: git2::Oid) -> u64 {
    if id.is_zero() {
        return 0;
    }
    odb.read_header(id).map_or(0, |(size, _)| size as u64)
}

fn file_change<'d>(odb: &git2::Odb, diff: &Diff<'d>, idx: usize) -> Result<(FileChange, Option<Patch<'d>>), ChangesError> {
    let delta = diff.get_delta(idx).expect("delta index in range");
    let too_large = blob_size(odb, delta.old_file().id()) > MAX_DIFF_BLOB_BYTES || blob_size(odb, delta.new_file().id()) > MAX_DIFF_BLOB_BYTES;
    let mut change = FileChange { path: path_of(&delta), kind: kind(delta.status()), additions: None, deletions: None, binary: false, too_large };
    if too_large {
        return Ok((change, None));
    }
    let patch = Patch::from_diff(diff, idx).map_err(ChangesError::Scan)?;
    // Loading the patch is what tells a binary file apart.
    let binary = patch.as_ref().is_none_or(|p| p.delta().flags().is_binary());
    change.binary = binary;
    let Some(patch) = patch.filter(|_| !binary) else { return Ok((change, None)) };
    let (_, additions, deletions) = patch.line_stats().map_err(ChangesError::Scan)?;
    change.additions = Some(additions as u32);
    change.deletions = Some(deletions as u32);
    Ok((change, Some(patch)))
}

pub(super) fn change_list(repo: &Repository, before: &Tree, after: &Tree) -> Result<ChangeList, ChangesError> {
    let diff = tree_diff(repo, before, after, None)?;
    let odb = repo.odb().map_err(ChangesError::Scan)?;
    let total = diff.deltas().len();
    let mut list = ChangeList { total_files: total as u32, ..Default::default() };
    for idx in 0..total {
        let (change, _) = file_change(&odb, &diff, idx)?;
        list.additions += change.additions.unwrap_or(0);
        list.deletions += change.deletions.unwrap_or(0);
        if list.files.len() < MAX_LISTED_CHANGES {
            list.files.push(change);
        }
    }
    Ok(list)
}

pub(super) fn file_diff(repo: &Repository, before: &Tree, after: &Tree, path: &str, page: u32) -> Result<FileDiff, ChangesError> {
    let diff = tree_diff(repo, before, after, Some(path))?;
    let idx = diff.deltas().position(|d| path_of(&d) == path).ok_or_else(|| ChangesError::NotInTurn(path.to_owned()))?;
    let odb = repo.odb().map_err(ChangesError::Scan)?;
    let (change, patch) = file_change(&odb, &diff, idx)?;
    let Some(patch) = patch else { return Ok(FileDiff { change, lines: Vec::new(), page: 0, pages: 0 }) };
    let mut lines = Vec::new();
    for h in 0..patch.num_hunks() {
        let (hunk, count) = patch.hunk(h).map_err(ChangesError::Scan)?;
        lines.push(DiffLine { kind: DiffLineKind::Hunk, old_line: None, new_line: None, text: String::from_utf8_lossy(hunk.header()).trim_end().to_owned() });
        for l in 0..count {
            let line = patch.line_in_hunk(h, l).map_err(ChangesError::Scan)?;
            let kind = match line.origin() {
                '+' => DiffLineKind::Added,
                '-' => DiffLineKind::Removed,
                ' ' => DiffLineKind::Context,
                // "\ No newline at end of file" and the like: not a line of the file.
                _ => continue,
            };
            let text = String::from_utf8_lossy(line.content());
            lines.push(DiffLine { kind, old_line: line.old_lineno(), new_line: line.new_lineno(), text: text.trim_end_matches(['\n', '\r']).to_owned() });
        }
    }
    let pages = lines.len().div_ceil(MAX_DIFF_LINES_PER_PAGE).max(1) as u32;
    let page = page.min(pages - 1);
    let start = page as usize * MAX_DIFF_LINES_PER_PAGE;
    let lines = lines.into_iter().skip(start).take(MAX_DIFF_LINES_PER_PAGE).collect();
    Ok(FileDiff { change, lines, page, pages })
}
