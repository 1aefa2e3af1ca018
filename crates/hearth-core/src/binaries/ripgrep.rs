//! Locating ripgrep. The runtime's grep, glob and skill tools need `rg`; offline it cannot download
//! one, and it caches that failure until restart — so Hearth finds one before the runtime starts.

use std::path::PathBuf;

use crate::binaries::executable::{self, Candidate, ProbeEnv, ProbeError, Source, VERSION_PROBE_TIMEOUT};

/// Environment variable naming `rg` explicitly.
pub const BIN_ENV: &str = "HEARTH_RG_BIN";
pub const BIN_NAME: &str = if cfg!(windows) { "rg.exe" } else { "rg" };

#[derive(Debug, Clone, Default)]
pub struct RgInputs {
    pub env_path: Option<PathBuf>,
    pub settings_path: Option<PathBuf>,
    pub bundled_dir: Option<PathBuf>,
    pub path_entries: Vec<PathBuf>,
}

impl RgInputs {
    pub fn from_process(settings_path: Option<PathBuf>, bundled_dir: Option<PathBuf>) -> Self {
        Self {
            env_path: std::env::var_os(BIN_ENV).filter(|v| !v.is_empty()).map(PathBuf::from),
            settings_path,
            bundled_dir,
            path_entries: executable::on_path(BIN_NAME),
        }
    }

    pub fn candidates(&self) -> Vec<Candidate> {
        if let Some(p) = &self.env_path {
            return vec![Candidate::new(p, Source::Environment)];
        }
        if let Some(p) = &self.settings_path {
            return vec![Candidate::new(p, Source::Settings)];
        }
        let bundled = self.bundled_dir.iter().map(|d| Candidate::new(d.join(BIN_NAME), Source::Bundled));
        let on_path = self.path_entries.iter().map(|p| Candidate::new(p, Source::SystemPath));
        bundled.chain(on_path).collect()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ripgrep {
    pub path: PathBuf,
    pub source: Source,
    pub version: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RgError {
    #[error("ripgrep (rg) was not found. The agent's search and skill tools need it: install the `ripgrep` package (scripts/setup.sh does) or set {BIN_ENV}.")]
    NotFound,
    #[error("ripgrep cannot be used: {0}.")]
    Unusable(ProbeError),
}

pub async fn locate(inputs: &RgInputs, env: &ProbeEnv) -> Result<Ripgrep, RgError> {
    let chosen = inputs
        .candidates()
        .into_iter()
        .find(|c| c.source.is_explicit() || c.path.is_file())
        .ok_or(RgError::NotFound)?;
    let out = executable::probe_version(&chosen.path, env, VERSION_PROBE_TIMEOUT)
        .await
        .map_err(RgError::Unusable)?;
    // `ripgrep 13.0.0` (then build flags on further lines).
    let first = out.lines().next().unwrap_or("").trim();
    let version = first.strip_prefix("ripgrep ").unwrap_or(first).split_whitespace().next().unwrap_or("").to_string();
    Ok(Ripgrep { path: chosen.path, source: chosen.source, version })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn env(dir: &std::path::Path) -> ProbeEnv {
        ProbeEnv { scratch_home: dir.join("scratch") }
    }

    #[tokio::test]
    async fn parses_version_from_a_path_entry() {
        let tmp = tempfile::tempdir().unwrap();
        let rg = tmp.path().join("rg");
        std::fs::write(&rg, "#!/bin/sh\necho 'ripgrep 13.0.0'\necho '-SIMD -AVX'\n").unwrap();
        std::fs::set_permissions(&rg, std::fs::Permissions::from_mode(0o755)).unwrap();
        let inputs = RgInputs { path_entries: vec![tmp.path().join("nope/rg"), rg.clone()], ..Default::default() };
        let got = locate(&inputs, &env(tmp.path())).await.unwrap();
        assert_eq!(got, Ripgrep { path: rg, source: Source::SystemPath, version: "13.0.0".into() });
    }

    #[tokio::test]
    async fn missing_rg_is_a_clear_sentence() {
        let tmp = tempfile::tempdir().unwrap();
        let inputs = RgInputs { path_entries: vec![tmp.path().join("rg")], ..Default::default() };
        let err = locate(&inputs, &env(tmp.path())).await.unwrap_err();
        assert_eq!(err, RgError::NotFound);
        assert!(err.to_string().contains("ripgrep"));
    }

    #[tokio::test]
    async fn explicit_missing_rg_names_the_path() {
        let tmp = tempfile::tempdir().unwrap();
        let inputs = RgInputs { env_path: Some(tmp.path().join("my-rg")), ..Default::default() };
        let msg = locate(&inputs, &env(tmp.path())).await.unwrap_err().to_string();
        assert!(msg.contains("my-rg") && msg.contains("does not exist"), "{msg}");
    }
}
