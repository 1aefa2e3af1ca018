//! The one app state the shell manages.

use std::path::PathBuf;
use std::sync::Arc;

use hearth_core::app::runtime_config::BinaryInputs;
use hearth_core::app::Hearth;
use hearth_core::binaries::doctor::DoctorInputs;
use hearth_core::binaries::opencode::LocateInputs;
use hearth_core::host::paths::AppPaths;
use hearth_core::binaries::ripgrep::RgInputs;

pub struct AppState {
    pub paths: AppPaths,
    /// The installed app's resource folder, where bundled binaries live.
    pub resource_dir: Option<PathBuf>,
    pub hearth: Arc<Hearth>,
}

impl AppState {
    /// Inputs for the runtime doctor, read afresh each time so a fixed install shows on "Check again".
    pub fn doctor_inputs(&self) -> DoctorInputs {
        doctor_inputs(&self.paths, self.resource_dir.clone())
    }
}

fn bundled_bin(resource_dir: Option<PathBuf>) -> Option<PathBuf> {
    resource_dir.map(|d| d.join("bin"))
}

/// What the process itself says about where the binaries are. The runtime binary chosen in the
/// Runtime view lives in the store: `Hearth` (and the CLI) put it in its place in the order.
pub fn doctor_inputs(paths: &AppPaths, resource_dir: Option<PathBuf>) -> DoctorInputs {
    let bundled = bundled_bin(resource_dir);
    DoctorInputs {
        paths: paths.clone(),
        opencode: LocateInputs::from_process(None, bundled.clone()),
        ripgrep: RgInputs::from_process(None, bundled),
    }
}

pub fn binary_inputs(paths: &AppPaths, resource_dir: Option<PathBuf>) -> BinaryInputs {
    let d = doctor_inputs(paths, resource_dir);
    BinaryInputs { opencode: d.opencode, ripgrep: d.ripgrep, probe_home: paths.probe_dir.clone() }
}
