//! OpenCode on a host as a runtime configuration the registry knows: the same configuration a
//! local runtime has, and the host. One runtime per (host, configuration), shared by every project
//! on that host; each host is a slot of its own, so hosts never retire each other.

use std::sync::Arc;

use serde_json::json;

use super::launch::RemotePlace;
use super::Remote;
use crate::opencode::config::RuntimeConfig;
use crate::opencode::{OpenCodeRuntime, Place, FAMILY};
use crate::runtime::{ProcessRuntime, RuntimeError, RuntimeHost, RuntimeKey, RuntimeSlot, RuntimeSpec};

/// OpenCode's configuration, run on `host`.
#[derive(Clone)]
pub struct RemoteRuntimeConfig {
    pub host: String,
    pub config: RuntimeConfig,
    pub remote: Arc<Remote>,
}

impl std::fmt::Debug for RemoteRuntimeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteRuntimeConfig").field("host", &self.host).field("key", &self.config.key()).finish_non_exhaustive()
    }
}

/// The slot of `host`'s runtime (`opencode:ssh:<host>`).
pub fn slot_of(host: &str) -> RuntimeSlot {
    RuntimeSlot::variant(FAMILY, format!("ssh:{host}"))
}

/// The local folder that names `host`'s runtime under the runtimes' root `runtimes_root` (its
/// private root on the host is derived from it: `launch::remove_private_root`).
pub fn local_root(runtimes_root: &std::path::Path, host: &str) -> std::path::PathBuf {
    let id: String = host.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' }).collect();
    runtimes_root.join(FAMILY).join("hosts").join(id)
}

impl RuntimeSpec for RemoteRuntimeConfig {
    fn family(&self) -> &'static str {
        FAMILY
    }

    fn slot(&self) -> RuntimeSlot {
        slot_of(&self.host)
    }

    fn key(&self) -> RuntimeKey {
        let view = json!({ "host": self.host, "config": self.config.key().as_str() });
        RuntimeKey::from_config(&self.config.binary, &view).expect("a JSON value always encodes")
    }

    fn create(&self, host: &RuntimeHost) -> Result<Arc<dyn ProcessRuntime>, RuntimeError> {
        let root = local_root(&host.root, &self.host);
        let place = Place::Remote(RemotePlace { host: self.host.clone(), remote: self.remote.clone() });
        Ok(Arc::new(OpenCodeRuntime::placed(self.config.clone(), root, host.clone(), place)))
    }
}
