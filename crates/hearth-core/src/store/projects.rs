//! Projects: folders the user works in. The store only remembers them; it never touches the folder.

use std::path::Path;

use rusqlite::{params, OptionalExtension, Row};

use super::error::{check_name, StoreError, StoreResult};
use super::{expect_one, new_id, now_ms, Store, MAX_NAME_CHARS, MAX_PROJECTS};
use crate::runtime::{OutsideProject, RuntimeChoice};

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct Project {
    pub id: String,
    pub name: String,
    /// Canonical real path of the folder (on `host`, for a project there).
    pub path: String,
    /// The host the folder is on (anything `ssh` takes); `None` for a folder on this machine.
    pub host: Option<String>,
    pub added_at: i64,
    pub last_opened_at: i64,
    /// What happens when the agent reaches outside the folder: refused, or the user is asked.
    pub outside_project: OutsideProject,
    /// Which runtime runs its new conversations.
    pub runtime: RuntimeChoice,
}

const COLUMNS: &str = "id, name, path, added_at, last_opened_at, outside_project, runtime, host";

/// The `path` column of a project on `host`: unique across hosts and this machine.
fn locator(host: Option<&str>, path: &str) -> String {
    match host {
        Some(host) => format!("ssh://{host}{path}"),
        None => path.to_string(),
    }
}

fn outside_text(policy: OutsideProject) -> &'static str {
    match policy {
        OutsideProject::Deny => "deny",
        OutsideProject::Ask => "ask",
    }
}

fn from_row(row: &Row<'_>) -> rusqlite::Result<Project> {
    // Anything but "ask" reads as the safe default.
    let outside = if row.get::<_, String>(5)? == "ask" { OutsideProject::Ask } else { OutsideProject::Deny };
    let host: Option<String> = row.get(7)?;
    let stored: String = row.get(2)?;
    let path = match &host {
        Some(h) => stored.strip_prefix(&format!("ssh://{h}")).map(str::to_owned).unwrap_or(stored),
        None => stored,
    };
    Ok(Project {
        id: row.get(0)?,
        name: row.get(1)?,
        path,
        host,
        added_at: row.get(3)?,
        last_opened_at: row.get(4)?,
        outside_project: outside,
        runtime: RuntimeChoice::from_stored(&row.get::<_, String>(6)?),
    })
}

impl Store {
    /// Remember a folder as a project, named after the folder. The path is resolved to its canonical
    /// form first, so adding the same folder again (another spelling, a symlink) returns the project
    /// already there instead of failing.
    pub fn add_project(&self, folder: &Path) -> StoreResult<Project> {
        let space = crate::space::resolve_local(folder)?;
        self.add_project_in(&space)
    }

    /// Remember the folder `space` names — on this machine, or already resolved on its host — as a
    /// project named after the folder; the project already there for it, if there is one.
    pub fn add_project_in(&self, space: &crate::space::ExecutionSpace) -> StoreResult<Project> {
        let path = space.root.to_string_lossy().into_owned();
        let host = space.host().map(str::to_owned);
        let name = space.root.file_name().map_or_else(|| path.clone(), |n| n.to_string_lossy().into_owned());
        let name: String = name.chars().take(MAX_NAME_CHARS).collect();
        let stored = locator(host.as_deref(), &path);

        let inner = self.lock();
        let existing = inner
            .conn
            .query_row(&format!("SELECT {COLUMNS} FROM projects WHERE path = ?1"), [&stored], from_row)
            .optional()?;
        if let Some(project) = existing {
            return Ok(project);
        }
        let count: i64 = inner.conn.query_row("SELECT count(*) FROM projects", [], |r| r.get(0))?;
        if count as usize >= MAX_PROJECTS {
            return Err(StoreError::TooMany { what: "projects", max: MAX_PROJECTS });
        }
        let now = now_ms();
        let project = Project {
            id: new_id(),
            name,
            path,
            host,
            added_at: now,
            last_opened_at: now,
            outside_project: OutsideProject::default(),
            runtime: RuntimeChoice::default(),
        };
        inner.conn.execute(
            &format!("INSERT INTO projects ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"),
            params![project.id, project.name, stored, project.added_at, project.last_opened_at, outside_text(project.outside_project), project.runtime.as_stored(), project.host],
        )?;
        tracing::info!(id = %project.id, path = %project.path, host = ?project.host, "project added");
        Ok(project)
    }

    /// Every project, most recently opened first.
    pub fn list_projects(&self) -> StoreResult<Vec<Project>> {
        let inner = self.lock();
        let mut stmt = inner
            .conn
            .prepare_cached(&format!("SELECT {COLUMNS} FROM projects ORDER BY last_opened_at DESC, added_at DESC, rowid DESC"))?;
        let rows = stmt.query_map([], from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn get_project(&self, id: &str) -> StoreResult<Project> {
        let inner = self.lock();
        inner
            .conn
            .query_row(&format!("SELECT {COLUMNS} FROM projects WHERE id = ?1"), [id], from_row)
            .optional()?
            .ok_or_else(|| StoreError::NotFound { what: "project", id: id.to_owned() })
    }

    pub fn rename_project(&self, id: &str, name: &str) -> StoreResult<()> {
        let name = name.trim();
        check_name("project name", name, MAX_NAME_CHARS)?;
        let changed = self.lock().conn.execute("UPDATE projects SET name = ?2 WHERE id = ?1", params![id, name])?;
        expect_one(changed, "project", id)
    }

    /// Whether the agent is refused or the user asked when a turn reaches outside the folder. Takes
    /// effect from the next message of each conversation.
    pub fn set_project_outside_policy(&self, id: &str, policy: OutsideProject) -> StoreResult<()> {
        let changed = self.lock().conn.execute("UPDATE projects SET outside_project = ?2 WHERE id = ?1", params![id, outside_text(policy)])?;
        expect_one(changed, "project", id)
    }

    /// Which runtime runs the project's conversations from now on (conversations that already
    /// have messages keep theirs).
    pub fn set_project_runtime(&self, id: &str, runtime: &RuntimeChoice) -> StoreResult<()> {
        let changed = self.lock().conn.execute("UPDATE projects SET runtime = ?2 WHERE id = ?1", params![id, runtime.as_stored()])?;
        expect_one(changed, "project", id)
    }

    /// Forget a project and its conversations. The folder on disk is never touched.
    pub fn remove_project(&self, id: &str) -> StoreResult<()> {
        let mut inner = self.lock();
        let changed = inner.conn.execute("DELETE FROM projects WHERE id = ?1", [id])?;
        expect_one(changed, "project", id)?;
        inner.forget_pending_of_deleted();
        tracing::info!(id, "project removed");
        Ok(())
    }

    /// Record that the user opened the project now (it moves to the top of the list).
    pub fn touch_project_opened(&self, id: &str) -> StoreResult<()> {
        let inner = self.lock();
        // Never go backwards, even if the clock does: the order is what the user sees.
        let changed = inner.conn.execute(
            "UPDATE projects SET last_opened_at = max(?2, (SELECT coalesce(max(last_opened_at), 0) + 1 FROM projects)) WHERE id = ?1",
            params![id, now_ms()],
        )?;
        expect_one(changed, "project", id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::{open_at, project_dir};

    #[test]
    fn adding_a_folder_twice_returns_the_same_project() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_at(dir.path());
        let folder = project_dir(dir.path(), "app");
        let first = store.add_project(&folder).unwrap();
        assert_eq!(first.name, "app");
        assert_eq!(first.path, folder.to_str().unwrap());

        // Another spelling of the same folder.
        let spelled = folder.join("..").join("app");
        let again = store.add_project(&spelled).unwrap();
        assert_eq!(again.id, first.id);
        assert_eq!(store.list_projects().unwrap().len(), 1);
    }

    #[test]
    fn the_same_path_here_and_on_two_hosts_is_three_projects_each_read_back_with_its_host() {
        let dir = tempfile::tempdir().unwrap();
        let folder = project_dir(dir.path(), "app");
        let path = folder.to_str().unwrap();
        let (here, box_a, box_b) = {
            let store = open_at(dir.path());
            let here = store.add_project(&folder).unwrap();
            let a = store.add_project_in(&crate::space::remote("box-a", path).unwrap()).unwrap();
            let b = store.add_project_in(&crate::space::remote("me@box-b", path).unwrap()).unwrap();
            assert_eq!(store.add_project_in(&crate::space::remote("box-a", path).unwrap()).unwrap().id, a.id, "the same folder on the same host");
            (here, a, b)
        };
        let store = open_at(dir.path());
        let listed = store.list_projects().unwrap();
        assert_eq!(listed.len(), 3);
        for (p, host) in [(&here, None), (&box_a, Some("box-a")), (&box_b, Some("me@box-b"))] {
            let back = store.get_project(&p.id).unwrap();
            assert_eq!((back.host.as_deref(), back.path.as_str(), back.name.as_str()), (host, path, "app"));
        }
    }

    #[test]
    fn projects_list_most_recently_opened_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_at(dir.path());
        let a = store.add_project(&project_dir(dir.path(), "a")).unwrap();
        let b = store.add_project(&project_dir(dir.path(), "b")).unwrap();
        let c = store.add_project(&project_dir(dir.path(), "c")).unwrap();
        let names = |s: &Store| s.list_projects().unwrap().into_iter().map(|p| p.name).collect::<Vec<_>>();
        assert_eq!(names(&store), ["c", "b", "a"]);
        store.touch_project_opened(&a.id).unwrap();
        assert_eq!(names(&store), ["a", "c", "b"]);
        store.touch_project_opened(&b.id).unwrap();
        assert_eq!(names(&store), ["b", "a", "c"]);
        let _ = c;
    }

    #[test]
    fn rename_and_remove_never_touch_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_at(dir.path());
        let folder = project_dir(dir.path(), "keep-me");
        std::fs::write(folder.join("notes.txt"), "mine").unwrap();
        let project = store.add_project(&folder).unwrap();
        store.create_conversation(&project.id, "Talk").unwrap();

        store.rename_project(&project.id, "  Kept  ").unwrap();
        assert_eq!(store.get_project(&project.id).unwrap().name, "Kept");
        assert!(matches!(store.rename_project(&project.id, "   "), Err(StoreError::Empty { .. })));

        store.remove_project(&project.id).unwrap();
        assert!(store.list_projects().unwrap().is_empty());
        assert!(store.list_conversations(&project.id).unwrap().is_empty(), "its conversations go with it");
        assert_eq!(std::fs::read_to_string(folder.join("notes.txt")).unwrap(), "mine");
        let err = store.remove_project(&project.id).unwrap_err();
        assert_eq!(err.to_string(), "This project no longer exists (it may have been deleted).");
    }

    #[test]
    fn the_outside_folder_policy_defaults_to_deny_and_can_be_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_at(dir.path());
        let project = store.add_project(&project_dir(dir.path(), "p")).unwrap();
        assert_eq!(project.outside_project, OutsideProject::Deny);
        store.set_project_outside_policy(&project.id, OutsideProject::Ask).unwrap();
        assert_eq!(store.get_project(&project.id).unwrap().outside_project, OutsideProject::Ask);
        assert!(matches!(store.set_project_outside_policy("nope", OutsideProject::Ask), Err(StoreError::NotFound { .. })));
    }

    #[test]
    fn a_missing_folder_is_refused_with_a_sentence() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_at(dir.path());
        let err = store.add_project(&dir.path().join("gone")).unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
    }
}
