//! The process-owning OpenCode runtime: one `opencode serve` for every project, conversations mapped
//! to native sessions, runs streamed from the one demultiplexed event stream.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::client::Client;
use super::config::RuntimeConfig;
use super::event_hub::{child_session_of, EventHub, HubEvent, Subscription};
use super::launch::{self, LaunchSpec, Server};
use super::turn::{Turn, MAX_PROVIDER_RETRIES};
use super::PINNED_VERSION;
use crate::runtime::*;
use crate::space::ExecutionSpace;

/// After an abort, how long to wait for the session to go idle before giving up on it.
pub const ABORT_SETTLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest image accepted in one request (they travel base64-encoded inside JSON).
pub const MAX_IMAGE_BYTES: usize = 20 * 1024 * 1024;
/// Tools switched off for a prompt in `Ask` mode: the runtime refuses them, not the prompt text.
pub const ASK_MODE_DISABLED_TOOLS: &[&str] = &["bash", "edit", "write", "patch", "task"];

struct Live {
    server: Server,
    client: Client,
    hub: Arc<EventHub>,
    version: String,
}

#[derive(Debug, Clone)]
struct NativeSession {
    id: String,
    directory: String,
}

/// What happens when the agent reaches outside its project folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub enum OutsideProject {
    /// Refused by the session's ruleset: the agent stays inside its project, nobody is asked.
    #[default]
    Deny,
    /// The runtime asks; the run surfaces `PermissionAsked` and waits for `reply_permission`.
    Ask,
}

impl OutsideProject {
    fn ruleset(self) -> Value {
        let action = match self {
            OutsideProject::Deny => "deny",
            OutsideProject::Ask => "ask",
        };
        json!([{ "permission": "external_directory", "pattern": "*", "action": action }])
    }
}

/// How a runtime process is run, beyond its configuration (these do not change its key).
#[derive(Clone, Default)]
pub struct RuntimeOptions {
    pub outside_project: OutsideProject,
    /// Where launched processes are recorded for the start-up sweep.
    pub records_dir: Option<PathBuf>,
    /// Told of each run's session before its prompt is sent, and of its end (the gateway's grants).
    pub hooks: Option<Arc<dyn RunHooks>>,
}

impl std::fmt::Debug for RuntimeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeOptions")
            .field("outside_project", &self.outside_project)
            .field("records_dir", &self.records_dir)
            .field("hooks", &self.hooks.is_some())
            .finish()
    }
}

/// Tells the hooks a run ended, on every way out of it.
struct RunEnded(Option<Arc<dyn RunHooks>>, String);

impl Drop for RunEnded {
    fn drop(&mut self) {
        if let Some(h) = &self.0 {
            h.run_ended(&self.1);
        }
    }
}

pub struct OpenCodeRuntime {
    config: RuntimeConfig,
    options: RuntimeOptions,
    root: PathBuf,
    live: tokio::sync::Mutex<Option<Arc<Live>>>,
    info: Mutex<Option<(u32, String, String, std::time::Instant)>>,
    launches: AtomicU32,
    active_runs: Arc<AtomicU32>,
    sessions: Mutex<HashMap<String, NativeSession>>,
    conversation_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Runs hold their directory's lock shared; disposing the instance needs it exclusively, so an
    /// instance is never disposed under a run (a dispose decided a moment ago would abort it).
    directory_locks: Mutex<HashMap<String, Arc<tokio::sync::RwLock<()>>>>,
    instances: Mutex<BTreeSet<String>>,
    disposed: AtomicBool,
    max_retries: u32,
}

impl OpenCodeRuntime {
    /// `root` is the runtime's private folder (its HOME, database and config live there).
    pub fn new(config: RuntimeConfig, root: PathBuf) -> Arc<Self> {
        Self::with_options(config, root, RuntimeOptions::default())
    }

    pub fn with_options(config: RuntimeConfig, root: PathBuf, options: RuntimeOptions) -> Arc<Self> {
        Arc::new(Self {
            config,
            options,
            root,
            live: tokio::sync::Mutex::new(None),
            info: Mutex::new(None),
            launches: AtomicU32::new(0),
            active_runs: Arc::new(AtomicU32::new(0)),
            sessions: Mutex::new(HashMap::new()),
            conversation_locks: Mutex::new(HashMap::new()),
            directory_locks: Mutex::new(HashMap::new()),
            instances: Mutex::new(BTreeSet::new()),
            disposed: AtomicBool::new(false),
            max_retries: MAX_PROVIDER_RETRIES,
        })
    }

    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    pub fn launches(&self) -> u32 {
        self.launches.load(Ordering::SeqCst)
    }

    /// The native session serving a conversation, if it has one.
    pub fn native_session(&self, conversation_id: &str) -> Option<String> {
        self.sessions.lock().unwrap().get(conversation_id).map(|s| s.id.clone())
    }

    /// Re-attach a conversation to a native session stored by the app (after a restart).
    pub fn restore_session(&self, conversation_id: &str, session_id: &str, space: &ExecutionSpace) {
        self.sessions.lock().unwrap().insert(
            conversation_id.into(),
            NativeSession { id: session_id.into(), directory: space.root_str().into() },
        );
    }

    /// Start the process once; later calls reuse it (and relaunch it if it died).
    async fn ensure_live(&self) -> Result<Arc<Live>, RuntimeError> {
        if self.disposed.load(Ordering::SeqCst) {
            return Err(RuntimeError::Disposed);
        }
        let mut guard = self.live.lock().await;
        if let Some(live) = guard.as_ref() {
            if !live.server.exited().await {
                return Ok(live.clone());
            }
            tracing::warn!(tail = %live.server.tail.text(), "runtime process died; relaunching");
            live.hub.shutdown();
            self.instances.lock().unwrap().clear();
        }
        self.config.validate().map_err(|e| RuntimeError::Launch(e.to_string()))?;
        let secrets = self.root.join("secrets");
        let secret_files = self
            .config
            .profiles
            .iter()
            .filter_map(|p| match &p.authentication {
                super::config::Authentication::ApiKey(k) => Some((RuntimeConfig::key_file(&secrets, p), k.clone())),
                super::config::Authentication::None => None,
            })
            .collect();
        let spec = LaunchSpec {
            binary: self.config.binary.clone(),
            rg_dir: self.config.rg_dir.clone(),
            root: self.root.clone(),
            config: self.config.to_opencode_json(&secrets),
            secret_files,
            listen_timeout: launch::LISTEN_TIMEOUT,
            records_dir: self.options.records_dir.clone(),
        };
        self.launches.fetch_add(1, Ordering::SeqCst);
        let server = launch::launch(&spec).await.map_err(|e| RuntimeError::Launch(e.to_string()))?;
        let client = Client::new(&server.base_url, &server.password);
        let version = match client.health().await {
            Ok(h) => h["version"].as_str().unwrap_or("").to_string(),
            Err(e) => {
                server.stop().await;
                return Err(RuntimeError::Launch(format!("The runtime started but does not answer: {e}")));
            }
        };
        if version != PINNED_VERSION {
            server.stop().await;
            return Err(RuntimeError::Launch(format!(
                "The runtime reports version {version}, but Hearth needs exactly {PINNED_VERSION}."
            )));
        }
        let hub = match EventHub::start(client.clone()).await {
            Ok(h) => h,
            Err(e) => {
                server.stop().await;
                return Err(RuntimeError::Launch(e));
            }
        };
        *self.info.lock().unwrap() = Some((server.pid, server.base_url.clone(), version.clone(), server.started));
        let live = Arc::new(Live { server, client, hub, version });
        *guard = Some(live.clone());
        Ok(live)
    }

    fn conversation_lock(&self, conversation_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.conversation_locks.lock().unwrap().entry(conversation_id.into()).or_default().clone()
    }

    fn directory_lock(&self, directory: &str) -> Arc<tokio::sync::RwLock<()>> {
        self.directory_locks.lock().unwrap().entry(directory.into()).or_default().clone()
    }

    fn touch_instance(&self, directory: &str) {
        self.instances.lock().unwrap().insert(directory.into());
    }

    /// The conversation's native session, created on first use with a ruleset that keeps the agent
    /// inside its project.
    async fn session_for(&self, live: &Live, conversation_id: &str, space: &ExecutionSpace) -> Result<String, RuntimeError> {
        if let Some(s) = self.sessions.lock().unwrap().get(conversation_id) {
            if s.directory == space.root_str() {
                return Ok(s.id.clone());
            }
        }
        let permission = self.options.outside_project.ruleset();
        let id = live
            .client
            .create_session(space.root_str(), &format!("Hearth {conversation_id}"), &permission)
            .await
            .map_err(|e| RuntimeError::Api(e.to_string()))?;
        self.sessions.lock().unwrap().insert(
            conversation_id.into(),
            NativeSession { id: id.clone(), directory: space.root_str().into() },
        );
        Ok(id)
    }

    /// An HTTP client for the running server (launching it if needed), for diagnostics and
    /// benchmarks that talk to the runtime directly. Its Debug output hides the password.
    pub async fn client(&self) -> Result<Client, RuntimeError> {
        Ok(self.ensure_live().await?.client.clone())
    }

    /// Subscribe to one native session's events from the runtime's one event stream (launching it
    /// if needed). Diagnostics time event delivery with the `received` instants.
    pub async fn subscribe_session(&self, session_id: &str) -> Result<Subscription, RuntimeError> {
        Ok(self.ensure_live().await?.hub.subscribe(session_id))
    }

    /// Make the project's instance inside the runtime now, so the first prompt does not pay for it.
    pub async fn warm(&self, space: &ExecutionSpace) -> Result<(), RuntimeError> {
        let live = self.ensure_live().await?;
        live.client.warm(space.root_str()).await.map_err(|e| RuntimeError::Api(e.to_string()))?;
        self.touch_instance(space.root_str());
        Ok(())
    }

    /// Free a project's instance inside the runtime (OpenCode never does this by itself).
    /// Skipped while a run uses the directory: it will be idle again later.
    pub async fn dispose_instance(&self, space: &ExecutionSpace) -> Result<(), RuntimeError> {
        let lock = self.directory_lock(space.root_str());
        let Ok(_exclusive) = lock.try_write() else {
            tracing::debug!(directory = space.root_str(), "instance busy; not disposed");
            return Ok(());
        };
        let live = self.live.lock().await.clone();
        if let Some(live) = live {
            live.client.dispose_instance(space.root_str()).await.map_err(|e| RuntimeError::Api(e.to_string()))?;
        }
        self.instances.lock().unwrap().remove(space.root_str());
        Ok(())
    }

    fn prompt_body(&self, request: &RunRequest) -> Result<Value, String> {
        let profile = self.config.resolve_profile(request.profile_id.as_deref()).map_err(|e| e.to_string())?;
        let mut parts = vec![json!({ "type": "text", "text": request.prompt })];
        for image in &request.images {
            check_image(image)?;
            if !profile.image_input {
                return Err(format!("The model profile `{}` does not accept images; choose a profile with image input or remove the attachment.", profile.name));
            }
            let data = base64::engine::general_purpose::STANDARD.encode(image.bytes.as_slice());
            parts.push(json!({
                "type": "file",
                "mime": image.media_type,
                "filename": image.name,
                "url": format!("data:{};base64,{data}", image.media_type),
            }));
        }
        let mut body = json!({
            "parts": parts,
            "model": { "providerID": profile.provider_id(), "modelID": profile.model },
            "agent": "build",
        });
        if request.work_mode == WorkMode::Ask {
            let tools: serde_json::Map<String, Value> = ASK_MODE_DISABLED_TOOLS.iter().map(|t| (t.to_string(), json!(false))).collect();
            body["tools"] = Value::Object(tools);
        }
        Ok(body)
    }

    async fn run_inner(self: Arc<Self>, request: RunRequest, cancel: CancellationToken, out: mpsc::UnboundedSender<RuntimeEvent>) {
        let _active = ActiveRun::new(self.active_runs.clone());
        let _ended = RunEnded(self.options.hooks.clone(), request.request_id.clone());
        let fail = |message: String| {
            let _ = out.send(RuntimeEvent::Error { message });
        };
        if !request.space.root.is_dir() {
            return fail(format!("The project folder {} is gone (moved or deleted); the message was not sent.", request.space.root.display()));
        }
        let body = match self.prompt_body(&request) {
            Ok(b) => b,
            Err(e) => return fail(e),
        };
        let live = match self.ensure_live().await {
            Ok(l) => l,
            Err(e) => return fail(e.to_string()),
        };
        let lock = self.conversation_lock(&request.conversation_id);
        let _turn_guard = tokio::select! {
            g = lock.lock() => g,
            _ = cancel.cancelled() => return fail("Cancelled.".into()),
        };
        let directory_lock = self.directory_lock(request.space.root_str());
        let _in_directory = directory_lock.read().await;
        let session = match self.session_for(&live, &request.conversation_id, &request.space).await {
            Ok(s) => s,
            Err(e) => return fail(e.to_string()),
        };
        self.touch_instance(request.space.root_str());
        if let Some(hooks) = &self.options.hooks {
            if let Err(e) = hooks.session_ready(&request.request_id, &session) {
                return fail(format!("The run's tool grant could not be attached: {e}"));
            }
        }
        let _ = out.send(RuntimeEvent::Session { native_session_id: session.clone() });
        let directory = request.space.root_str().to_string();
        let mut sub = live.hub.subscribe(&session);
        if let Err(e) = live.client.prompt_async(&directory, &session, &body).await {
            return fail(format!("The runtime did not take the message: {e}"));
        }
        let mut turn = Turn::new(self.max_retries);
        let result = loop {
            tokio::select! {
                _ = cancel.cancelled() => {
                    let _ = live.client.abort(&directory, &session).await;
                    // Wait for the runtime to settle so the next run starts from an idle session.
                    let _ = tokio::time::timeout(ABORT_SETTLE_TIMEOUT, async {
                        while let Some(ev) = sub.rx.recv().await {
                            if matches!(&ev, HubEvent::Event { kind, .. } if kind == "session.idle") { break; }
                        }
                    }).await;
                    break Err("Cancelled.".to_string());
                }
                ev = sub.rx.recv() => match ev {
                    None => break Err("The runtime's event stream closed.".into()),
                    Some(HubEvent::Reconnected) => {
                        // Events may have been missed; if the session is no longer busy, finish
                        // from the stored messages.
                        if let Ok(status) = live.client.session_status(&directory).await {
                            if status.get(&session).is_none() {
                                if let Ok(msgs) = live.client.messages(&directory, &session).await {
                                    replay_last_assistant(&mut turn, &msgs, &out);
                                }
                                break Ok(());
                            }
                        }
                    }
                    Some(HubEvent::Event { kind, properties, .. }) => {
                        // A subagent's session acts for this request: tell the gateway's grant.
                        if let Some(child) = child_session_of(&kind, &properties, &session) {
                            if let Some(hooks) = &self.options.hooks {
                                hooks.child_session(&request.request_id, &session, child);
                            }
                            continue;
                        }
                        let up = turn.on_event(&kind, &properties);
                        for e in up.events {
                            let _ = out.send(e);
                        }
                        if up.abort {
                            let _ = live.client.abort(&directory, &session).await;
                        }
                        if let Some(done) = up.finished {
                            // An idle that is not this turn's (an earlier, cancelled turn reporting
                            // late) must not end it: believe it only if the runtime says idle too.
                            let still_busy = live.client.session_status(&directory).await.ok().is_some_and(|st| st.get(&session).is_some_and(|s| s["type"] == "busy"));
                            if still_busy {
                                tracing::debug!(session = %crate::host::logging::log_tag(&session), "ignoring an idle while the session is busy");
                                continue;
                            }
                            break done;
                        }
                    }
                }
            }
        };
        let _ = out.send(match result {
            Ok(()) => RuntimeEvent::Done { native_session_id: session, text: turn.text().to_string() },
            Err(message) => RuntimeEvent::Error { message },
        });
    }
}

/// Emit the text of the last assistant message the stream did not deliver.
fn replay_last_assistant(turn: &mut Turn, messages: &Value, out: &mpsc::UnboundedSender<RuntimeEvent>) {
    let Some(last) = messages.as_array().and_then(|a| a.iter().rev().find(|m| m["info"]["role"] == "assistant")) else { return };
    for part in last["parts"].as_array().into_iter().flatten() {
        let up = turn.on_event("message.part.updated", &json!({ "part": part }));
        for e in up.events {
            let _ = out.send(e);
        }
    }
}

/// The bytes must be what the media type says, and within the size bound.
fn check_image(image: &ImageInput) -> Result<(), String> {
    if image.bytes.len() > MAX_IMAGE_BYTES {
        return Err(format!("The image {} is {} MiB; the limit is {} MiB.", image.name, image.bytes.len() / (1024 * 1024), MAX_IMAGE_BYTES / (1024 * 1024)));
    }
    let actual = image::guess_format(&image.bytes).ok().map(|f| f.to_mime_type());
    if actual != Some(image.media_type.as_str()) {
        return Err(format!(
            "The attachment {} says it is {} but its content is {}; it was not sent.",
            image.name,
            image.media_type,
            actual.unwrap_or("not an image Hearth can read")
        ));
    }
    Ok(())
}

/// Counts a run as active for as long as it lives.
struct ActiveRun(Arc<AtomicU32>);

impl ActiveRun {
    fn new(counter: Arc<AtomicU32>) -> Self {
        counter.fetch_add(1, Ordering::SeqCst);
        Self(counter)
    }
}

impl Drop for ActiveRun {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The stream handed to callers: dropping it cancels the run.
fn event_stream(rx: mpsc::UnboundedReceiver<RuntimeEvent>, guard: tokio_util::sync::DropGuard) -> EventStream {
    Box::pin(futures::stream::unfold((rx, guard, false), |(mut rx, guard, ended)| async move {
        if ended {
            return None;
        }
        let ev = rx.recv().await?;
        let end = ev.is_terminal();
        Some((ev, (rx, guard, end)))
    }))
}

/// A facade-independent handle so `run` can move an `Arc<Self>` into its task.
#[derive(Clone)]
pub struct SharedOpenCode(pub Arc<OpenCodeRuntime>);

#[async_trait::async_trait]
impl AgentRuntime for SharedOpenCode {
    fn run(&self, request: RunRequest, cancel: CancellationToken) -> EventStream {
        let (tx, rx) = mpsc::unbounded_channel();
        let child = cancel.child_token();
        tokio::spawn(self.0.clone().run_inner(request, child.clone(), tx));
        event_stream(rx, child.drop_guard())
    }

    async fn compact_conversation(&self, request: CompactRequest, cancel: CancellationToken) -> Result<CompactOutcome, RuntimeError> {
        let rt = &self.0;
        let session = rt.sessions.lock().unwrap().get(&request.conversation_id).cloned().ok_or(RuntimeError::NoSession)?;
        let profile = rt.config.resolve_profile(request.profile_id.as_deref()).map_err(|e| RuntimeError::Api(e.to_string()))?;
        let live = rt.ensure_live().await?;
        let lock = rt.conversation_lock(&request.conversation_id);
        let _g = lock.lock().await;
        let directory_lock = rt.directory_lock(&session.directory);
        let _in_directory = directory_lock.read().await;
        let _active = ActiveRun::new(rt.active_runs.clone());
        let provider = profile.provider_id();
        let call = live.client.summarize(&session.directory, &session.id, &provider, &profile.model);
        tokio::select! {
            r = call => {
                let v = r.map_err(|e| RuntimeError::Api(e.to_string()))?;
                Ok(CompactOutcome { compacted: v == json!(true), native_session_id: session.id })
            }
            _ = cancel.cancelled() => {
                let _ = live.client.abort(&session.directory, &session.id).await;
                Err(RuntimeError::Cancelled)
            }
        }
    }

    async fn reply_permission(&self, space: &ExecutionSpace, permission_id: &str, reply: PermissionReply) -> Result<(), RuntimeError> {
        let live = self.0.ensure_live().await?;
        let reply = match reply {
            PermissionReply::Once => "once",
            PermissionReply::Always => "always",
            PermissionReply::Reject => "reject",
        };
        live.client.reply_permission(space.root_str(), permission_id, reply).await.map_err(|e| RuntimeError::Api(e.to_string()))
    }

    async fn test_connection(&self) -> Result<ConnectionInfo, RuntimeError> {
        let live = self.0.ensure_live().await?;
        let h = live.client.health().await.map_err(|e| RuntimeError::Unreachable(e.to_string()))?;
        Ok(ConnectionInfo { version: live.version.clone(), healthy: h["healthy"] == json!(true) })
    }

    async fn release_conversation(&self, conversation_id: &str) -> Result<(), RuntimeError> {
        self.0.sessions.lock().unwrap().remove(conversation_id);
        self.0.conversation_locks.lock().unwrap().remove(conversation_id);
        Ok(())
    }

    fn status(&self) -> RuntimeStatus {
        let rt = &self.0;
        let info = rt.info.lock().unwrap().clone();
        RuntimeStatus {
            running: info.is_some() && !rt.disposed.load(Ordering::SeqCst),
            pid: info.as_ref().map(|i| i.0),
            url: info.as_ref().map(|i| i.1.clone()),
            version: info.as_ref().map(|i| i.2.clone()),
            launches: rt.launches(),
            active_runs: rt.active_runs.load(Ordering::SeqCst),
            open_instances: rt.instances.lock().unwrap().iter().cloned().collect(),
            uptime_ms: info.map(|i| i.3.elapsed().as_millis() as u64),
        }
    }

    async fn dispose(&self) {
        let rt = &self.0;
        rt.disposed.store(true, Ordering::SeqCst);
        let live = rt.live.lock().await.take();
        if let Some(live) = live {
            live.hub.shutdown();
            live.server.stop().await;
            tracing::info!(pid = live.server.pid, "runtime stopped");
        }
        *rt.info.lock().unwrap() = None;
    }
}

#[async_trait::async_trait]
impl ProcessRuntime for SharedOpenCode {
    async fn dispose_instance(&self, space: &ExecutionSpace) -> Result<(), RuntimeError> {
        self.0.dispose_instance(space).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png() -> Vec<u8> {
        let mut out = std::io::Cursor::new(Vec::new());
        image::RgbaImage::new(2, 1).write_to(&mut out, image::ImageFormat::Png).unwrap();
        out.into_inner()
    }

    #[test]
    fn an_image_must_be_what_its_media_type_says() {
        let ok = ImageInput { name: "a.png".into(), media_type: "image/png".into(), bytes: Arc::new(png()) };
        assert_eq!(check_image(&ok), Ok(()));
        let lie = ImageInput { media_type: "image/jpeg".into(), ..ok.clone() };
        let e = check_image(&lie).unwrap_err();
        assert!(e.contains("says it is image/jpeg but its content is image/png"), "{e}");
        let junk = ImageInput { bytes: Arc::new(b"hello".to_vec()), ..ok };
        assert!(check_image(&junk).unwrap_err().contains("not an image"));
    }
}
