//! What the registry needs from a runtime that owns a process, beyond the runtime contract, and the
//! key that says which configuration a process was started with.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::contract::{AgentRuntime, RunHooks, RuntimeError};
use crate::space::ExecutionSpace;

/// A runtime that owns an agent server process serving many execution spaces at once.
///
/// The server lazily creates one *instance* per space (OpenCode: per directory) and never frees it by
/// itself, so the registry decides when an instance goes and asks the runtime to drop it.
#[async_trait::async_trait]
pub trait ProcessRuntime: AgentRuntime + 'static {
    /// Start the process now if it is not running (a launch measured on its own, or warming).
    async fn start(&self) -> Result<(), RuntimeError>;

    /// Free the server's instance for `space` (OpenCode: `POST /instance/dispose?directory=`). The
    /// next request for that space recreates it. Must succeed when no instance exists.
    async fn dispose_instance(&self, space: &ExecutionSpace) -> Result<(), RuntimeError>;

    /// Replace the process with a fresh one if it runs and nothing uses it (no run, compaction or
    /// call in flight); `Ok(true)` if it was replaced. What lives on disk (native sessions) carries
    /// over; a call arriving during the switch waits for the new process. The registry calls this
    /// to give back memory the runtime keeps after its instances are freed.
    async fn recycle(&self) -> Result<bool, RuntimeError>;

    /// Resident memory of the process and its children, if it runs.
    fn memory_bytes(&self) -> Option<u64> {
        let pid = self.status().pid?;
        crate::host::procinfo::tree_rss(pid).ok().map(|t| t.bytes)
    }

    /// The most resident memory the process and its children have held since it started: what the
    /// recycle policy weighs (see `memory.rs`).
    fn peak_memory_bytes(&self) -> Option<u64> {
        let pid = self.status().pid?;
        crate::host::procinfo::tree_peak_rss(pid).ok()
    }

    /// The processes Hearth's gateway serves for this runtime: those that hold its MCP clients,
    /// never the tools its agent runs.
    fn gateway_callers(&self) -> Vec<u32> {
        self.status().pid.into_iter().collect()
    }

    /// The family's own type, for diagnostics that measure a family's API directly.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// Which configurations replace each other: the registry keeps one current runtime per slot, and a
/// new configuration of a slot retires the old one once its runs drain. OpenCode has one slot; each
/// ACP agent has its own, so a project on Claude Code and one on OpenCode's ACP agent both keep theirs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RuntimeSlot {
    pub family: &'static str,
    /// Which runtime of the family (an agent's id); `None` when the family has one.
    pub variant: Option<String>,
}

impl RuntimeSlot {
    /// The one slot of a family that runs one runtime at a time.
    pub fn of(family: &'static str) -> Self {
        Self { family, variant: None }
    }

    pub fn variant(family: &'static str, variant: impl Into<String>) -> Self {
        Self { family, variant: Some(variant.into()) }
    }
}

impl fmt::Display for RuntimeSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.variant {
            Some(v) => write!(f, "{}:{v}", self.family),
            None => f.write_str(self.family),
        }
    }
}

/// A runtime family's configuration: what a conversation selects, and how to make the runtime it
/// selects. Two specs with one `(slot, key)` share one runtime process.
pub trait RuntimeSpec: Send + Sync + fmt::Debug {
    fn family(&self) -> &'static str;
    /// The slot this configuration competes for (see [`RuntimeSlot`]).
    fn slot(&self) -> RuntimeSlot {
        RuntimeSlot::of(self.family())
    }
    fn key(&self) -> RuntimeKey;
    /// Construct (not launch) the runtime: it starts its process on first use. Must be cheap; it
    /// fails only when the configuration cannot describe a runtime at all.
    fn create(&self, host: &RuntimeHost) -> Result<Arc<dyn ProcessRuntime>, RuntimeError>;
}

/// What the app gives every runtime it makes, whatever its family.
#[derive(Clone, Default)]
pub struct RuntimeHost {
    /// Folder under which each family keeps its runtime's private root.
    pub root: PathBuf,
    /// Where launched processes are recorded for the start-up sweep.
    pub records_dir: Option<PathBuf>,
    /// Told of each run's session, subagent sessions and end (the gateway's grants).
    pub hooks: Option<Arc<dyn RunHooks>>,
    /// Where the runtime's client connects instead of the address its process printed. Tests put
    /// a proxy there that they can sever; `None` in the app.
    pub connect_via: Option<Arc<dyn Fn(SocketAddr) -> SocketAddr + Send + Sync>>,
}

impl fmt::Debug for RuntimeHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeHost")
            .field("root", &self.root)
            .field("records_dir", &self.records_dir)
            .field("hooks", &self.hooks.is_some())
            .field("connect_via", &self.connect_via.is_some())
            .finish()
    }
}

/// Identity of a process-owning runtime's configuration: a hash of the binary and the effective
/// config. Two acquires with one key share one process; a new key means a new process.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, specta::Type)]
pub struct RuntimeKey(String);

impl RuntimeKey {
    /// A key taken as given (tests, or a caller that already hashed its configuration).
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The key of `binary` run with `config`: SHA-256 over the binary path and the canonical JSON of
    /// the config (object keys sorted), so the key is stable across runs, builds and field order.
    pub fn from_config<T: serde::Serialize + ?Sized>(binary: &Path, config: &T) -> Result<Self, RuntimeError> {
        let value = serde_json::to_value(config)
            .map_err(|e| RuntimeError::Start(super::contract::Cause::new(e)))?;
        let mut canonical = String::new();
        write_canonical(&value, &mut canonical);
        let mut hash = Sha256::new();
        hash.update(binary.as_os_str().as_encoded_bytes());
        // A separator that cannot occur in a path keeps (binary, config) pairs from colliding.
        hash.update([0u8]);
        hash.update(canonical.as_bytes());
        let digest = hash.finalize();
        Ok(Self(digest.iter().map(|b| format!("{b:02x}")).collect()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RuntimeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// JSON with object keys sorted at every level. Written by hand because serde_json keeps insertion
/// order when any crate in the build turns on its `preserve_order` feature.
fn write_canonical(value: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_is_stable_and_ignores_field_order() {
        let bin = Path::new("/opt/opencode");
        let a =
            RuntimeKey::from_config(bin, &json!({"model": "m", "mcp": {"b": 1, "a": [1, {"y": 2, "x": 1}]}})).unwrap();
        let b =
            RuntimeKey::from_config(bin, &json!({"mcp": {"a": [1, {"x": 1, "y": 2}], "b": 1}, "model": "m"})).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.as_str().len(), 64);
        // Pinned: the key must not change between releases, or every upgrade restarts the runtime
        // for no reason and diagnostics stop matching.
        // Expected value: sha256(b"/bin/x\0" + b'{"a":1,"b":[true,null,"s"]}'), computed outside Rust.
        let pinned = RuntimeKey::from_config(Path::new("/bin/x"), &json!({"b": [true, null, "s"], "a": 1})).unwrap();
        assert_eq!(
            pinned.as_str(),
            "e41d9a18ec97151ea3a847e8c55e68963e96a2c6ffc94580759335ca83a27b27"
        );
    }

    #[test]
    fn key_changes_with_binary_or_config() {
        let cfg = json!({"model": "m"});
        let a = RuntimeKey::from_config(Path::new("/a/opencode"), &cfg).unwrap();
        assert_ne!(a, RuntimeKey::from_config(Path::new("/b/opencode"), &cfg).unwrap());
        assert_ne!(
            a,
            RuntimeKey::from_config(Path::new("/a/opencode"), &json!({"model": "n"})).unwrap()
        );
        assert_ne!(
            a,
            RuntimeKey::from_config(Path::new("/a/opencode"), &json!([["model", "m"]])).unwrap()
        );
    }
}
