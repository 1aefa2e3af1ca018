use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::runtime::contract::{RuntimeEvent, TurnEnd};
use crate::runtime::testing::{collect, request, settle, space, FakeRuntime, FakeSpec};

struct Rig {
    manager: SelectedRuntimeManager,
    fake: Arc<FakeRuntime>,
    spec: Arc<FakeSpec>,
}

impl Rig {
    fn selection(&self) -> RuntimeSelection {
        self.spec.clone()
    }

    /// Runtimes the manager asked the spec for.
    fn processes(&self) -> usize {
        self.spec.created.load(Ordering::SeqCst)
    }
}

/// The production wiring over a fake runtime.
fn rig(capacity: usize) -> Rig {
    let fake = FakeRuntime::new();
    let spec = FakeSpec::new("k", &fake);
    let manager = SelectedRuntimeManager::start(ManagerConfig {
        host: RuntimeHost::default(),
        registry: RegistryConfig { idle_close_after: Duration::from_secs(60), ..RegistryConfig::default() },
        facade_capacity: capacity,
    });
    Rig { manager, fake, spec }
}

fn is_done(events: &[RuntimeEvent]) -> bool {
    matches!(events.last(), Some(RuntimeEvent::Ended { end: TurnEnd::Done { .. } }))
}

#[tokio::test(start_paused = true)]
async fn capacity_one_across_ten_projects_keeps_one_process_owner() {
    let rig = rig(1);
    let spaces: Vec<_> = (0..10).map(|i| space(&format!("p{i}"))).collect();
    let mut owners = Vec::new();
    let mut last = None;
    for (i, s) in spaces.iter().enumerate() {
        let facade = rig.manager.get_runtime(&rig.selection(), s).await.unwrap();
        let events = collect(&*facade, request(&format!("r{i}"), s)).await;
        assert!(is_done(&events), "{events:?}");
        owners.push(facade.owner_id().unwrap());
        assert_eq!(rig.manager.cached_count(), 1);
        last = Some(facade);
    }
    assert!(owners.iter().all(|o| *o == owners[0]), "{owners:?}");
    assert_eq!(rig.processes(), 1);
    assert_eq!(rig.manager.runtime_count(), 1);
    assert_eq!(rig.fake.calls().runs.len(), 10);

    // The most recent facade is cached; an evicted one is recreated on the same owner.
    let cached = rig.manager.get_runtime(&rig.selection(), &spaces[9]).await.unwrap();
    assert!(Arc::ptr_eq(&cached, last.as_ref().unwrap()));
    drop((cached, last));
    let again = rig.manager.get_runtime(&rig.selection(), &spaces[0]).await.unwrap();
    assert_eq!(again.owner_id(), Some(owners[0]));
    assert_eq!(rig.processes(), 1);
    assert_eq!(rig.manager.runtimes()[0].facades, 1, "evicted facades gave their leases back");
    // Evictions never left the owner without a lease, so it never began to close.
    assert_eq!(rig.fake.calls().disposed, 0);
}

#[tokio::test(start_paused = true)]
async fn busy_facades_are_never_evicted() {
    let rig = rig(1);
    let (a, b, c, d) = (space("a"), space("b"), space("c"), space("d"));
    let fa = rig.manager.get_runtime(&rig.selection(), &a).await.unwrap();
    let release = rig.fake.hold("ra");
    let mut busy = fa.run(request("ra", &a), CancellationToken::new());
    busy.next().await;

    rig.manager.get_runtime(&rig.selection(), &b).await.unwrap();
    assert_eq!(rig.manager.cached_count(), 2, "a is busy: over capacity for now");
    rig.manager.get_runtime(&rig.selection(), &c).await.unwrap();
    assert_eq!(rig.manager.cached_count(), 2, "b (idle) went, a (busy) stayed");
    let still = rig.manager.get_runtime(&rig.selection(), &a).await.unwrap();
    assert!(Arc::ptr_eq(&still, &fa), "a is still cached");
    drop(still);

    release.send(()).unwrap();
    busy.collect::<Vec<_>>().await;
    rig.manager.get_runtime(&rig.selection(), &d).await.unwrap();
    assert_eq!(rig.manager.cached_count(), 1, "idle again: a and c are evicted");
    let fresh = rig.manager.get_runtime(&rig.selection(), &a).await.unwrap();
    assert!(!Arc::ptr_eq(&fresh, &fa), "a was evicted and made again");
}

#[tokio::test(start_paused = true)]
async fn concurrent_requests_for_one_key_create_once() {
    let rig = rig(4);
    let (sel, s) = (rig.selection(), space("a"));
    let facades = futures::future::join_all((0..5).map(|_| rig.manager.get_runtime(&sel, &s))).await;
    let facades: Vec<_> = facades.into_iter().map(Result::unwrap).collect();
    assert_eq!(rig.processes(), 1);
    assert!(facades.iter().all(|f| Arc::ptr_eq(f, &facades[0])));
    assert_eq!(rig.manager.cached_count(), 1);
    assert_eq!(rig.manager.runtimes()[0].facades, 1);
}

#[tokio::test(start_paused = true)]
async fn a_failed_creation_is_not_cached() {
    let fake = FakeRuntime::new();
    let spec = Arc::new(FakeSpec { fail_first: true, ..Arc::try_unwrap(FakeSpec::new("k", &fake)).unwrap() });
    let manager = SelectedRuntimeManager::start(ManagerConfig::new(RuntimeHost::default()));
    let selection: RuntimeSelection = spec.clone();
    let failed = manager.get_runtime(&selection, &space("a")).await;
    assert!(matches!(failed, Err(RuntimeError::Start(_))));
    assert_eq!(manager.cached_count(), 0);
    manager.get_runtime(&selection, &space("a")).await.unwrap();
    assert_eq!(spec.created.load(Ordering::SeqCst), 2);
    manager.dispose().await;
}

#[tokio::test(start_paused = true)]
async fn release_conversation_is_forwarded_and_dispose_gives_back_every_lease() {
    let rig = rig(4);
    let fa = rig.manager.get_runtime(&rig.selection(), &space("a")).await.unwrap();
    rig.manager.get_runtime(&rig.selection(), &space("b")).await.unwrap();
    rig.manager.release_conversation("conv-9").await.unwrap();
    assert_eq!(rig.fake.calls().released, ["conv-9"]);

    rig.manager.dispose().await;
    assert_eq!(rig.manager.cached_count(), 0);
    assert_eq!(fa.owner_id(), None, "a facade handed out earlier is disposed too");
    assert!(matches!(rig.manager.get_runtime(&rig.selection(), &space("a")).await, Err(RuntimeError::Disposed)));
    // Disposing the manager closes every runtime it made, at once.
    settle().await;
    assert_eq!((rig.fake.calls().disposed, rig.manager.runtime_count()), (1, 0));
}
