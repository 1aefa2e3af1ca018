//! Images attached in the composer: prepared (validated, downscaled, thumbnailed) as soon as they
//! are picked, staged in memory until the message is sent, then saved with the message.

use base64::Engine as _;

use super::{AppError, AppResult, Hearth};
use crate::images::{self, PreparedImage};
use crate::store::NewAttachment;

/// Images staged at once (attached but not yet sent) across all conversations.
pub const MAX_STAGED_ATTACHMENTS: usize = 64;

/// What the composer shows for a staged image.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct StagedAttachment {
    pub id: String,
    pub name: String,
    pub media_type: String,
    pub width: u32,
    pub height: u32,
    pub thumbnail_data_url: String,
    /// The image was made smaller for the model.
    pub downscaled: bool,
}

impl Hearth {
    /// Validate an image from the composer and stage it; bad images are refused with a sentence.
    pub async fn stage_attachment(&self, name: String, data_base64: String) -> AppResult<StagedAttachment> {
        let prepared = tokio::task::spawn_blocking(move || -> AppResult<PreparedImage> {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data_base64.as_bytes())
                .map_err(|_| images::ImageError::UnknownFormat { name: name.clone() })?;
            Ok(images::prepare(&name, &bytes)?)
        })
        .await??;
        let id = uuid::Uuid::new_v4().to_string();
        let staged = StagedAttachment {
            id: id.clone(),
            name: prepared.name.clone(),
            media_type: prepared.media_type.clone(),
            width: prepared.width,
            height: prepared.height,
            thumbnail_data_url: format!("data:image/png;base64,{}", base64::engine::general_purpose::STANDARD.encode(&prepared.thumbnail_png)),
            downscaled: prepared.downscaled,
        };
        let mut map = self.staged.lock().unwrap();
        if map.len() >= MAX_STAGED_ATTACHMENTS {
            // The oldest staged images belong to messages never sent; drop one to make room.
            if let Some(k) = map.keys().next().cloned() {
                map.remove(&k);
            }
        }
        map.insert(id, prepared);
        Ok(staged)
    }

    /// Take staged images for sending.
    pub(crate) fn take_staged(&self, ids: &[String]) -> AppResult<Vec<PreparedImage>> {
        let mut map = self.staged.lock().unwrap();
        if ids.iter().any(|id| !map.contains_key(id)) {
            return Err(AppError::UnknownAttachment);
        }
        Ok(ids.iter().filter_map(|id| map.remove(id)).collect())
    }

    /// Save images next to the conversation's other attachments.
    pub(crate) async fn save_attachments(&self, conversation_id: &str, images: &[PreparedImage]) -> AppResult<Vec<NewAttachment>> {
        let dir = self.attachments_dir().join(conversation_id);
        let images = images.to_vec();
        tokio::task::spawn_blocking(move || -> AppResult<Vec<NewAttachment>> {
            std::fs::create_dir_all(&dir).map_err(|source| AppError::Write { path: dir.clone(), source })?;
            images
                .iter()
                .map(|img| {
                    let ext = if img.media_type == "image/jpeg" { "jpg" } else { "png" };
                    let path = dir.join(format!("{}.{ext}", uuid::Uuid::new_v4()));
                    std::fs::write(&path, &img.bytes).map_err(|source| AppError::Write { path: path.clone(), source })?;
                    Ok(NewAttachment {
                        name: img.name.clone(),
                        media_type: img.media_type.clone(),
                        bytes_len: img.bytes.len() as u64,
                        stored_path: path.display().to_string(),
                        thumbnail_png: Some(img.thumbnail_png.clone()),
                    })
                })
                .collect()
        })
        .await?
    }
}
