//! Which processes may call the gateway. The secret alone is not enough: it sits in a file the
//! agent's own tools can read. A connection is served only when its client socket is held by one
//! of the allowed processes (the runtime Hearth started), never by a child of one (the agent's
//! shell is the runtime's child).

use std::net::SocketAddr;
use std::sync::Arc;

use crate::host::peer::{self, Peer, PeerError};

type PidSource = dyn Fn() -> Vec<u32> + Send + Sync;

/// The processes whose connections the gateway serves, asked afresh for each new connection (a
/// runtime relaunched has a new pid).
#[derive(Clone)]
pub struct AllowedCallers(Arc<PidSource>);

impl AllowedCallers {
    /// The processes `pids` names when asked: the runtimes Hearth runs now.
    pub fn pids(pids: impl Fn() -> Vec<u32> + Send + Sync + 'static) -> Self {
        Self(Arc::new(pids))
    }

    /// Hearth's own process only: tests and benchmarks that speak MCP to the gateway themselves.
    pub fn this_process() -> Self {
        Self::pids(|| vec![std::process::id()])
    }

    pub fn current(&self) -> Vec<u32> {
        (self.0)()
    }

    /// Who holds the client end of the connection from `client` to the gateway at `server`.
    pub fn identify(&self, client: SocketAddr, server: SocketAddr) -> Result<Peer, PeerError> {
        peer::identify(client, server, &self.current())
    }
}

impl Default for AllowedCallers {
    fn default() -> Self {
        Self::this_process()
    }
}

impl std::fmt::Debug for AllowedCallers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("AllowedCallers").field(&self.current()).finish()
    }
}
