//! What a run may reach beyond its runtime's own tools: the MCP gateway (the knowledge base, through
//! its bridge, and the user's MCP servers, each call under the grant of the request that made it)
//! and skill packages.

pub mod gateway;
pub mod knowledge_bridge;
pub mod skills;
