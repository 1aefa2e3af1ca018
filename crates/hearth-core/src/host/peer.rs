//! Which process is at the other end of a loopback TCP connection, from the kernel's own tables
//! (Linux `/proc`): the connection's client socket is found in `/proc/net/tcp{,6}` by its two
//! addresses, which gives its inode; a process holds that socket when one of its descriptors in
//! `/proc/<pid>/fd` links to `socket:[inode]`. A bearer secret can be read and replayed by any
//! process of the user; the socket's holder cannot be faked without the holder's own descriptors.

use std::net::SocketAddr;

use procfs::process::{FDTarget, Process};

#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error("Hearth could not read the kernel's table of TCP sockets: {0}")]
    SocketTable(#[source] procfs::ProcError),
}

/// Who holds the client end of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// One of the allowed processes holds it.
    Allowed { pid: u32 },
    /// The socket exists, but none of the allowed processes holds it.
    Other { inode: u64, uid: u32 },
    /// No open socket is that end of the connection (it closed, or it is not on this host).
    Unknown,
}

/// The socket whose local address is `client` and whose remote address is `server`: its inode and
/// owner uid.
pub fn client_socket(client: SocketAddr, server: SocketAddr) -> Result<Option<(u64, u32)>, PeerError> {
    let (client, server) = (canonical(client), canonical(server));
    // An IPv4 connection may come from an IPv6 socket (v4-mapped), listed in tcp6.
    for table in [procfs::net::tcp, procfs::net::tcp6] {
        let entries = match table() {
            Ok(e) => e,
            // A kernel without IPv6 has no tcp6 table.
            Err(procfs::ProcError::NotFound(_)) => continue,
            Err(e) => return Err(PeerError::SocketTable(e)),
        };
        let found = entries
            .iter()
            // Inode 0: a socket in TIME_WAIT, held by no process.
            .find(|e| e.inode != 0 && canonical(e.local_address) == client && canonical(e.remote_address) == server);
        if let Some(e) = found {
            return Ok(Some((e.inode, e.uid)));
        }
    }
    Ok(None)
}

/// Whether `pid` has a descriptor on the socket `inode`. A process that is gone, or whose
/// descriptors cannot be read, holds nothing.
pub fn holds_socket(pid: u32, inode: u64) -> bool {
    let Ok(process) = Process::new(pid as i32) else { return false };
    let Ok(fds) = process.fd() else { return false };
    fds.flatten().any(|fd| matches!(fd.target, FDTarget::Socket(i) if i == inode))
}

/// Who holds the client end of the connection from `client` to `server`, among `allowed`. Exact
/// processes only: a child of an allowed process is not allowed (it has descriptors of its own).
pub fn identify(client: SocketAddr, server: SocketAddr, allowed: &[u32]) -> Result<Peer, PeerError> {
    let Some((inode, uid)) = client_socket(client, server)? else { return Ok(Peer::Unknown) };
    Ok(match allowed.iter().find(|pid| holds_socket(**pid, inode)) {
        Some(pid) => Peer::Allowed { pid: *pid },
        None => Peer::Other { inode, uid },
    })
}

/// IPv4 addresses written as v4-mapped IPv6 compare as the IPv4 address.
fn canonical(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(addr.ip().to_canonical(), addr.port())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;
    use std::net::{Ipv4Addr, TcpListener, TcpStream};
    use std::process::{Command, Stdio};

    #[test]
    fn a_connection_of_this_process_is_named_by_its_socket() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let server = listener.local_addr().unwrap();
        let client = TcpStream::connect(server).unwrap();
        let (_accepted, peer) = listener.accept().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        let me = std::process::id();
        assert_eq!(identify(peer, server, &[me]).unwrap(), Peer::Allowed { pid: me });
        // Pid 1 (init) does not hold our socket.
        assert!(matches!(identify(peer, server, &[1]).unwrap(), Peer::Other { .. }));
        assert!(matches!(identify(peer, server, &[]).unwrap(), Peer::Other { uid, .. } if uid == unsafe { libc::getuid() }));
        // The accepted end is not the client: swapped addresses name the server-side socket, and
        // an address nobody uses names nothing.
        let nobody: SocketAddr = (Ipv4Addr::LOCALHOST, 1).into();
        assert_eq!(identify(nobody, server, &[me]).unwrap(), Peer::Unknown);
        // A v4-mapped spelling is the same address.
        let mapped = SocketAddr::new(std::net::IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped()), peer.port());
        assert_eq!(identify(mapped, server, &[me]).unwrap(), Peer::Allowed { pid: me });
    }

    #[test]
    fn a_child_process_connection_is_not_its_parents() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let server = listener.local_addr().unwrap();
        // The child connects and waits for the test to close the connection.
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(format!("exec 3<>/dev/tcp/127.0.0.1/{}; cat <&3 >/dev/null", server.port()))
            .stdin(Stdio::null())
            .spawn()
            .expect("bash runs");
        let (mut accepted, peer) = listener.accept().unwrap();
        let me = std::process::id();
        let child_pid = child.id();
        assert!(matches!(identify(peer, server, &[me]).unwrap(), Peer::Other { .. }), "the parent does not hold its child's socket");
        assert_eq!(identify(peer, server, &[me, child_pid]).unwrap(), Peer::Allowed { pid: child_pid });
        accepted.shutdown(std::net::Shutdown::Both).unwrap();
        let mut rest = Vec::new();
        let _ = accepted.read_to_end(&mut rest);
        assert!(child.wait().unwrap().success());
        // Once closed, nobody holds it.
        assert!(!matches!(identify(peer, server, &[child_pid]).unwrap(), Peer::Allowed { .. }));
    }
}
