//! The runtime doctor: one report of everything the runtime needs (its binary at the pinned version,
//! ripgrep, the data folder), as shown by the Runtime view and logged at start-up.

use crate::binaries::executable::{ProbeEnv, Source};
use crate::binaries::opencode::{self, LocateInputs};
use crate::host::paths::AppPaths;
use crate::binaries::ripgrep::{self, RgInputs};

/// One checked program, as the UI shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(tag = "status", rename_all = "camelCase")]
pub enum BinaryCheck {
    #[serde(rename_all = "camelCase")]
    Ready { path: String, version: String, source: Source },
    /// `message` is a whole sentence for the user; `path` is the file it is about, if any.
    #[serde(rename_all = "camelCase")]
    Problem { path: Option<String>, message: String },
}

impl BinaryCheck {
    pub fn is_ready(&self) -> bool {
        matches!(self, BinaryCheck::Ready { .. })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeReport {
    pub pinned_version: String,
    pub opencode: BinaryCheck,
    pub ripgrep: BinaryCheck,
    pub data_dir: String,
    pub log_dir: String,
}

impl RuntimeReport {
    pub fn is_ready(&self) -> bool {
        self.opencode.is_ready() && self.ripgrep.is_ready()
    }
}

/// Everything the doctor looks at, injected so tests can point it anywhere.
#[derive(Debug, Clone)]
pub struct DoctorInputs {
    pub paths: AppPaths,
    pub opencode: LocateInputs,
    pub ripgrep: RgInputs,
}

/// Check the runtime binary and ripgrep (concurrently: the runtime's `--version` takes seconds).
/// Problems are logged as warnings and returned in the report; nothing here fails.
pub async fn check(inputs: &DoctorInputs) -> RuntimeReport {
    let env = ProbeEnv { scratch_home: inputs.paths.probe_dir.clone() };
    let (oc, rg) = tokio::join!(
        opencode::locate(&inputs.opencode, &env),
        ripgrep::locate(&inputs.ripgrep, &env)
    );
    let opencode = match oc {
        Ok(l) => BinaryCheck::Ready { path: display(&l.path), version: l.version, source: l.source },
        Err(e) => {
            tracing::warn!(error = %e, "runtime binary check failed");
            BinaryCheck::Problem { path: e.path().map(display), message: e.to_string() }
        }
    };
    let ripgrep = match rg {
        Ok(r) => BinaryCheck::Ready { path: display(&r.path), version: r.version, source: r.source },
        Err(e) => {
            tracing::warn!(error = %e, "ripgrep check failed");
            BinaryCheck::Problem { path: None, message: e.to_string() }
        }
    };
    RuntimeReport {
        pinned_version: crate::opencode::PINNED_VERSION.into(),
        opencode,
        ripgrep,
        data_dir: display(&inputs.paths.data_dir),
        log_dir: display(&inputs.paths.log_dir),
    }
}

fn display(p: &std::path::Path) -> String {
    p.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn problems_are_reported_not_raised() {
        let tmp = tempfile::tempdir().unwrap();
        let inputs = DoctorInputs {
            paths: AppPaths::under(tmp.path()),
            opencode: LocateInputs { env_path: Some(tmp.path().join("oc")), ..Default::default() },
            ripgrep: RgInputs::default(),
        };
        let report = check(&inputs).await;
        assert!(!report.is_ready());
        match &report.opencode {
            BinaryCheck::Problem { path, message } => {
                assert_eq!(path.as_deref(), Some(tmp.path().join("oc").to_str().unwrap()));
                assert!(message.contains("does not exist"), "{message}");
            }
            other => panic!("expected a problem, got {other:?}"),
        }
        assert!(matches!(&report.ripgrep, BinaryCheck::Problem { message, .. } if message.contains("ripgrep")));
        assert_eq!(report.pinned_version, crate::opencode::PINNED_VERSION);
    }

    #[test]
    fn report_serialises_with_a_status_tag() {
        let check = BinaryCheck::Ready { path: "/x".into(), version: "1".into(), source: Source::Bundled };
        let v = serde_json::to_value(check).unwrap();
        assert_eq!(v, serde_json::json!({"status":"ready","path":"/x","version":"1","source":"bundled"}));
    }
}
