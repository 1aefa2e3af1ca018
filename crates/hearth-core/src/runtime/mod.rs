//! The runtime contract every agent runtime keeps, and the parts that share one process among
//! projects: the local registry (process owners, reference counts, idle close) and the
//! selected-runtime manager (facades cached per selection and space).

pub mod contract;
pub mod facade;
pub mod manager;
pub mod process;
pub mod registry;
#[cfg(test)]
pub(crate) mod testing;

pub use contract::*;
pub use facade::WorkspaceRuntime;
pub use manager::{RuntimeSelection, SelectedRuntimeManager, DEFAULT_FACADE_CAPACITY};
pub use process::{ProcessRuntime, RuntimeKey, OPENCODE_FAMILY};
pub use registry::{LocalRuntimeRegistry, RegisteredRuntimeStatus, RegistryConfig};
