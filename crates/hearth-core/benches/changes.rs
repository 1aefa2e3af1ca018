//! Review and undo at scale, through the app against the real runtime and the built-in scripted
//! model: a turn whose agent changes 1, 100 and 1,000 files (with its `bash` tool), in a project of
//! as many files again. Prints, for each: the time from the turn's end (the runtime's last event
//! reaching the window) to the reply with its change list reaching the window, the change list's
//! size, one diff's time, and undo and redo times. Asserts nothing about speed; fails when the
//! runtime is missing, a turn fails, or undo does not restore the files.
//!
//! `cargo bench -p hearth-core --bench changes`

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hearth_core::app::{ConversationUpdate, ConversationUpdateKind, Hearth, UpdateSink};
use hearth_core::diagnostics::kit;
use hearth_core::runtime::RuntimeEvent;
use hearth_core::store::{Message, MessageStatus};

/// Files changed by one turn, per case.
const CASES: [usize; 3] = [1, 100, 1_000];
/// Bound on one turn (1,000 files are written by one shell command).
const TURN_TIMEOUT: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(2);

/// The window's updates, each with the moment it arrived.
#[derive(Default)]
struct Timed(Mutex<Vec<(Instant, ConversationUpdate)>>);

impl UpdateSink for Timed {
    fn conversation(&self, event: ConversationUpdate) {
        self.0.lock().unwrap().push((Instant::now(), event));
    }
}

impl Timed {
    /// (when the runtime's `Ended` arrived, when `TurnFinished` arrived with the reply), once the
    /// `n`th turn of `conversation` finished.
    async fn turn(&self, conversation: &str, n: usize) -> Result<(Instant, Instant, Message), String> {
        let deadline = Instant::now() + TURN_TIMEOUT;
        loop {
            {
                let updates = self.0.lock().unwrap();
                let of = || updates.iter().filter(|(_, u)| u.conversation_id == conversation);
                let ended: Vec<Instant> = of().filter(|(_, u)| matches!(&u.kind, ConversationUpdateKind::Runtime { event: RuntimeEvent::Ended { .. }, .. })).map(|(t, _)| *t).collect();
                let finished: Vec<(Instant, Message)> =
                    of().filter_map(|(t, u)| match &u.kind { ConversationUpdateKind::TurnFinished { message } => Some((*t, message.clone())), _ => None }).collect();
                if let (Some(end), Some((shown, message))) = (ended.get(n - 1), finished.get(n - 1)) {
                    return Ok((*end, *shown, message.clone()));
                }
            }
            if Instant::now() > deadline {
                return Err(format!("turn {n} did not finish"));
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() -> ExitCode {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio");
    match rt.block_on(bench()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("changes bench failed: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn bench() -> Result<(), String> {
    kit::locate_runtime().await.map_err(|e| format!("{e} (run scripts/setup.sh)"))?;
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let updates = Arc::new(Timed::default());
    let options = kit::app_options(&tmp.path().join("data"), kit::checkout_locate_inputs()).map_err(|e| e.to_string())?;
    let hearth = Hearth::open(options, updates.clone()).await.map_err(|e| e.to_string())?;
    println!("Review and undo: a turn changing N files in a project of 2N files (release build)");
    println!("{:>6} {:>12} {:>10} {:>10} {:>10} {:>12}", "files", "end→list ms", "diff ms", "undo ms", "redo ms", "list size");
    let result = cases(&hearth, &updates, tmp.path()).await;
    hearth.shutdown().await;
    result
}

async fn cases(hearth: &Arc<Hearth>, updates: &Timed, root: &std::path::Path) -> Result<(), String> {
    for n in CASES {
        let folder = root.join(format!("project-{n}"));
        std::fs::create_dir_all(folder.join("kept")).map_err(|e| e.to_string())?;
        for i in 0..n {
            std::fs::write(folder.join(format!("kept/k{i}.txt")), format!("untouched {i}\n")).map_err(|e| e.to_string())?;
            std::fs::write(folder.join(format!("f{i}.txt")), format!("line one of {i}\nline two\n")).map_err(|e| e.to_string())?;
        }
        let project = hearth.store().add_project(&folder).map_err(|e| e.to_string())?;
        let conversation = hearth.store().create_conversation(&project.id, "bench").map_err(|e| e.to_string())?.id;
        // A first turn opens the project in the runtime and records it once.
        hearth.send_message(&conversation, "say hello".into(), Vec::new()).await.map_err(|e| e.to_string())?;
        updates.turn(&conversation, 1).await?;
        let command = format!("run for i in $(seq 0 {}); do echo changed >> f$i.txt; done", n - 1);
        let sent = Instant::now();
        hearth.send_message(&conversation, command, Vec::new()).await.map_err(|e| e.to_string())?;
        let (ended, shown, reply) = updates.turn(&conversation, 2).await?;
        if reply.status != MessageStatus::Done {
            return Err(format!("the turn failed: {:?}", reply.error));
        }
        let list = reply.changes.clone().ok_or("the reply has no change list")?.list;
        if list.total_files as usize != n {
            return Err(format!("{} files listed, {n} changed", list.total_files));
        }
        let t = Instant::now();
        hearth.file_diff(&reply.id, "f0.txt", 0).await.map_err(|e| e.to_string())?;
        let diff = t.elapsed();
        let t = Instant::now();
        hearth.undo_turn(&conversation, &reply.id, false).await.map_err(|e| e.to_string())?;
        let undo = t.elapsed();
        let restored = std::fs::read_to_string(folder.join(format!("f{}.txt", n - 1))).map_err(|e| e.to_string())?;
        if restored != format!("line one of {}\nline two\n", n - 1) {
            return Err(format!("undo left {restored:?}"));
        }
        let t = Instant::now();
        hearth.redo_turns(&conversation, false).await.map_err(|e| e.to_string())?;
        let redo = t.elapsed();
        let listed = serde_json::to_vec(&list).map(|b| b.len()).unwrap_or(0);
        println!(
            "{n:>6} {:>12.1} {:>10.1} {:>10.1} {:>10.1} {:>9.1} KB   (turn {:.0} ms)",
            ms(shown - ended),
            ms(diff),
            ms(undo),
            ms(redo),
            listed as f64 / 1024.0,
            ms(ended - sent)
        );
    }
    Ok(())
}
