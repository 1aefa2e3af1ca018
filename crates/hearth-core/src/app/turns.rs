//! The turns running in the app, one per conversation at most, and the moment between a reply that
//! shows as ended and the turn that is over: its changes recorded, its grant revoked. A user who
//! sends the next message, undoes or forks in that moment waits for it instead of being told a
//! reply is still running (the window already shows it ended).

use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Hearth;

/// How long an action waits for ended turns to finish their last steps; past it, it is refused as
/// if the turn still ran. Recording a turn's changes reads the project's changed files once.
pub const FINISHING_TURN_WAIT: Duration = Duration::from_secs(30);

/// Where a turn is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TurnPhase {
    /// Its run goes on: the reply can still change.
    Running,
    /// Its reply ended and has been shown as ended; the turn's last steps are under way.
    Finishing,
}

/// A turn of one conversation: what stops it, and where it is. The turn is over when it leaves the
/// app's table (the phase's sender goes with it, which wakes whoever waits).
pub(crate) struct RunningTurn {
    pub cancel: CancellationToken,
    pub project_id: String,
    phase: watch::Sender<TurnPhase>,
}

impl RunningTurn {
    pub fn new(cancel: CancellationToken, project_id: String) -> Self {
        Self { cancel, project_id, phase: watch::Sender::new(TurnPhase::Running) }
    }
}

/// Which turns an action waits for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum TurnScope<'a> {
    Conversation(&'a str),
    Project(&'a str),
}

impl Hearth {
    /// The conversation's reply has ended: from here on an action waits for the turn instead of
    /// being refused. Called before the ending is shown, so the window never sees an end that a
    /// send would still refuse.
    pub(crate) fn turn_finishing(&self, conversation_id: &str) {
        if let Some(turn) = self.turns.lock().unwrap().get(conversation_id) {
            turn.phase.send_replace(TurnPhase::Finishing);
        }
    }

    /// Wait (at most [`FINISHING_TURN_WAIT`]) until no turn in `scope` is finishing. Turns still
    /// running are left alone: the caller refuses them as before.
    pub(crate) async fn settle_finishing(&self, scope: TurnScope<'_>) {
        let finishing: Vec<watch::Receiver<TurnPhase>> = self
            .turns
            .lock()
            .unwrap()
            .iter()
            .filter(|(conversation, turn)| match scope {
                TurnScope::Conversation(id) => conversation.as_str() == id,
                TurnScope::Project(id) => turn.project_id == id,
            })
            .filter(|(_, turn)| *turn.phase.borrow() == TurnPhase::Finishing)
            .map(|(_, turn)| turn.phase.subscribe())
            .collect();
        for mut phase in finishing {
            // `changed` fails once the sender is gone: the turn left the table.
            let over = async { while phase.changed().await.is_ok() {} };
            if tokio::time::timeout(FINISHING_TURN_WAIT, over).await.is_err() {
                tracing::warn!("an ended turn is still finishing; the action is refused");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_waiter_wakes_when_the_finishing_turn_leaves_the_table() {
        let turn = RunningTurn::new(CancellationToken::new(), "p".into());
        turn.phase.send_replace(TurnPhase::Finishing);
        let mut phase = turn.phase.subscribe();
        let waiter = tokio::spawn(async move { while phase.changed().await.is_ok() {} });
        assert!(!waiter.is_finished());
        drop(turn);
        tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("woken when the turn went").unwrap();
    }
}
