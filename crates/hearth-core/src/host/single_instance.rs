//! One Hearth per data folder. Two Hearths on one folder would fight over its SQLite store and its
//! runtime, so a second Hearth asks the first to come forward and then leaves. The guard is keyed by
//! the folder, not by a global name: tests, the e2e suite and users may run separate Hearths with
//! separate `HEARTH_DATA_DIR`s.
//!
//! The guard is an exclusive advisory lock on `<data_dir>/hearth.lock`. The OS releases it when the
//! holder dies, even on SIGKILL, so a crash never blocks the next start. The lock file is never
//! deleted: unlinking it while another process has it open but not yet locked would let two
//! holders lock two different files. The holder also listens on `<data_dir>/hearth.sock`; a later
//! Hearth sends `activate\n` there and waits, bounded, for `ok\n`.

use std::fs::{File, OpenOptions, Permissions, TryLockError};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::host::paths::DATA_DIR_ENV;

/// The lock file in the data folder; it holds the holder's pid, for humans only.
pub const LOCK_FILE: &str = "hearth.lock";
/// The socket in the data folder on which the holder takes activation requests.
pub const SOCKET_FILE: &str = "hearth.sock";
/// How long a second Hearth waits for the first to answer, connecting included (the first may
/// hold the lock but not listen yet).
pub const ACTIVATE_TIMEOUT: Duration = Duration::from_secs(3);
/// Pause between connection attempts while the first Hearth is not listening yet.
pub const CONNECT_RETRY: Duration = Duration::from_millis(50);
/// How long the first Hearth gives one client to send its request, and again to take the reply.
/// Well under [`ACTIVATE_TIMEOUT`], so a silent client costs a waiting one little.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest request or reply line read, newline included; the rest of a longer one is never read.
pub const MAX_LINE_BYTES: usize = 64;
/// Clients answered at once, each on its own short-lived thread; more are turned away at once (they
/// see `NoAnswer`) so a flood of connections cannot exhaust threads.
pub const MAX_CLIENTS: usize = 8;
/// Pause after a failed accept (e.g. out of file descriptors) so the loop does not spin.
pub const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

const ACTIVATE: &[u8] = b"activate";
const OK: &[u8] = b"ok";

#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    #[error("Hearth could not open its lock file {path}: {source}. Check that the data folder exists and that you can write to it, or set {DATA_DIR_ENV} to another folder.")]
    Open { path: PathBuf, source: io::Error },
    #[error("Hearth could not lock its data folder {dir}: {source}. The file system may not support file locks (some network shares do not); set {DATA_DIR_ENV} to a folder on a local disk.")]
    Lock { dir: PathBuf, source: io::Error },
}

/// The outcome of [`acquire`].
#[derive(Debug)]
pub enum Acquire {
    /// This process holds the data folder: start the app, and keep the guard until it exits.
    First(InstanceGuard),
    /// Another Hearth holds the data folder: do not start a second app on it, whatever the answer.
    AlreadyRunning(Activation),
}

/// What a second Hearth got from the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// The first Hearth answered after running its activation handler (it brought its window
    /// forward).
    Focused,
    /// The folder is locked but no answer came within [`ACTIVATE_TIMEOUT`]: the holder is busy or
    /// hung, cannot listen (path too long for a socket), or is not Hearth at all.
    NoAnswer {
        /// The pid the last Hearth holder wrote into the lock file, for the message to the user;
        /// may be stale when the lock is held by something other than Hearth.
        holder_pid: Option<u32>,
    },
}

/// Holds the data folder for this process; dropping it frees the folder for the next Hearth.
#[derive(Debug)]
#[must_use = "the data folder is unlocked as soon as the guard is dropped"]
pub struct InstanceGuard {
    /// Never cloned: a flock lives as long as any descriptor of its open file description.
    _lock: File,
    /// `None` when the socket could not be made (warned at acquire): the lock still guards.
    listening: Option<Listening>,
    serving: AtomicBool,
    stop: Arc<AtomicBool>,
}

#[derive(Debug)]
struct Listening {
    listener: UnixListener,
    addr: SocketAddr,
    path: PathBuf,
}

/// Take the data folder, or ask the Hearth that holds it to come forward. `data_dir` must exist
/// (`AppPaths::ensure`). Blocks up to [`ACTIVATE_TIMEOUT`] only when another Hearth holds it.
pub fn acquire(data_dir: &Path) -> Result<Acquire, InstanceError> {
    acquire_within(data_dir, ACTIVATE_TIMEOUT)
}

fn acquire_within(data_dir: &Path, wait: Duration) -> Result<Acquire, InstanceError> {
    let path = data_dir.join(LOCK_FILE);
    // std opens with O_CLOEXEC, so the runtime and other children never inherit the lock and it
    // ends with this process. No truncation here: the holder's pid stays until we hold the lock.
    let lock = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(|source| InstanceError::Open { path: path.clone(), source })?;
    match lock.try_lock() {
        Ok(()) => Ok(Acquire::First(InstanceGuard::new(lock, data_dir))),
        Err(TryLockError::WouldBlock) => Ok(Acquire::AlreadyRunning(activate(data_dir, wait))),
        Err(TryLockError::Error(source)) => {
            Err(InstanceError::Lock { dir: data_dir.to_path_buf(), source })
        }
    }
}

impl InstanceGuard {
    fn new(lock: File, data_dir: &Path) -> Self {
        write_pid(&lock);
        Self {
            _lock: lock,
            listening: listen(data_dir),
            serving: AtomicBool::new(false),
            stop: Arc::default(),
        }
    }

    /// Answer activation requests from later Hearths on a background thread, calling `on_activate`
    /// once per request before replying; returns at once. Requests that arrived since
    /// [`acquire`] are queued and answered now. `on_activate` may run on several threads at once
    /// and should return promptly (post to the UI thread; do not wait on it): the caller waits at
    /// most [`ACTIVATE_TIMEOUT`]. Does nothing (beyond a log line) when there is no socket or when
    /// already serving.
    pub fn serve(&self, on_activate: impl Fn() + Send + Sync + 'static) {
        let Some(listening) = &self.listening else {
            tracing::debug!("not serving activation requests: this data folder has no socket");
            return;
        };
        if self.serving.swap(true, Ordering::SeqCst) {
            tracing::warn!("Hearth is already serving activation requests; ignored a second handler");
            return;
        }
        let spawned = listening.listener.try_clone().and_then(|listener| {
            let stop = Arc::clone(&self.stop);
            let on_activate: Arc<dyn Fn() + Send + Sync> = Arc::new(on_activate);
            std::thread::Builder::new()
                .name("hearth-instance".into())
                .spawn(move || accept_loop(listener, stop, on_activate))
        });
        if let Err(e) = spawned {
            self.serving.store(false, Ordering::SeqCst);
            tracing::warn!(error = %e, "could not serve activation requests: a second Hearth started on this data folder cannot bring this one forward");
        }
    }
}

impl Drop for InstanceGuard {
    fn drop(&mut self) {
        let Some(listening) = &self.listening else { return };
        self.stop.store(true, Ordering::SeqCst);
        if *self.serving.get_mut() {
            // A blocked accept() does not return when the listener is closed: wake it instead.
            let _ = UnixStream::connect_addr(&listening.addr);
        }
        // Before the lock goes (with the fields, after this body): the next holder binds its own
        // socket here, which must not be removed by us.
        let _ = std::fs::remove_file(&listening.path);
    }
}

fn write_pid(mut file: &File) {
    let written = file.set_len(0).and_then(|()| writeln!(file, "{}", std::process::id()));
    if let Err(e) = written {
        tracing::warn!(error = %e, "could not write Hearth's pid into its lock file");
    }
}

/// Bind the socket, replacing one left by a holder that died (ours to remove: we hold the lock).
fn listen(data_dir: &Path) -> Option<Listening> {
    let path = data_dir.join(SOCKET_FILE);
    let skipped = |why: &dyn std::fmt::Display| {
        tracing::warn!(path = %path.display(), "{why}: a second Hearth started on this data folder cannot bring this one forward");
        None
    };
    let addr = match SocketAddr::from_pathname(&path) {
        Ok(addr) => addr,
        // Unix socket paths are limited to about 107 bytes.
        Err(_) => return skipped(&"the data folder's path is too long for a socket"),
    };
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            return skipped(&format_args!("could not remove the old socket file ({e})"))
        }
        _ => {}
    }
    let listener = match UnixListener::bind_addr(&addr) {
        Ok(listener) => listener,
        Err(e) => return skipped(&format_args!("could not listen on the socket ({e})")),
    };
    // The data folder is private already; this keeps the socket so if the folder is not.
    if let Err(e) = std::fs::set_permissions(&path, Permissions::from_mode(0o600)) {
        tracing::warn!(error = %e, "could not make Hearth's socket private");
    }
    Some(Listening { listener, addr, path })
}

fn accept_loop(listener: UnixListener, stop: Arc<AtomicBool>, on_activate: Arc<dyn Fn() + Send + Sync>) {
    let clients = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let stream = match conn {
            Ok(stream) => stream,
            Err(e) => {
                tracing::debug!(error = %e, "could not accept an activation request");
                std::thread::sleep(ACCEPT_ERROR_PAUSE);
                continue;
            }
        };
        if clients.fetch_add(1, Ordering::SeqCst) >= MAX_CLIENTS {
            clients.fetch_sub(1, Ordering::SeqCst);
            tracing::debug!("turned away an activation request: too many at once");
            continue; // dropping the stream closes it
        }
        let slot = ClientSlot(Arc::clone(&clients));
        let (stop, on_activate) = (Arc::clone(&stop), Arc::clone(&on_activate));
        // On failure the closure, and with it the slot, is dropped.
        let spawned = std::thread::Builder::new().name("hearth-instance-client".into()).spawn(move || {
            let _slot = slot;
            answer(stream, &stop, &*on_activate);
        });
        if let Err(e) = spawned {
            tracing::debug!(error = %e, "could not answer an activation request");
        }
    }
}

/// Frees its place among [`MAX_CLIENTS`] when the client's thread ends, even by a panic.
struct ClientSlot(Arc<AtomicUsize>);

impl Drop for ClientSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn answer(mut stream: UnixStream, stop: &AtomicBool, on_activate: &(dyn Fn() + Send + Sync)) {
    match read_line(&mut stream, Instant::now() + REQUEST_TIMEOUT) {
        Ok(line) if line == ACTIVATE => {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            on_activate();
            if let Err(e) = write_line(&mut stream, OK, REQUEST_TIMEOUT) {
                tracing::debug!(error = %e, "could not reply to an activation request");
            }
        }
        Ok(line) => {
            tracing::debug!(request = %String::from_utf8_lossy(&line), "ignored an unknown request")
        }
        Err(e) => tracing::debug!(error = %e, "ignored a client that sent no valid request"),
    }
}

/// The second Hearth's side: ask the holder to come forward.
fn activate(data_dir: &Path, wait: Duration) -> Activation {
    let deadline = Instant::now() + wait;
    match SocketAddr::from_pathname(data_dir.join(SOCKET_FILE)).and_then(|addr| ask(&addr, deadline)) {
        Ok(()) => Activation::Focused,
        Err(e) => {
            tracing::debug!(error = %e, "the Hearth holding this data folder did not answer");
            Activation::NoAnswer { holder_pid: holder_pid(data_dir) }
        }
    }
}

fn ask(addr: &SocketAddr, deadline: Instant) -> io::Result<()> {
    let mut stream = connect(addr, deadline)?;
    write_line(&mut stream, ACTIVATE, remaining(deadline)?)?;
    let reply = read_line(&mut stream, deadline)?;
    if reply == OK {
        Ok(())
    } else {
        let reply = String::from_utf8_lossy(&reply);
        Err(io::Error::new(io::ErrorKind::InvalidData, format!("unexpected reply {reply:?}")))
    }
}

/// The holder binds its socket just after taking the lock: until then there is no socket, or a
/// stale one that refuses connections, so retry until the deadline.
fn connect(addr: &SocketAddr, deadline: Instant) -> io::Result<UnixStream> {
    loop {
        match UnixStream::connect_addr(addr) {
            Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused) => {
                let left = remaining(deadline).map_err(|_| e)?;
                std::thread::sleep(left.min(CONNECT_RETRY));
            }
            connected => return connected,
        }
    }
}

/// One `\n`-terminated line of at most [`MAX_LINE_BYTES`] (newline excluded from the result),
/// read before `deadline`: a client that trickles bytes cannot stretch it.
fn read_line(stream: &mut UnixStream, deadline: Instant) -> io::Result<Vec<u8>> {
    let mut buf = [0u8; MAX_LINE_BYTES];
    let mut len = 0;
    loop {
        if let Some(end) = buf[..len].iter().position(|&b| b == b'\n') {
            return Ok(buf[..end].to_vec());
        }
        if len == buf.len() {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "line too long"));
        }
        stream.set_read_timeout(Some(remaining(deadline)?))?;
        match stream.read(&mut buf[len..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn write_line(stream: &mut UnixStream, line: &[u8], timeout: Duration) -> io::Result<()> {
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(&[line, b"\n"].concat())
}

/// Time left before `deadline`, never zero (a zero socket timeout is an error, not "now").
fn remaining(deadline: Instant) -> io::Result<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|left| !left.is_zero())
        .ok_or_else(|| io::ErrorKind::TimedOut.into())
}

fn holder_pid(data_dir: &Path) -> Option<u32> {
    let mut text = String::new();
    File::open(data_dir.join(LOCK_FILE)).ok()?.take(MAX_LINE_BYTES as u64).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Generous bound for what should happen at once, so a loaded machine does not fail tests.
    const PATIENCE: Duration = Duration::from_secs(10);
    /// How long tests that expect no answer wait for one.
    const SHORT_WAIT: Duration = Duration::from_millis(300);

    /// Take the folder, waiting briefly when it was just freed: a dropped guard's lock lives on
    /// for a moment in any process another test is spawning, which holds copies of all our
    /// descriptors between its fork and its exec.
    fn first(dir: &Path) -> InstanceGuard {
        let deadline = Instant::now() + PATIENCE;
        loop {
            match acquire_within(dir, Duration::ZERO).unwrap() {
                Acquire::First(guard) => return guard,
                Acquire::AlreadyRunning(_) if Instant::now() < deadline => std::thread::sleep(CONNECT_RETRY),
                Acquire::AlreadyRunning(a) => panic!("expected to hold the folder, got {a:?}"),
            }
        }
    }

    fn second(dir: &Path, wait: Duration) -> Activation {
        match acquire_within(dir, wait).unwrap() {
            Acquire::AlreadyRunning(a) => a,
            Acquire::First(_) => panic!("a second instance took a held folder"),
        }
    }

    /// A holder whose activations arrive on the returned channel.
    fn serving(dir: &Path) -> (InstanceGuard, mpsc::Receiver<()>) {
        let guard = first(dir);
        let (tx, rx) = mpsc::channel();
        guard.serve(move || {
            let _ = tx.send(());
        });
        (guard, rx)
    }

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn first_acquire_wins_and_leaves_a_private_socket_and_its_pid() {
        let tmp = tempfile::tempdir().unwrap();
        let guard = first(tmp.path());
        let (lock, socket) = (tmp.path().join(LOCK_FILE), tmp.path().join(SOCKET_FILE));
        assert_eq!(std::fs::read_to_string(&lock).unwrap(), format!("{}\n", std::process::id()));
        assert_eq!(mode(&socket), 0o600);
        assert_eq!(mode(&lock), 0o600);
        drop(guard);
        assert!(!socket.exists(), "the socket outlived its guard");
        assert!(lock.exists(), "the lock file must never be deleted");
    }

    #[test]
    fn a_second_instance_activates_the_first_exactly_once() {
        let tmp = tempfile::tempdir().unwrap();
        let (_guard, rx) = serving(tmp.path());
        match acquire(tmp.path()).unwrap() {
            Acquire::AlreadyRunning(a) => assert_eq!(a, Activation::Focused),
            Acquire::First(_) => panic!("a second instance took a held folder"),
        }
        rx.recv_timeout(PATIENCE).expect("the first instance was not activated");
        // The reply follows the handler, so a second call would already be queued.
        assert_eq!(rx.try_recv(), Err(mpsc::TryRecvError::Empty));
    }

    #[test]
    fn dropping_the_guard_frees_the_folder_for_a_new_holder() {
        let tmp = tempfile::tempdir().unwrap();
        let (guard, _rx) = serving(tmp.path());
        drop(guard);
        let (_guard, rx) = serving(tmp.path());
        assert_eq!(second(tmp.path(), ACTIVATE_TIMEOUT), Activation::Focused);
        rx.recv_timeout(PATIENCE).expect("the new holder was not activated");
    }

    #[test]
    fn separate_data_folders_are_independent() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (_guard_a, rx_a) = serving(a.path());
        let (_guard_b, rx_b) = serving(b.path());
        assert_eq!(second(a.path(), ACTIVATE_TIMEOUT), Activation::Focused);
        rx_a.recv_timeout(PATIENCE).expect("folder a's holder was not activated");
        assert_eq!(rx_b.try_recv(), Err(mpsc::TryRecvError::Empty));
    }

    #[test]
    fn a_stale_socket_and_pid_do_not_stop_the_next_holder() {
        let tmp = tempfile::tempdir().unwrap();
        let socket = tmp.path().join(SOCKET_FILE);
        // A dead holder's leftovers: a socket file nobody listens on, and a pid longer than ours.
        drop(UnixListener::bind(&socket).unwrap());
        std::fs::write(tmp.path().join(LOCK_FILE), "4294967294\n").unwrap();
        let (_guard, rx) = serving(tmp.path());
        assert_eq!(holder_pid(tmp.path()), Some(std::process::id()));
        assert_eq!(second(tmp.path(), ACTIVATE_TIMEOUT), Activation::Focused);
        rx.recv_timeout(PATIENCE).expect("the new holder was not activated");
    }

    #[test]
    fn bad_clients_do_not_block_a_real_activation() {
        let tmp = tempfile::tempdir().unwrap();
        let (_guard, rx) = serving(tmp.path());
        let socket = tmp.path().join(SOCKET_FILE);
        // Connects and sends nothing; kept open throughout.
        let _silent = UnixStream::connect(&socket).unwrap();
        // Garbage gets no reply and no activation.
        let mut garbage = UnixStream::connect(&socket).unwrap();
        garbage.write_all(b"open the pod bay doors\n").unwrap();
        garbage.set_read_timeout(Some(PATIENCE)).unwrap();
        let reply = garbage.read(&mut [0u8; 8]);
        assert!(!matches!(reply, Ok(n) if n > 0), "garbage got a reply");
        // Megabytes without a newline: the server stops reading and hangs up.
        let mut flood = UnixStream::connect(&socket).unwrap();
        flood.set_write_timeout(Some(PATIENCE)).unwrap();
        assert!(flood.write_all(&vec![b'x'; 4 << 20]).is_err(), "the server read megabytes");
        assert_eq!(second(tmp.path(), ACTIVATE_TIMEOUT), Activation::Focused);
        rx.recv_timeout(PATIENCE).expect("the real activation was lost");
        assert_eq!(rx.try_recv(), Err(mpsc::TryRecvError::Empty), "a bad client activated");
    }

    #[test]
    fn an_overlong_data_folder_still_locks_but_cannot_be_reached() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d".repeat(120));
        std::fs::create_dir(&dir).unwrap();
        assert!(SocketAddr::from_pathname(dir.join(SOCKET_FILE)).is_err(), "path not long enough");
        let (guard, rx) = serving(&dir);
        assert!(!dir.join(SOCKET_FILE).exists());
        let started = Instant::now();
        let got = second(&dir, ACTIVATE_TIMEOUT);
        assert_eq!(got, Activation::NoAnswer { holder_pid: Some(std::process::id()) });
        assert!(started.elapsed() < ACTIVATE_TIMEOUT, "waited for a socket that cannot exist");
        // Not serving drops the handler unused.
        assert_eq!(rx.try_recv(), Err(mpsc::TryRecvError::Disconnected));
        drop(guard);
        let _guard = first(&dir);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_lock_held_by_another_process_is_honoured() {
        use std::io::BufRead;
        let tmp = tempfile::tempdir().unwrap();
        // The shell opens the lock file on fd 9, util-linux `flock` locks that open file, and
        // `exec sleep` keeps fd 9: one process holds the lock, and killing it frees the lock.
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(r#"exec 9>>"$0" && flock -x 9 && echo locked && exec sleep 30"#)
            .arg(tmp.path().join(LOCK_FILE))
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let while_held = (line == "locked\n").then(|| second(tmp.path(), SHORT_WAIT));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(line, "locked\n", "the child did not take the lock: is util-linux `flock` installed?");
        assert!(matches!(while_held, Some(Activation::NoAnswer { .. })), "{while_held:?}");
        let _guard = first(tmp.path());
    }

    #[test]
    fn an_unusable_data_folder_is_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("a-file");
        std::fs::write(&file, b"x").unwrap();
        let e = acquire(&file.join("data")).unwrap_err();
        assert!(matches!(e, InstanceError::Open { .. }), "{e:?}");
        let text = e.to_string();
        assert!(text.contains("could not open its lock file") && text.contains(DATA_DIR_ENV), "{text}");
    }
}
