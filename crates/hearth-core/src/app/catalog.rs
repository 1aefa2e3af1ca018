//! Plain reads and edits of what the user keeps — projects, conversations, profiles, settings — run
//! off the async threads. The turn itself lives in `conversations.rs`.

use super::{blocking, AppResult, Hearth};
use crate::runtime::{OutsideProject, WorkMode};
use crate::store::{AppSettings, Conversation, Message, ModelProfile, Project, Theme};

impl Hearth {
    pub async fn list_projects(&self) -> AppResult<Vec<Project>> {
        blocking(&self.store, |s| s.list_projects()).await
    }

    pub async fn add_project(&self, path: String) -> AppResult<Project> {
        // Resolve first so a missing folder is reported as such, with the path the user gave.
        let space = crate::space::resolve_local(&path)?;
        blocking(&self.store, move |s| s.add_project(&space.root)).await
    }

    /// Remove a project from Hearth (its folder stays as it is), with the record of its changes.
    pub async fn remove_project(&self, id: String) -> AppResult<()> {
        let pid = id.clone();
        blocking(&self.store, move |s| s.remove_project(&pid)).await?;
        self.tracked(move |t| {
            t.forget(&id);
            Ok(())
        })
        .await
    }

    /// What happens when the agent reaches outside the project folder: refused, or the user is
    /// asked. Each conversation's session gets the new rule with its next message; "always"
    /// answers given under the old setting are dropped.
    pub async fn set_project_outside_policy(&self, project_id: String, policy: OutsideProject) -> AppResult<Project> {
        let (project, conversations) = blocking(&self.store, move |s| {
            s.set_project_outside_policy(&project_id, policy)?;
            Ok((s.get_project(&project_id)?, s.list_conversations(&project_id)?))
        })
        .await?;
        self.permissions.forget(conversations.iter().map(|c| c.id.as_str()));
        Ok(project)
    }

    pub async fn list_conversations(&self, project_id: String) -> AppResult<Vec<Conversation>> {
        blocking(&self.store, move |s| s.list_conversations(&project_id)).await
    }

    pub async fn create_conversation(&self, project_id: String, title: String) -> AppResult<Conversation> {
        blocking(&self.store, move |s| s.create_conversation(&project_id, &title)).await
    }

    pub async fn rename_conversation(&self, id: String, title: String) -> AppResult<()> {
        blocking(&self.store, move |s| s.rename_conversation(&id, &title)).await
    }

    pub async fn list_messages(&self, conversation_id: String) -> AppResult<Vec<Message>> {
        blocking(&self.store, move |s| s.list_messages(&conversation_id)).await
    }

    pub async fn set_work_mode(&self, conversation_id: String, mode: WorkMode) -> AppResult<()> {
        blocking(&self.store, move |s| s.set_work_mode(&conversation_id, mode)).await
    }

    pub async fn set_conversation_profile(&self, conversation_id: String, profile_id: Option<String>) -> AppResult<()> {
        blocking(&self.store, move |s| s.set_conversation_profile(&conversation_id, profile_id.as_deref())).await
    }

    pub async fn list_profiles(&self) -> AppResult<Vec<ModelProfile>> {
        blocking(&self.store, |s| s.list_profiles()).await
    }

    pub async fn delete_profile(&self, id: String) -> AppResult<()> {
        blocking(&self.store, move |s| s.delete_profile(&id)).await
    }

    pub async fn app_settings(&self) -> AppResult<AppSettings> {
        blocking(&self.store, |s| s.app_settings()).await
    }

    pub async fn set_theme(&self, theme: Theme) -> AppResult<()> {
        blocking(&self.store, move |s| s.set_theme(theme)).await
    }

    pub async fn set_default_profile(&self, id: Option<String>) -> AppResult<()> {
        blocking(&self.store, move |s| s.set_app_default_profile(id.as_deref())).await
    }
}
