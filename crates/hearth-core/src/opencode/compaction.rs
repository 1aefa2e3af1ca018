//! Native compaction of a conversation's session (`POST /session/{id}/summarize`): a model turn of
//! its own, so it takes the conversation's turn lock and counts as a run.

use tokio_util::sync::CancellationToken;

use super::runtime::Shared;
use crate::runtime::{Cause, CompactOutcome, CompactRequest, RuntimeError};

pub(super) async fn compact(rt: &Shared, request: CompactRequest, cancel: CancellationToken) -> Result<CompactOutcome, RuntimeError> {
    let session = rt
        .sessions
        .native(&request.conversation_id)
        .map(|s| s.id)
        .or(request.native_session.clone())
        .ok_or(RuntimeError::NoSession)?;
    let profile = rt.server.config().resolve_profile(request.profile_id.as_deref()).map_err(|e| RuntimeError::InvalidRequest(Cause::new(e)))?;
    let live = rt.server.ensure_live(|| rt.sessions.all_instances_closed()).await?;
    let lock = rt.sessions.conversation_lock(&request.conversation_id);
    let _one_turn_at_a_time = lock.lock().await;
    let directory = request.space.root_str();
    let directory_lock = rt.sessions.directory_lock(directory);
    let _instance_in_use = directory_lock.read().await;
    rt.active_runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let provider = profile.provider_id();
    let result = tokio::select! {
        r = live.client.summarize(directory, &session, &provider, &profile.model) => {
            r.map(|compacted| CompactOutcome { compacted, native_session_id: session.clone() }).map_err(RuntimeError::from)
        }
        _ = cancel.cancelled() => {
            let _ = live.client.abort(directory, &session).await;
            Err(RuntimeError::Cancelled)
        }
    };
    rt.active_runs.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    result
}
