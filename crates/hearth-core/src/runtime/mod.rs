//! The runtime contract every agent runtime keeps, and the parts that share one process among
//! projects: the local registry (process owners, reference counts, idle close) and the
//! selected-runtime manager (the one wiring: selection → registry → runtime, facades cached per
//! selection and space). A family is one family name, one [`RuntimeSpec`] and one
//! [`ProcessRuntime`]; the OpenCode family lives in [`crate::opencode`].

pub mod choice;
pub mod contract;
pub mod facade;
pub mod manager;
pub mod memory;
pub mod process;
pub mod registry;
#[cfg(test)]
pub(crate) mod testing;

pub use choice::{RuntimeChoice, RuntimeFeatures};
pub use contract::*;
pub use facade::WorkspaceRuntime;
pub use manager::{ManagerConfig, RuntimeSelection, SelectedRuntimeManager, DEFAULT_FACADE_CAPACITY};
pub use process::{ProcessRuntime, RuntimeHost, RuntimeKey, RuntimeSlot, RuntimeSpec};
pub use memory::{MemoryReport, RecyclePolicy, RecycleReason};
pub use registry::{LocalRuntimeRegistry, RegisteredRuntimeStatus, RegistryConfig};
