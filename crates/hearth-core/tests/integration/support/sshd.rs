//! A real OpenSSH server for the tests of projects on other hosts: Debian's `sshd` on 127.0.0.1 on a
//! free port, with a throw-away host key and user key, letting in only a second Unix user made for
//! the tests (`scripts/setup.sh` creates it), so the "remote" side has another user, another home
//! and another cache. One client configuration names the host several ways, each a case a user
//! meets: the host itself, an unknown host key, a changed host key, a refused key, a closed port.
//!
//! Missing `sshd` or the user, a test FAILS — unless the person running it opted out with
//! [`SKIP_REMOTE_TESTS_ENV`]`=1`, and then it says so and is not run. It needs root (to run sshd).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Opt-out for machines that cannot run an sshd.
pub const SKIP_REMOTE_TESTS_ENV: &str = "HEARTH_SKIP_REMOTE_TESTS";
/// The Unix user the "remote" side runs as.
pub const REMOTE_USER: &str = "hearth-remote";
/// The aliases of the client configuration.
pub const HOST: &str = "hearth-test-host";
pub const HOST_UNKNOWN_KEY: &str = "hearth-test-unknown-key";
pub const HOST_CHANGED_KEY: &str = "hearth-test-changed-key";
pub const HOST_REFUSED_KEY: &str = "hearth-test-refused-key";
pub const HOST_DOWN: &str = "hearth-test-down";
const START_WAIT: Duration = Duration::from_secs(10);

/// Remote tests take turns: each checks what runs as the remote user.
pub static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub struct Sshd {
    dir: tempfile::TempDir,
    child: Child,
    pub port: u16,
    /// The client configuration (`ssh -F`): the aliases above.
    pub client_config: PathBuf,
    pub home: PathBuf,
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr)))
    }
}

fn keygen(path: &Path) -> Result<String, String> {
    run(Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-C", "hearth-test", "-f"]).arg(path))?;
    std::fs::read_to_string(path.with_extension("pub")).map_err(|e| e.to_string())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The remote user's home, if the user exists.
fn remote_home() -> Option<PathBuf> {
    let out = Command::new("getent").args(["passwd", REMOTE_USER]).output().ok()?;
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    line.trim().split(':').nth(5).map(PathBuf::from).filter(|h| h.is_dir())
}

fn start() -> Result<Sshd, String> {
    let sshd = Path::new("/usr/sbin/sshd");
    if !sshd.is_file() {
        return Err("/usr/sbin/sshd is missing (scripts/setup.sh installs openssh-server)".into());
    }
    let home = remote_home().ok_or(format!("the user {REMOTE_USER} is missing (scripts/setup.sh creates it)"))?;
    if std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m)).unwrap_or(1) != 0 {
        return Err("running sshd for another user needs root (scripts/test.sh runs as root)".into());
    }
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let d = dir.path();
    // sshd reads the authorized keys as the remote user.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
    let host_key = keygen(&d.join("host_key"))?;
    let other_host_key = keygen(&d.join("other_host_key"))?;
    let user_key = keygen(&d.join("user_key"))?;
    keygen(&d.join("stranger_key"))?;
    std::fs::write(d.join("authorized_keys"), &user_key).map_err(|e| e.to_string())?;
    std::fs::set_permissions(d.join("authorized_keys"), std::fs::Permissions::from_mode(0o644)).map_err(|e| e.to_string())?;
    let port = free_port();
    let config = format!(
        "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\nAuthorizedKeysFile {d}/authorized_keys\nStrictModes no\n\
         PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nPubkeyAuthentication yes\nAllowUsers {REMOTE_USER}\n\
         PermitUserEnvironment yes\nAllowTcpForwarding yes\nX11Forwarding no\nPrintMotd no\nLogLevel ERROR\n",
        d = d.display()
    );
    std::fs::write(d.join("sshd_config"), config).map_err(|e| e.to_string())?;
    std::fs::create_dir_all("/run/sshd").map_err(|e| e.to_string())?;
    let known = |key: &str| format!("[127.0.0.1]:{port} {key}");
    std::fs::write(d.join("known_hosts"), known(&host_key)).map_err(|e| e.to_string())?;
    std::fs::write(d.join("changed_known_hosts"), known(&other_host_key)).map_err(|e| e.to_string())?;
    std::fs::write(d.join("empty_known_hosts"), "").map_err(|e| e.to_string())?;
    let closed = free_port();
    let entry = |alias: &str, port: u16, key: &str, known: &str| {
        format!(
            "Host {alias}\n  HostName 127.0.0.1\n  Port {port}\n  User {REMOTE_USER}\n  IdentityFile {d}/{key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {d}/{known}\n  GlobalKnownHostsFile /dev/null\n  IdentityAgent none\n",
            d = d.display()
        )
    };
    let client = [
        entry(HOST, port, "user_key", "known_hosts"),
        entry(HOST_UNKNOWN_KEY, port, "user_key", "empty_known_hosts"),
        entry(HOST_CHANGED_KEY, port, "user_key", "changed_known_hosts"),
        entry(HOST_REFUSED_KEY, port, "stranger_key", "known_hosts"),
        entry(HOST_DOWN, closed, "user_key", "known_hosts"),
    ]
    .concat();
    let client_config = d.join("ssh_config");
    std::fs::write(&client_config, client).map_err(|e| e.to_string())?;
    let child = Command::new(sshd).args(["-D", "-e", "-f"]).arg(d.join("sshd_config")).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::inherit()).spawn().map_err(|e| e.to_string())?;
    let deadline = Instant::now() + START_WAIT;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err(format!("sshd did not listen on {port} within {START_WAIT:?}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(Sshd { dir, child, port, client_config, home })
}

/// The test sshd, or `None` when the person running opted out (and the test says so).
pub fn require_sshd() -> Option<Sshd> {
    match start() {
        Ok(s) => Some(s),
        Err(why) if std::env::var(SKIP_REMOTE_TESTS_ENV).as_deref() == Ok("1") => {
            eprintln!("NOT RUN ({SKIP_REMOTE_TESTS_ENV}=1): {why}");
            None
        }
        Err(why) => panic!("the remote-host tests need a real sshd: {why}; set {SKIP_REMOTE_TESTS_ENV}=1 to skip them"),
    }
}

impl Sshd {
    /// Hearth's ssh options for this server (its client configuration; control sockets in `dir`).
    pub fn options(&self) -> hearth_core::remote::ssh::SshOptions {
        let mut o = hearth_core::remote::ssh::SshOptions::new(self.dir.path().join("ctl"));
        o.config_file = Some(self.client_config.clone());
        o
    }

    /// A fresh folder in the remote user's home holding `files`, owned by that user; its path.
    pub fn remote_project(&self, name: &str, files: &[(&str, &str)]) -> PathBuf {
        let root = self.home.join("hearth-test-projects").join(format!("{name}-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]));
        std::fs::create_dir_all(&root).unwrap();
        for (file, text) in files {
            std::fs::write(root.join(file), text).unwrap();
        }
        run(Command::new("chown").args(["-R", &format!("{REMOTE_USER}:{REMOTE_USER}")]).arg(self.home.join("hearth-test-projects"))).unwrap();
        root
    }

    /// Processes running as the remote user now (sshd's own sessions included while a link is up).
    pub fn remote_processes(&self) -> Vec<(u32, String)> {
        let out = Command::new("ps").args(["-u", REMOTE_USER, "-o", "pid=,args="]).output().unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let l = l.trim();
                let (pid, args) = l.split_once(' ')?;
                Some((pid.parse().ok()?, args.trim().to_string()))
            })
            .collect()
    }

    /// Remote runtimes running now (`opencode serve` as the remote user).
    pub fn remote_runtimes(&self) -> Vec<u32> {
        self.remote_processes().into_iter().filter(|(_, args)| args.contains("opencode serve")).map(|(pid, _)| pid).collect()
    }

    /// Wait until nothing runs as the remote user; what still runs if something does.
    pub async fn nothing_left(&self, within: Duration) -> Vec<(u32, String)> {
        let deadline = Instant::now() + within;
        loop {
            let left = self.remote_processes();
            if left.is_empty() || Instant::now() > deadline {
                return left;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The remote user's numeric uid and gid.
fn remote_ids() -> (String, String) {
    let id = |flag: &str| String::from_utf8_lossy(&Command::new("id").args([flag, REMOTE_USER]).output().unwrap().stdout).trim().to_string();
    (id("-u"), id("-g"))
}

/// Undoes a change to the remote side when dropped (the tests share one remote user).
pub struct Undo(Option<Box<dyn FnOnce() + Send>>);

impl Drop for Undo {
    fn drop(&mut self) {
        if let Some(undo) = self.0.take() {
            undo();
        }
    }
}

impl Sshd {
    /// The client's known-hosts file `name` (`known_hosts`, `changed_known_hosts`, `empty_known_hosts`).
    pub fn known_hosts(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The host's `uname -m` answers `arch` to new logins (a fake `uname` first on their PATH,
    /// through `~/.ssh/environment`), until the guard is dropped: an unsupported host, simulated.
    pub fn pretend_architecture(&self, arch: &str) -> Undo {
        let bin = self.home.join(".hearth-test-bin");
        std::fs::create_dir_all(&bin).unwrap();
        let uname = bin.join("uname");
        std::fs::write(&uname, format!("#!/bin/sh\nif [ \"$1\" = -m ]; then echo {arch}; else exec /bin/uname \"$@\"; fi\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&uname, std::fs::Permissions::from_mode(0o755)).unwrap();
        let ssh_dir = self.home.join(".ssh");
        std::fs::create_dir_all(&ssh_dir).unwrap();
        let env = ssh_dir.join("environment");
        std::fs::write(&env, format!("PATH={}:/usr/local/bin:/usr/bin:/bin\n", bin.display())).unwrap();
        run(Command::new("chown").args(["-R", &format!("{REMOTE_USER}:{REMOTE_USER}")]).arg(&bin).arg(&ssh_dir)).unwrap();
        Undo(Some(Box::new(move || {
            let _ = std::fs::remove_file(env);
            let _ = std::fs::remove_dir_all(bin);
        })))
    }

    /// Hearth's cache on the host is a `mib` MiB file system (a tmpfs over `~/.cache/hearth`)
    /// until the guard is dropped: a disk too full to stage the runtime.
    pub fn small_cache(&self, mib: u64) -> Undo {
        let cache = self.home.join(".cache/hearth");
        std::fs::create_dir_all(&cache).unwrap();
        let (uid, gid) = remote_ids();
        run(Command::new("chown").args(["-R", &format!("{REMOTE_USER}:{REMOTE_USER}")]).arg(self.home.join(".cache"))).unwrap();
        run(Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={mib}m,mode=0755,uid={uid},gid={gid}"), "tmpfs"]).arg(&cache))
            .unwrap_or_else(|e| panic!("the full-disk case mounts a small tmpfs (needs root): {e}"));
        Undo(Some(Box::new(move || {
            let _ = Command::new("umount").arg("-l").arg(&cache).status();
        })))
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
