//! Model profiles as the user manages them, and the "Test" button: one real generation request.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{blocking, AppResult, Hearth};
use crate::store::secrets::SecretsLocation;
use crate::store::{anthropic_root, ModelProfile, ModelProtocol, ProfileInput, BUILTIN_SCRIPTED_BASE_URL};

/// How long the Test button waits for the model's answer.
pub const PROFILE_TEST_TIMEOUT: Duration = Duration::from_secs(45);
/// Characters of the model's answer quoted back.
pub const PROFILE_TEST_QUOTE_CHARS: usize = 120;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct ProfileTestOutcome {
    pub ok: bool,
    /// One sentence for the user.
    pub message: String,
    pub latency_ms: u64,
}

/// What the user saves: the profile, and the API key when it changes (`None` keeps the stored one,
/// `Some("")` removes it).
#[derive(Debug, Clone, serde::Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct ProfileSave {
    pub profile: ProfileInput,
    pub api_key: Option<String>,
}

impl Hearth {
    pub async fn save_profile(&self, id: Option<String>, save: ProfileSave) -> AppResult<ModelProfile> {
        blocking(&self.store, move |s| {
            let profile = match &id {
                Some(id) => s.update_profile(id, &save.profile)?,
                None => s.add_profile(&save.profile)?,
            };
            if let Some(key) = &save.api_key {
                s.set_profile_api_key(&profile.id, if key.is_empty() { None } else { Some(key) })?;
            }
            s.get_profile(&profile.id)
        })
        .await
    }

    /// Remove the profile's API key (from the keyring or the private file); the next runtime
    /// configuration carries none for it.
    pub async fn clear_profile_api_key(&self, id: String) -> AppResult<ModelProfile> {
        blocking(&self.store, move |s| {
            s.set_profile_api_key(&id, None)?;
            s.get_profile(&id)
        })
        .await
    }

    /// Where API keys and other secrets are kept (the Runtime view's line).
    pub fn secrets_location(&self) -> SecretsLocation {
        self.store.secrets().location()
    }

    /// Make one real, small generation request with the profile and say how it went.
    pub async fn test_profile(&self, id: &str) -> AppResult<ProfileTestOutcome> {
        let pid = id.to_string();
        let (profile, key) = blocking(&self.store, move |s| Ok((s.get_profile(&pid)?, s.profile_api_key(&pid)?))).await?;
        let (protocol, base, key) = if profile.base_url == BUILTIN_SCRIPTED_BASE_URL {
            let server = self.builtin.get().await?;
            (ModelProtocol::OpenAiChatCompletions, server.base_url(), Some(server.api_key().to_string()))
        } else {
            (profile.protocol, profile.base_url.clone(), key)
        };
        Ok(generation_check(protocol, &base, &profile.model, key.as_deref()).await)
    }
}

/// The version header Anthropic's API requires.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// One small, non-streamed generation request in the profile's protocol: `{base}/chat/completions`
/// or `{root}/v1/messages`, with a one-line prompt.
pub async fn generation_check(protocol: ModelProtocol, base_url: &str, model: &str, api_key: Option<&str>) -> ProfileTestOutcome {
    let prompt = "Reply with the single word: ready";
    let client = match reqwest::Client::builder().timeout(PROFILE_TEST_TIMEOUT).build() {
        Ok(c) => c,
        Err(e) => return outcome(false, format!("Hearth could not make an HTTP client: {e}"), 0),
    };
    let (url, mut req) = match protocol {
        ModelProtocol::OpenAiChatCompletions => {
            let url = format!("{}/chat/completions", base_url.trim_end_matches('/'));
            let body = json!({ "model": model, "messages": [{ "role": "user", "content": prompt }], "max_tokens": 16, "stream": false });
            let req = client.post(&url).json(&body);
            (url.clone(), match api_key {
                Some(k) => req.bearer_auth(k),
                None => req,
            })
        }
        ModelProtocol::AnthropicMessages => {
            let url = format!("{}/v1/messages", anthropic_root(base_url));
            let body = json!({ "model": model, "messages": [{ "role": "user", "content": prompt }], "max_tokens": 16 });
            (url.clone(), client.post(&url).header("anthropic-version", ANTHROPIC_VERSION).json(&body))
        }
    };
    if let (ModelProtocol::AnthropicMessages, Some(k)) = (protocol, api_key) {
        req = req.header("x-api-key", k);
    }
    let t0 = Instant::now();
    let resp = req.send().await;
    let ms = t0.elapsed().as_millis() as u64;
    let resp = match resp {
        Ok(r) => r,
        Err(e) if e.is_timeout() => return outcome(false, format!("{url} did not answer within {} s.", PROFILE_TEST_TIMEOUT.as_secs()), ms),
        Err(e) if e.is_connect() => return outcome(false, format!("Could not connect to {url}: is the server running and the base URL right?"), ms),
        Err(e) => return outcome(false, format!("The request to {url} failed: {e}"), ms),
    };
    let status = resp.status();
    let body: serde_json::Value = resp.json().await.unwrap_or_default();
    if !status.is_success() {
        let detail = body["error"]["message"].as_str().unwrap_or("").chars().take(PROFILE_TEST_QUOTE_CHARS).collect::<String>();
        let hint = match status.as_u16() {
            401 | 403 => "check the API key",
            404 => "check the base URL and the model name",
            429 => "the provider is rate-limiting this key",
            _ => "the provider reported an error",
        };
        return outcome(false, format!("The endpoint answered {status}: {hint}. {detail}").trim().to_string(), ms);
    }
    let answer = match protocol {
        ModelProtocol::OpenAiChatCompletions => &body["choices"][0]["message"]["content"],
        ModelProtocol::AnthropicMessages => &body["content"][0]["text"],
    };
    let text = answer.as_str().unwrap_or("").trim().chars().take(PROFILE_TEST_QUOTE_CHARS).collect::<String>();
    if text.is_empty() {
        return outcome(false, "The endpoint answered, but with no text: is this a chat model?".into(), ms);
    }
    outcome(true, format!("The model answered in {ms} ms: “{text}”."), ms)
}

fn outcome(ok: bool, message: String, latency_ms: u64) -> ProfileTestOutcome {
    ProfileTestOutcome { ok, message, latency_ms }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripted_model::{Reply, Script, ScriptedModelServer};

    #[tokio::test]
    async fn a_working_endpoint_answers_in_a_sentence() {
        let server = ScriptedModelServer::start(Script::custom(|_| Reply::text("ready"))).unwrap();
        let o = generation_check(ModelProtocol::OpenAiChatCompletions, &server.base_url(), "scripted", Some(server.api_key())).await;
        assert!(o.ok, "{o:?}");
        assert!(o.message.contains("“ready”"), "{o:?}");
        let builtin = ScriptedModelServer::start(Script::default_agent()).unwrap();
        let o = generation_check(ModelProtocol::OpenAiChatCompletions, &builtin.base_url(), "scripted", Some(builtin.api_key())).await;
        assert!(o.ok && o.message.ends_with(": “ready”."), "{o:?}");
    }

    #[tokio::test]
    async fn a_wrong_key_and_a_closed_port_are_explained() {
        let server = ScriptedModelServer::start(Script::default_agent()).unwrap();
        let o = generation_check(ModelProtocol::OpenAiChatCompletions, &server.base_url(), "scripted", Some("wrong")).await;
        assert!(!o.ok && o.message.contains("401") && o.message.contains("API key"), "{o:?}");
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let o = generation_check(ModelProtocol::OpenAiChatCompletions, &format!("http://127.0.0.1:{port}/v1"), "m", None).await;
        assert!(!o.ok && o.message.contains("Could not connect"), "{o:?}");
    }

    #[tokio::test]
    async fn an_anthropic_endpoint_is_tested_in_its_own_protocol_with_or_without_v1() {
        let server = ScriptedModelServer::start(Script::default_agent()).unwrap();
        for base in [server.anthropic_base_url(), format!("{}/v1/", server.anthropic_base_url())] {
            let o = generation_check(ModelProtocol::AnthropicMessages, &base, "scripted", Some(server.api_key())).await;
            assert!(o.ok && o.message.ends_with(": “ready”."), "{base}: {o:?}");
        }
        let o = generation_check(ModelProtocol::AnthropicMessages, &server.anthropic_base_url(), "scripted", Some("wrong")).await;
        assert!(!o.ok && o.message.contains("401"), "{o:?}");
        assert!(server.requests().iter().all(|r| r.api == crate::scripted_model::Api::AnthropicMessages), "only Messages requests");
    }
}
