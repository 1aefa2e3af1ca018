//! Model profiles: which model a conversation talks to. The API key is kept in the [`SecretStore`]
//! (never in the database) and the UI only ever learns whether there is one.
//!
//! [`SecretStore`]: crate::store::secrets::SecretStore

use rusqlite::{params, OptionalExtension, Row};

use super::error::{check_name, StoreError, StoreResult};
use super::settings::DEFAULT_PROFILE_KEY;
use super::{expect_one, new_id, now_ms, Store, MAX_NAME_CHARS, MAX_PROFILES, MAX_URL_CHARS};

/// Fixed id of the built-in scripted model profile (seeded once, cannot be changed or deleted).
pub const BUILTIN_SCRIPTED_PROFILE_ID: &str = "00000000-0000-4000-8000-00000000b117";
pub const BUILTIN_SCRIPTED_PROFILE_NAME: &str = "Built-in scripted model";
/// Stands in for the scripted server's URL, whose port is chosen at run time: the app replaces it
/// with the live server's address when it builds the runtime configuration.
pub const BUILTIN_SCRIPTED_BASE_URL: &str = "builtin:scripted";

/// The API a profile's endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub enum ModelProtocol {
    /// OpenAI-compatible `/chat/completions`; the base URL ends where `/chat/completions` goes
    /// (`https://api.openai.com/v1`).
    OpenAiChatCompletions,
    /// Anthropic Messages (`/v1/messages`): Anthropic's API and the endpoints compatible with it;
    /// Claude Code uses such a profile too. The base URL is the API's root
    /// (`https://api.anthropic.com`), with or without `/v1`.
    AnthropicMessages,
}

impl ModelProtocol {
    fn as_str(self) -> &'static str {
        match self {
            Self::OpenAiChatCompletions => "openAiChatCompletions",
            Self::AnthropicMessages => "anthropicMessages",
        }
    }

    /// A stored protocol; one this build does not know (from a newer Hearth) reads as OpenAI's.
    fn parse(text: &str) -> Self {
        match text {
            "anthropicMessages" => Self::AnthropicMessages,
            _ => Self::OpenAiChatCompletions,
        }
    }
}

/// An Anthropic base URL without a trailing `/` or `/v1`: what Claude Code's `ANTHROPIC_BASE_URL`
/// takes (its clients add `/v1/messages`).
pub fn anthropic_root(base_url: &str) -> &str {
    let base = base_url.trim_end_matches('/');
    base.strip_suffix("/v1").unwrap_or(base)
}

/// A profile as the UI sees it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct ModelProfile {
    pub id: String,
    pub name: String,
    pub protocol: ModelProtocol,
    pub base_url: String,
    pub model: String,
    /// Whether an API key is stored for it (the key itself never leaves the Rust side).
    pub has_api_key: bool,
    /// The model accepts images (drives the runtime's attachment + modalities settings).
    pub image_input: bool,
    /// The built-in scripted model: read-only.
    pub builtin: bool,
}

/// What the user edits.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct ProfileInput {
    pub name: String,
    pub protocol: ModelProtocol,
    pub base_url: String,
    pub model: String,
    pub image_input: bool,
}

const COLUMNS: &str = "id, name, protocol, base_url, model, image_input, builtin";

fn from_row(row: &Row<'_>) -> rusqlite::Result<ModelProfile> {
    Ok(ModelProfile {
        id: row.get(0)?,
        name: row.get(1)?,
        protocol: ModelProtocol::parse(&row.get::<_, String>(2)?),
        base_url: row.get(3)?,
        model: row.get(4)?,
        has_api_key: false,
        image_input: row.get(5)?,
        builtin: row.get(6)?,
    })
}

fn secret_name(profile_id: &str) -> String {
    format!("profile:{profile_id}")
}

/// Trimmed, checked copy of the input.
fn validated(input: &ProfileInput) -> StoreResult<ProfileInput> {
    let name = input.name.trim().to_owned();
    check_name("profile name", &name, MAX_NAME_CHARS)?;
    let model = input.model.trim().to_owned();
    check_name("model name", &model, MAX_URL_CHARS)?;
    let base_url = input.base_url.trim().trim_end_matches('/').to_owned();
    check_name("base URL", &base_url, MAX_URL_CHARS)?;
    let bad = |reason: &str| StoreError::InvalidBaseUrl { url: base_url.clone(), reason: reason.to_owned() };
    let url = reqwest::Url::parse(&base_url).map_err(|e| bad(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("it must start with http:// or https://"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("it has no host"));
    }
    Ok(ProfileInput { name, protocol: input.protocol, base_url, model, image_input: input.image_input })
}

/// Create the built-in profile the first time a database is opened (and make it the default).
pub(crate) fn seed_builtin(conn: &rusqlite::Connection) -> StoreResult<()> {
    let inserted = conn.execute(
        &format!("INSERT OR IGNORE INTO model_profiles ({COLUMNS}, created_at) VALUES (?1, ?2, ?3, ?4, ?5, 1, 1, 0)"),
        params![
            BUILTIN_SCRIPTED_PROFILE_ID,
            BUILTIN_SCRIPTED_PROFILE_NAME,
            ModelProtocol::OpenAiChatCompletions.as_str(),
            BUILTIN_SCRIPTED_BASE_URL,
            crate::scripted_model::MODEL_ID
        ],
    )?;
    if inserted == 1 {
        conn.execute(
            "INSERT OR IGNORE INTO app_settings (key, value) VALUES (?1, ?2)",
            params![DEFAULT_PROFILE_KEY, serde_json::to_string(BUILTIN_SCRIPTED_PROFILE_ID).expect("string")],
        )?;
        tracing::info!("seeded the built-in scripted model profile");
    }
    Ok(())
}

impl Store {
    fn with_key_flag(&self, mut profile: ModelProfile) -> StoreResult<ModelProfile> {
        profile.has_api_key = self.secrets.get(&secret_name(&profile.id))?.is_some();
        Ok(profile)
    }

    pub fn add_profile(&self, input: &ProfileInput) -> StoreResult<ModelProfile> {
        let input = validated(input)?;
        let id = new_id();
        {
            let inner = self.lock();
            let count: i64 = inner.conn.query_row("SELECT count(*) FROM model_profiles", [], |r| r.get(0))?;
            if count as usize >= MAX_PROFILES {
                return Err(StoreError::TooMany { what: "model profiles", max: MAX_PROFILES });
            }
            inner.conn.execute(
                &format!("INSERT INTO model_profiles ({COLUMNS}, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7)"),
                params![id, input.name, input.protocol.as_str(), input.base_url, input.model, input.image_input, now_ms()],
            )?;
        }
        self.get_profile(&id)
    }

    /// Every profile: the built-in one first, then in the order they were added.
    pub fn list_profiles(&self) -> StoreResult<Vec<ModelProfile>> {
        let profiles: Vec<ModelProfile> = {
            let inner = self.lock();
            let mut stmt =
                inner.conn.prepare_cached(&format!("SELECT {COLUMNS} FROM model_profiles ORDER BY builtin DESC, created_at, rowid"))?;
            let rows = stmt.query_map([], from_row)?;
            rows.collect::<Result<_, _>>()?
        };
        profiles.into_iter().map(|p| self.with_key_flag(p)).collect()
    }

    pub fn get_profile(&self, id: &str) -> StoreResult<ModelProfile> {
        let profile = self
            .lock()
            .conn
            .query_row(&format!("SELECT {COLUMNS} FROM model_profiles WHERE id = ?1"), [id], from_row)
            .optional()?
            .ok_or_else(|| StoreError::NotFound { what: "model profile", id: id.to_owned() })?;
        self.with_key_flag(profile)
    }

    pub fn update_profile(&self, id: &str, input: &ProfileInput) -> StoreResult<ModelProfile> {
        if self.get_profile(id)?.builtin {
            return Err(StoreError::BuiltinProfile);
        }
        let input = validated(input)?;
        let changed = self.lock().conn.execute(
            "UPDATE model_profiles SET name = ?2, protocol = ?3, base_url = ?4, model = ?5, image_input = ?6 WHERE id = ?1",
            params![id, input.name, input.protocol.as_str(), input.base_url, input.model, input.image_input],
        )?;
        expect_one(changed, "model profile", id)?;
        self.get_profile(id)
    }

    /// Delete a profile and its key. Conversations that used it fall back to the default profile; if it
    /// was the default, the built-in profile becomes the default.
    pub fn delete_profile(&self, id: &str) -> StoreResult<()> {
        if self.get_profile(id)?.builtin {
            return Err(StoreError::BuiltinProfile);
        }
        {
            let mut inner = self.lock();
            let tx = inner.conn.transaction()?;
            let changed = tx.execute("DELETE FROM model_profiles WHERE id = ?1", [id])?;
            expect_one(changed, "model profile", id)?;
            tx.execute(
                "UPDATE app_settings SET value = ?2 WHERE key = ?1 AND value = ?3",
                params![
                    DEFAULT_PROFILE_KEY,
                    serde_json::to_string(BUILTIN_SCRIPTED_PROFILE_ID).expect("string"),
                    serde_json::to_string(id).expect("string")
                ],
            )?;
            tx.commit()?;
        }
        // After the row: a key without a profile is harmless, a profile whose key vanished is not.
        self.secrets.delete(&secret_name(id))?;
        Ok(())
    }

    /// Store (`Some`) or remove (`None`) the profile's API key, outside the database.
    pub fn set_profile_api_key(&self, id: &str, api_key: Option<&str>) -> StoreResult<()> {
        if self.get_profile(id)?.builtin {
            return Err(StoreError::BuiltinProfile);
        }
        match api_key.map(str::trim).filter(|k| !k.is_empty()) {
            Some(key) => self.secrets.set(&secret_name(id), key)?,
            None => self.secrets.delete(&secret_name(id))?,
        }
        Ok(())
    }

    /// The API key, for building the runtime's configuration. Never send it to the UI.
    pub fn profile_api_key(&self, id: &str) -> StoreResult<Option<String>> {
        Ok(self.secrets.get(&secret_name(id))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::open_at;

    fn input(name: &str, url: &str) -> ProfileInput {
        ProfileInput {
            name: name.into(),
            protocol: ModelProtocol::OpenAiChatCompletions,
            base_url: url.into(),
            model: "gpt-test".into(),
            image_input: false,
        }
    }

    #[test]
    fn the_builtin_profile_is_seeded_once_and_is_the_default() {
        let dir = tempfile::tempdir().unwrap();
        for _ in 0..3 {
            let store = open_at(dir.path());
            let profiles = store.list_profiles().unwrap();
            assert_eq!(profiles.len(), 1);
            let p = &profiles[0];
            assert_eq!((p.name.as_str(), p.base_url.as_str(), p.builtin, p.has_api_key), (BUILTIN_SCRIPTED_PROFILE_NAME, BUILTIN_SCRIPTED_BASE_URL, true, false));
            assert_eq!(store.app_settings().unwrap().default_profile_id.as_deref(), Some(BUILTIN_SCRIPTED_PROFILE_ID));
        }
        let store = open_at(dir.path());
        assert!(matches!(store.delete_profile(BUILTIN_SCRIPTED_PROFILE_ID), Err(StoreError::BuiltinProfile)));
        assert!(matches!(store.update_profile(BUILTIN_SCRIPTED_PROFILE_ID, &input("x", "https://a.b")), Err(StoreError::BuiltinProfile)));
    }

    #[test]
    fn profiles_crud_and_the_key_never_reaches_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_at(dir.path());
        let p = store.add_profile(&input(" Work ", "https://api.example.com/v1/")).unwrap();
        assert_eq!((p.name.as_str(), p.base_url.as_str(), p.has_api_key, p.builtin), ("Work", "https://api.example.com/v1", false, false));

        const KEY: &str = "sk-hearth-test-5f3c9a1e7d2b";
        store.set_profile_api_key(&p.id, Some(KEY)).unwrap();
        assert!(store.get_profile(&p.id).unwrap().has_api_key);
        assert_eq!(store.profile_api_key(&p.id).unwrap().as_deref(), Some(KEY));
        let json = serde_json::to_string(&store.list_profiles().unwrap()).unwrap();
        assert!(!json.contains(KEY), "the UI view carries no key");

        let mut edit = input("Work 2", "http://localhost:11434/v1");
        edit.image_input = true;
        let updated = store.update_profile(&p.id, &edit).unwrap();
        assert_eq!((updated.name.as_str(), updated.image_input, updated.has_api_key), ("Work 2", true, true));
        store.flush_pending().unwrap();
        drop(store);

        // No byte of the key in the database or its WAL.
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().unwrap().to_string_lossy().starts_with(crate::store::DATABASE_FILE_NAME) {
                let bytes = std::fs::read(&path).unwrap();
                assert!(!bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes()), "key found in {}", path.display());
            }
        }

        let store = open_at(dir.path());
        let conversation_profile = store.get_profile(&p.id).unwrap();
        assert!(conversation_profile.has_api_key, "the key survives a restart");
        store.set_app_default_profile(Some(&p.id)).unwrap();
        store.delete_profile(&p.id).unwrap();
        assert_eq!(store.profile_api_key(&p.id).unwrap(), None, "deleting a profile deletes its key");
        assert_eq!(store.list_profiles().unwrap().len(), 1);
        assert_eq!(store.app_settings().unwrap().default_profile_id.as_deref(), Some(BUILTIN_SCRIPTED_PROFILE_ID));
    }

    #[test]
    fn deleting_a_profile_clears_it_from_conversations() {
        let (store, conversation, _dir) = crate::store::test_support::with_conversation();
        let p = store.add_profile(&input("Temp", "https://api.example.com")).unwrap();
        store.set_conversation_profile(&conversation, Some(&p.id)).unwrap();
        store.delete_profile(&p.id).unwrap();
        assert_eq!(store.get_conversation(&conversation).unwrap().profile_id, None);
    }

    #[test]
    fn malformed_base_urls_are_refused_with_a_sentence() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_at(dir.path());
        let err = store.add_profile(&input("Bad", "api.example.com")).unwrap_err();
        assert!(err.to_string().starts_with("\"api.example.com\" is not a usable base URL"), "{err}");
        let err = store.add_profile(&input("Bad", "ftp://example.com")).unwrap_err();
        assert!(err.to_string().contains("http:// or https://"), "{err}");
        let err = store.add_profile(&input("", "https://example.com")).unwrap_err();
        assert_eq!(err.to_string(), "The profile name cannot be empty.");
        assert_eq!(store.list_profiles().unwrap().len(), 1);
    }
}
