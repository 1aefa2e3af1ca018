use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::runtime::contract::RuntimeEvent;
use crate::runtime::process::{ProcessRuntime, OPENCODE_FAMILY};
use crate::runtime::registry::{LocalRuntimeRegistry, RegistryConfig};
use crate::runtime::testing::{collect, request, settle, space, FakeRuntime};

struct Rig {
    registry: Arc<LocalRuntimeRegistry>,
    manager: SelectedRuntimeManager,
    fake: Arc<FakeRuntime>,
    /// Facades the manager asked for.
    creates: Arc<AtomicUsize>,
    /// Process owners the registry asked for.
    processes: Arc<AtomicUsize>,
}

fn selection() -> RuntimeSelection {
    RuntimeSelection {
        provider: OPENCODE_FAMILY.into(),
        key: RuntimeKey::new("k"),
    }
}

/// The production wiring: the manager creates facades through `registry.acquire`, and forwards
/// conversation releases to `registry.release_conversation`.
fn rig(capacity: usize, create_delay: Duration) -> Rig {
    let registry = Arc::new(LocalRuntimeRegistry::with_config(RegistryConfig {
        idle_close_after: Duration::from_secs(60),
        ..RegistryConfig::default()
    }));
    let fake = FakeRuntime::new();
    let (creates, processes) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (reg, f, c, p) = (registry.clone(), fake.clone(), creates.clone(), processes.clone());
    let create = move |selection: RuntimeSelection, space: ExecutionSpace| {
        c.fetch_add(1, Ordering::SeqCst);
        let (reg, f, p) = (reg.clone(), f.clone(), p.clone());
        async move {
            tokio::time::sleep(create_delay).await;
            reg.acquire(&selection.provider, selection.key, space, move || {
                p.fetch_add(1, Ordering::SeqCst);
                Ok(f as Arc<dyn ProcessRuntime>)
            })
            .await
        }
    };
    let reg = registry.clone();
    let release = move |id: String| {
        let reg = reg.clone();
        async move { reg.release_conversation(&id).await }
    };
    Rig {
        manager: SelectedRuntimeManager::new(capacity, create, release),
        registry,
        fake,
        creates,
        processes,
    }
}

#[tokio::test(start_paused = true)]
async fn capacity_one_across_ten_projects_keeps_one_process_owner() {
    let rig = rig(1, Duration::ZERO);
    let spaces: Vec<_> = (0..10).map(|i| space(&format!("p{i}"))).collect();
    let mut owners = Vec::new();
    for (i, s) in spaces.iter().enumerate() {
        let facade = rig.manager.get_runtime(&selection(), s).await.unwrap();
        let events = collect(&*facade, request(&format!("r{i}"), s)).await;
        assert!(matches!(events.last(), Some(RuntimeEvent::Done { .. })));
        owners.push(facade.owner_id().unwrap());
        assert_eq!(rig.manager.cached_count(), 1);
    }
    assert!(owners.iter().all(|o| *o == owners[0]), "{owners:?}");
    assert_eq!(
        (rig.creates.load(Ordering::SeqCst), rig.processes.load(Ordering::SeqCst)),
        (10, 1)
    );
    assert_eq!(rig.registry.runtime_count(), 1);
    assert_eq!(rig.fake.calls().runs.len(), 10);

    // The most recent facade is cached; an evicted one is recreated on the same owner.
    rig.manager.get_runtime(&selection(), &spaces[9]).await.unwrap();
    assert_eq!(rig.creates.load(Ordering::SeqCst), 10);
    let again = rig.manager.get_runtime(&selection(), &spaces[0]).await.unwrap();
    assert_eq!(rig.creates.load(Ordering::SeqCst), 11);
    assert_eq!(again.owner_id(), Some(owners[0]));
    assert_eq!(rig.processes.load(Ordering::SeqCst), 1);
    assert_eq!(
        rig.registry.status()[0].facades,
        1,
        "evicted facades gave their leases back"
    );
    // Evictions never left the owner without a lease, so it never began to close.
    assert_eq!(rig.fake.calls().disposed, 0);
}

#[tokio::test(start_paused = true)]
async fn busy_facades_are_never_evicted() {
    let rig = rig(1, Duration::ZERO);
    let (a, b, c, d) = (space("a"), space("b"), space("c"), space("d"));
    let fa = rig.manager.get_runtime(&selection(), &a).await.unwrap();
    let release = rig.fake.hold("ra");
    let mut busy = fa.run(request("ra", &a), CancellationToken::new());
    busy.next().await;
    drop(fa);

    rig.manager.get_runtime(&selection(), &b).await.unwrap();
    assert_eq!(rig.manager.cached_count(), 2, "a is busy: over capacity for now");
    rig.manager.get_runtime(&selection(), &c).await.unwrap();
    assert_eq!(rig.manager.cached_count(), 2, "b (idle) went, a (busy) stayed");
    let creates = rig.creates.load(Ordering::SeqCst);
    rig.manager.get_runtime(&selection(), &a).await.unwrap();
    assert_eq!(rig.creates.load(Ordering::SeqCst), creates, "a is still cached");

    release.send(()).unwrap();
    busy.collect::<Vec<_>>().await;
    rig.manager.get_runtime(&selection(), &d).await.unwrap();
    assert_eq!(rig.manager.cached_count(), 1, "idle again: a and c are evicted");
    rig.manager.get_runtime(&selection(), &a).await.unwrap();
    assert_eq!(rig.creates.load(Ordering::SeqCst), creates + 2);
}

#[tokio::test(start_paused = true)]
async fn concurrent_requests_for_one_key_create_once() {
    let rig = rig(4, Duration::from_millis(50));
    let (sel, s) = (selection(), space("a"));
    let facades = futures::future::join_all((0..5).map(|_| rig.manager.get_runtime(&sel, &s))).await;
    let facades: Vec<_> = facades.into_iter().map(Result::unwrap).collect();
    assert_eq!(rig.creates.load(Ordering::SeqCst), 1);
    assert!(facades.iter().all(|f| Arc::ptr_eq(f, &facades[0])));
    assert_eq!(rig.manager.cached_count(), 1);
    assert_eq!(rig.registry.status()[0].facades, 1);
}

#[tokio::test(start_paused = true)]
async fn a_failed_creation_is_not_cached() {
    let attempts = Arc::new(AtomicUsize::new(0));
    let registry = Arc::new(LocalRuntimeRegistry::new());
    let fake = FakeRuntime::new();
    let (reg, a) = (registry.clone(), attempts.clone());
    let manager = SelectedRuntimeManager::new(
        2,
        move |selection: RuntimeSelection, space: ExecutionSpace| {
            let first = a.fetch_add(1, Ordering::SeqCst) == 0;
            let (reg, fake) = (reg.clone(), fake.clone());
            async move {
                if first {
                    return Err(RuntimeError::Launch("The runtime binary is missing.".into()));
                }
                reg.acquire(&selection.provider, selection.key, space, move || {
                    Ok(fake as Arc<dyn ProcessRuntime>)
                })
                .await
            }
        },
        |_id: String| async { Ok(()) },
    );
    let failed = manager.get_runtime(&selection(), &space("a")).await;
    assert!(matches!(failed, Err(RuntimeError::Launch(_))));
    assert_eq!(manager.cached_count(), 0);
    manager.get_runtime(&selection(), &space("a")).await.unwrap();
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn release_conversation_is_forwarded_and_dispose_gives_back_every_lease() {
    let rig = rig(4, Duration::ZERO);
    let fa = rig.manager.get_runtime(&selection(), &space("a")).await.unwrap();
    rig.manager.get_runtime(&selection(), &space("b")).await.unwrap();
    rig.manager.release_conversation("conv-9").await.unwrap();
    assert_eq!(rig.fake.calls().released, ["conv-9"]);

    rig.manager.dispose().await;
    assert_eq!(rig.manager.cached_count(), 0);
    assert_eq!(rig.registry.status()[0].facades, 0);
    assert_eq!(fa.owner_id(), None, "a facade handed out earlier is disposed too");
    assert!(matches!(
        rig.manager.get_runtime(&selection(), &space("a")).await,
        Err(RuntimeError::Disposed)
    ));
    // The manager does not own the process: the registry closes it after its idle period.
    settle().await;
    assert_eq!(rig.fake.calls().disposed, 0);
    tokio::time::advance(Duration::from_secs(60)).await;
    settle().await;
    assert_eq!((rig.fake.calls().disposed, rig.registry.runtime_count()), (1, 0));
    rig.registry.dispose().await;
}
