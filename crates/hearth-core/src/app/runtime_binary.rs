//! The runtime binary the user chose in the Runtime view. It is an explicit path, so it sits right
//! after `HEARTH_OPENCODE_BIN` in the locator's order and is used alone: a wrong choice is reported
//! with the locator's sentence (and the runtime does not start) until the user replaces or clears
//! it — it is never silently bypassed for another copy.

use std::path::{Path, PathBuf};

use super::{blocking, AppError, AppResult, Hearth};
use crate::binaries::doctor::{self, DoctorInputs, RuntimeReport};

impl Hearth {
    /// The binary chosen in the Runtime view, if any.
    pub(crate) async fn chosen_runtime_binary(&self) -> AppResult<Option<PathBuf>> {
        let settings = blocking(&self.store, |s| s.app_settings()).await?;
        Ok(settings.runtime_binary_override.map(PathBuf::from))
    }

    /// Use `path` as the runtime binary from now on (`None`: the copy Hearth finds itself). The
    /// choice is checked when it is next used, like any explicit path. A runtime already running
    /// on the old binary is retired by the registry on the next turn: the binary is part of the
    /// runtime configuration's key.
    pub async fn set_runtime_binary(&self, path: Option<String>) -> AppResult<()> {
        let path = path.map(|p| p.trim().to_owned()).filter(|p| !p.is_empty());
        if let Some(p) = &path {
            if !Path::new(p).is_absolute() {
                return Err(AppError::RelativeBinaryPath(p.clone()));
            }
        }
        blocking(&self.store, move |s| s.set_runtime_binary_override(path.as_deref())).await?;
        self.forget_binaries().await;
        Ok(())
    }

    /// The runtime doctor's report on `inputs` (the shell's view of the process: environment,
    /// bundled folder), with the binary chosen in the Runtime view in its place in the order.
    pub async fn runtime_report(&self, mut inputs: DoctorInputs) -> AppResult<RuntimeReport> {
        inputs.opencode.settings_path = self.chosen_runtime_binary().await?;
        Ok(doctor::check(&inputs).await)
    }
}
