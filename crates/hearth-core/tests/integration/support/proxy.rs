//! A loopback TCP proxy between Hearth and the runtime that a test can sever: every connection goes
//! through it, and the ones carrying the runtime's event stream (`GET /global/event`) can be cut
//! at a chosen moment, and new ones turned away until the test lets them through again.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// What starts an event-stream request on a connection.
const EVENT_STREAM_REQUEST: &[u8] = b"GET /global/event";
/// Bytes copied at a time.
const COPY_BUFFER: usize = 64 * 1024;

#[derive(Default)]
struct State {
    upstream: Mutex<Option<SocketAddr>>,
    /// Cut these to end the event streams open now.
    streams: Mutex<Vec<CancellationToken>>,
    /// Turn away new event-stream connections while set.
    holding: AtomicBool,
    /// Event-stream requests seen so far (a reconnect adds one).
    opened: AtomicUsize,
}

pub struct SeverableProxy {
    addr: SocketAddr,
    state: Arc<State>,
    stop: CancellationToken,
}

impl SeverableProxy {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (state, stop) = (Arc::new(State::default()), CancellationToken::new());
        let (s, st) = (state.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = st.cancelled() => return,
                    a = listener.accept() => a,
                };
                let Ok((client, _)) = accepted else { continue };
                tokio::spawn(relay(client, s.clone(), st.child_token()));
            }
        });
        Self { addr, state, stop }
    }

    /// For `RuntimeHost::connect_via`: remember where the runtime listens, connect through here.
    pub fn via(&self) -> Arc<dyn Fn(SocketAddr) -> SocketAddr + Send + Sync> {
        let (state, addr) = (self.state.clone(), self.addr);
        Arc::new(move |upstream| {
            *state.upstream.lock().unwrap() = Some(upstream);
            addr
        })
    }

    /// Cut every event stream open now; returns how many were cut.
    pub fn sever(&self) -> usize {
        let streams = std::mem::take(&mut *self.state.streams.lock().unwrap());
        for s in &streams {
            s.cancel();
        }
        streams.len()
    }

    /// While `on`, new event-stream connections are closed at once (the stream stays down).
    pub fn hold_reconnects(&self, on: bool) {
        self.state.holding.store(on, Ordering::SeqCst);
    }

    /// Event-stream requests that reached the runtime so far.
    pub fn streams_opened(&self) -> usize {
        self.state.opened.load(Ordering::SeqCst)
    }
}

impl Drop for SeverableProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Copy one connection both ways until either side closes, the proxy stops, or (for an event
/// stream) the test severs it.
async fn relay(client: TcpStream, state: Arc<State>, stop: CancellationToken) {
    let Some(upstream) = *state.upstream.lock().unwrap() else { return };
    let Ok(server) = TcpStream::connect(upstream).await else { return };
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let cut = stop.child_token();
    let to_server = async {
        let mut buf = vec![0u8; COPY_BUFFER];
        loop {
            let n = match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if buf[..n].windows(EVENT_STREAM_REQUEST.len()).any(|w| w == EVENT_STREAM_REQUEST) {
                if state.holding.load(Ordering::SeqCst) {
                    return;
                }
                state.opened.fetch_add(1, Ordering::SeqCst);
                state.streams.lock().unwrap().push(cut.clone());
            }
            if server_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
        let _ = server_write.shutdown().await;
        std::future::pending::<()>().await;
    };
    let to_client = async {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    tokio::select! {
        _ = cut.cancelled() => {}
        _ = to_server => {}
        _ = to_client => {}
    }
}
