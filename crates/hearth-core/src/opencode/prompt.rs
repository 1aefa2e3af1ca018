//! The body of one prompt (`POST /session/{id}/prompt_async`): the user's text, images as file
//! parts, the profile's model, and the id Hearth gives the user message so it can find this turn's
//! replies among the stored messages. (`Ask` mode is the session's rules, never the prompt's
//! `tools` map: that map replaces the session's whole ruleset.)

use base64::Engine as _;

use super::config::{ConfigError, RuntimeConfig};
use crate::images::{self, ImageError};
use crate::runtime::RunRequest;
/// The runtime's agent every prompt runs as.
pub const AGENT: &str = "build";

#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error(transparent)]
    Profile(#[from] ConfigError),
    #[error(transparent)]
    Image(#[from] ImageError),
    #[error("The model profile `{0}` does not accept images; choose a profile with image input or remove the attachment.")]
    NoImageInput(String),
}

#[derive(Debug, serde::Serialize)]
pub struct PromptBody {
    #[serde(rename = "messageID")]
    pub message_id: String,
    pub parts: Vec<PromptPart>,
    pub model: ModelRef,
    pub agent: &'static str,
}

#[derive(Debug, serde::Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum PromptPart {
    Text { text: String },
    File { mime: String, filename: String, url: String },
}

#[derive(Debug, serde::Serialize)]
pub struct ModelRef {
    #[serde(rename = "providerID")]
    pub provider_id: String,
    #[serde(rename = "modelID")]
    pub model_id: String,
}

pub fn prompt_body(config: &RuntimeConfig, request: &RunRequest, message_id: String) -> Result<PromptBody, PromptError> {
    let profile = config.resolve_profile(request.profile_id.as_deref())?;
    let mut parts = vec![PromptPart::Text { text: request.prompt.clone() }];
    for image in &request.images {
        images::check_attachment(&image.name, &image.media_type, &image.bytes)?;
        if !profile.image_input {
            return Err(PromptError::NoImageInput(profile.name.clone()));
        }
        let data = base64::engine::general_purpose::STANDARD.encode(image.bytes.as_slice());
        parts.push(PromptPart::File {
            mime: image.media_type.clone(),
            filename: image.name.clone(),
            url: format!("data:{};base64,{data}", image.media_type),
        });
    }
    Ok(PromptBody { message_id, parts, model: ModelRef { provider_id: profile.provider_id(), model_id: profile.model.clone() }, agent: AGENT })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::opencode::config::tests::{config, profile};
    use crate::opencode::config::Authentication;
    use crate::runtime::{ImageInput, OutsideProject, WorkMode};

    fn request(images: Vec<ImageInput>, mode: WorkMode) -> RunRequest {
        RunRequest {
            request_id: "r".into(),
            conversation_id: "c".into(),
            prompt: "look".into(),
            work_mode: mode,
            outside_project: OutsideProject::Deny,
            images,
            profile_id: None,
            space: crate::space::resolve_local(std::env::temp_dir()).unwrap(),
            native_session: None,
        }
    }

    fn png() -> Vec<u8> {
        let mut out = std::io::Cursor::new(Vec::new());
        image::RgbaImage::new(2, 1).write_to(&mut out, image::ImageFormat::Png).unwrap();
        out.into_inner()
    }

    #[test]
    fn images_travel_as_data_urls_and_the_prompt_never_carries_a_tools_map() {
        let cfg = config(vec![profile("a", true, Authentication::None)]);
        let image = ImageInput { name: "a.png".into(), media_type: "image/png".into(), bytes: Arc::new(png()) };
        let body = serde_json::to_value(prompt_body(&cfg, &request(vec![image], WorkMode::Ask), "msg_1".into()).unwrap()).unwrap();
        assert_eq!(body["messageID"], "msg_1");
        assert_eq!(body["parts"][0], serde_json::json!({"type": "text", "text": "look"}));
        assert_eq!(body["parts"][1]["type"], "file");
        assert!(body["parts"][1]["url"].as_str().unwrap().starts_with("data:image/png;base64,"));
        assert_eq!(body["model"], serde_json::json!({"providerID": "hearth-a", "modelID": "m1"}));
        assert!(body.get("tools").is_none(), "a tools map would replace the session's rules");
    }

    #[test]
    fn an_image_the_profile_cannot_take_or_that_lies_about_its_type_is_refused() {
        let cfg = config(vec![profile("t", false, Authentication::None)]);
        let image = ImageInput { name: "a.png".into(), media_type: "image/png".into(), bytes: Arc::new(png()) };
        let e = prompt_body(&cfg, &request(vec![image.clone()], WorkMode::Execute), "msg_1".into()).unwrap_err();
        assert!(matches!(e, PromptError::NoImageInput(_)), "{e}");
        let lie = ImageInput { media_type: "image/jpeg".into(), ..image };
        let e = prompt_body(&cfg, &request(vec![lie], WorkMode::Execute), "msg_1".into()).unwrap_err();
        assert!(matches!(e, PromptError::Image(ImageError::Mislabelled { .. })), "{e}");
    }
}
