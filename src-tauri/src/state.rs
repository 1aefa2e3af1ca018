//! The one app state the shell manages.

use std::path::PathBuf;

use hearth_core::doctor::DoctorInputs;
use hearth_core::opencode::locate::LocateInputs;
use hearth_core::paths::AppPaths;
use hearth_core::ripgrep::RgInputs;

pub struct AppState {
    pub paths: AppPaths,
    /// The installed app's resource folder, where bundled binaries live.
    pub resource_dir: Option<PathBuf>,
}

impl AppState {
    pub fn new(paths: AppPaths, resource_dir: Option<PathBuf>) -> Self {
        Self { paths, resource_dir }
    }

    /// Inputs for the runtime doctor, read afresh each time so a fixed install shows on "Check again".
    pub fn doctor_inputs(&self) -> DoctorInputs {
        doctor_inputs(&self.paths, self.resource_dir.clone())
    }
}

pub fn doctor_inputs(paths: &AppPaths, resource_dir: Option<PathBuf>) -> DoctorInputs {
    let bundled = resource_dir.map(|d| d.join("bin"));
    DoctorInputs {
        paths: paths.clone(),
        opencode: LocateInputs::from_process(None, bundled.clone()),
        ripgrep: RgInputs::from_process(None, bundled),
    }
}
