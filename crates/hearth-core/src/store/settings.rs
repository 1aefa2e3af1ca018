//! App settings: a key → JSON table with typed accessors for the settings Hearth knows.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::error::{StoreError, StoreResult};
use super::{Store, BUSY_TIMEOUT, DATABASE_FILE_NAME, MAX_SETTING_VALUE_BYTES};

pub const THEME_KEY: &str = "theme";
pub const DEFAULT_PROFILE_KEY: &str = "defaultProfileId";
pub const RUNTIME_BINARY_OVERRIDE_KEY: &str = "runtimeBinaryOverride";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub enum Theme {
    /// Follow the system's light/dark preference.
    #[default]
    System,
    Light,
    Dark,
}

/// Every app setting at once, for the settings view.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct AppSettings {
    pub theme: Theme,
    /// The profile new conversations use; the built-in scripted model on a fresh install.
    pub default_profile_id: Option<String>,
    /// A user-chosen `opencode` binary instead of the bundled one.
    pub runtime_binary_override: Option<String>,
}

impl Store {
    /// A setting's value; `None` when unset. A value this build cannot read (damaged, or written by
    /// another version) also reads as `None`, so the default applies rather than an error.
    pub fn get_setting<T: DeserializeOwned>(&self, key: &str) -> StoreResult<Option<T>> {
        let text: Option<String> =
            self.lock().conn.query_row("SELECT value FROM app_settings WHERE key = ?1", [key], |r| r.get(0)).optional()?;
        Ok(text.and_then(|t| {
            serde_json::from_str(&t)
                .inspect_err(|e| tracing::warn!(key, error = %e, "unreadable setting; using its default"))
                .ok()
        }))
    }

    pub fn set_setting<T: Serialize>(&self, key: &str, value: &T) -> StoreResult<()> {
        let text = serde_json::to_string(value).expect("settings values always serialise");
        if text.len() > MAX_SETTING_VALUE_BYTES {
            return Err(StoreError::SettingTooLarge { key: key.to_owned(), bytes: text.len() });
        }
        self.lock().conn.execute(
            "INSERT INTO app_settings (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            params![key, text],
        )?;
        Ok(())
    }

    pub fn remove_setting(&self, key: &str) -> StoreResult<()> {
        self.lock().conn.execute("DELETE FROM app_settings WHERE key = ?1", [key])?;
        Ok(())
    }

    pub fn app_settings(&self) -> StoreResult<AppSettings> {
        Ok(AppSettings {
            theme: self.get_setting(THEME_KEY)?.unwrap_or_default(),
            default_profile_id: self.get_setting(DEFAULT_PROFILE_KEY)?,
            runtime_binary_override: self.get_setting(RUNTIME_BINARY_OVERRIDE_KEY)?,
        })
    }

    pub fn set_theme(&self, theme: Theme) -> StoreResult<()> {
        self.set_setting(THEME_KEY, &theme)
    }

    /// The profile new conversations use (`None` = no default). The profile must exist.
    pub fn set_app_default_profile(&self, profile_id: Option<&str>) -> StoreResult<()> {
        match profile_id {
            Some(id) => {
                self.get_profile(id)?;
                self.set_setting(DEFAULT_PROFILE_KEY, &id)
            }
            None => self.remove_setting(DEFAULT_PROFILE_KEY),
        }
    }

    /// Use another `opencode` binary (`None` = the one Hearth finds itself). Checked like any explicit
    /// path when the runtime is next looked for: a wrong one is reported by the Runtime view and by
    /// the next turn, never bypassed.
    pub fn set_runtime_binary_override(&self, path: Option<&str>) -> StoreResult<()> {
        match path.map(str::trim).filter(|p| !p.is_empty()) {
            Some(path) => self.set_setting(RUNTIME_BINARY_OVERRIDE_KEY, &path),
            None => self.remove_setting(RUNTIME_BINARY_OVERRIDE_KEY),
        }
    }
}

/// The runtime binary chosen in the Runtime view, read without opening the store, so the CLI's
/// `doctor` and `selftest` check the binary the app would use — also while the app runs. `None`
/// when there is no database or no choice; one that cannot be read is logged and reads as none.
pub fn peek_runtime_binary_override(data_dir: &Path) -> Option<PathBuf> {
    let db = data_dir.join(DATABASE_FILE_NAME);
    if !db.is_file() {
        return None;
    }
    let read = || -> rusqlite::Result<Option<String>> {
        let conn = Connection::open_with_flags(&db, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        conn.query_row("SELECT value FROM app_settings WHERE key = ?1", [RUNTIME_BINARY_OVERRIDE_KEY], |r| r.get(0)).optional()
    };
    match read() {
        Ok(text) => text.and_then(|t| serde_json::from_str::<String>(&t).ok()).map(PathBuf::from),
        Err(e) => {
            tracing::warn!(db = %db.display(), error = %e, "could not read the chosen runtime binary; looking for the runtime as if none was chosen");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::open_at;

    #[test]
    fn settings_have_defaults_and_keep_changes_across_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_at(dir.path());
        let fresh = store.app_settings().unwrap();
        assert_eq!((fresh.theme, fresh.runtime_binary_override), (Theme::System, None));

        store.set_theme(Theme::Dark).unwrap();
        store.set_runtime_binary_override(Some("/opt/opencode/bin/opencode")).unwrap();
        drop(store);
        let store = open_at(dir.path());
        let s = store.app_settings().unwrap();
        assert_eq!((s.theme, s.runtime_binary_override.as_deref()), (Theme::Dark, Some("/opt/opencode/bin/opencode")));

        store.set_runtime_binary_override(Some("  ")).unwrap();
        store.set_app_default_profile(None).unwrap();
        let s = store.app_settings().unwrap();
        assert_eq!((s.runtime_binary_override, s.default_profile_id), (None, None));
        assert!(matches!(store.set_app_default_profile(Some("missing")), Err(StoreError::NotFound { .. })));
    }

    #[test]
    fn the_chosen_runtime_binary_can_be_read_without_opening_the_store() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(peek_runtime_binary_override(dir.path()), None, "no database yet");
        let store = open_at(dir.path());
        assert_eq!(peek_runtime_binary_override(dir.path()), None, "no choice");
        store.set_runtime_binary_override(Some("/opt/opencode/bin/opencode")).unwrap();
        assert_eq!(peek_runtime_binary_override(dir.path()), Some(PathBuf::from("/opt/opencode/bin/opencode")), "read while the store is open");
        store.set_runtime_binary_override(None).unwrap();
        assert_eq!(peek_runtime_binary_override(dir.path()), None);
    }

    #[test]
    fn a_damaged_setting_reads_as_its_default() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_at(dir.path());
        store.set_setting(THEME_KEY, &"purple").unwrap();
        assert_eq!(store.app_settings().unwrap().theme, Theme::System);
        let err = store.set_setting("big", &"x".repeat(MAX_SETTING_VALUE_BYTES)).unwrap_err();
        assert!(err.to_string().starts_with("The setting big is too large"), "{err}");
    }

    #[test]
    fn the_ui_sees_camel_case() {
        let json = serde_json::to_value(AppSettings { theme: Theme::Light, default_profile_id: None, runtime_binary_override: None }).unwrap();
        assert_eq!(json, serde_json::json!({"theme": "light", "defaultProfileId": null, "runtimeBinaryOverride": null}));
    }
}
