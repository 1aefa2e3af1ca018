use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::time::advance;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::runtime::memory::RecycleReason;
use crate::runtime::contract::{AgentRuntime, Cause, CompactRequest, RuntimeEvent, TurnEnd, TurnFailure};
use crate::runtime::process::RuntimeSlot;
use crate::runtime::testing::{acquire, collect, request, settle, space, FakeRuntime, FAKE_FAMILY};

const IDLE: Duration = Duration::from_secs(60);

fn config() -> RegistryConfig {
    RegistryConfig {
        idle_close_after: IDLE,
        instance_idle_after: Duration::from_secs(600),
        max_warm_instances: 100,
        sweep_every: Duration::from_secs(10),
        recycle: RecyclePolicy::NEVER,
    }
}

#[tokio::test(start_paused = true)]
async fn one_owner_serves_every_space_and_concurrent_acquires_create_once() {
    let registry = LocalRuntimeRegistry::with_config(config());
    let fake = FakeRuntime::new();
    let created = Arc::new(AtomicUsize::new(0));
    let spaces: Vec<_> = (0..5).map(|i| space(&format!("p{i}"))).collect();
    let facades = futures::future::join_all(spaces.iter().map(|s| {
        let (fake, created) = (fake.clone(), created.clone());
        registry.acquire(RuntimeSlot::of(FAKE_FAMILY), RuntimeKey::new("k"), s.clone(), move || {
            created.fetch_add(1, Ordering::SeqCst);
            Ok(fake as Arc<dyn ProcessRuntime>)
        })
    }))
    .await;
    let facades: Vec<_> = facades.into_iter().map(Result::unwrap).collect();
    assert_eq!(created.load(Ordering::SeqCst), 1);
    assert_eq!(registry.runtime_count(), 1);
    let owner = facades[0].owner_id();
    assert!(facades.iter().all(|f| f.owner_id() == owner));
    for (i, (facade, s)) in facades.iter().zip(&spaces).enumerate() {
        let events = collect(facade, request(&format!("r{i}"), s)).await;
        assert!(matches!(events.last(), Some(RuntimeEvent::Ended { end: TurnEnd::Done { .. } })), "{events:?}");
    }
    let calls = fake.calls();
    assert_eq!(calls.runs.len(), 5);
    assert_eq!(calls.runs[3].1, spaces[3].cache_identity);
    let status = registry.status();
    assert_eq!(status.len(), 1);
    assert_eq!(
        (status[0].facades, status[0].active_runs, status[0].warm_instances.len()),
        (5, 0, 5)
    );
}

#[tokio::test(start_paused = true)]
async fn unleased_runtime_closes_after_the_idle_period_and_not_before() {
    let registry = LocalRuntimeRegistry::with_config(config());
    let fake = FakeRuntime::new();
    let a = acquire(&registry, "k", &space("a"), &fake).await;
    let b = acquire(&registry, "k", &space("b"), &fake).await;
    drop(a);
    settle().await;
    advance(IDLE * 2).await;
    settle().await;
    assert_eq!(fake.calls().disposed, 0, "one facade still leases it");
    drop(b);
    settle().await;
    advance(IDLE - Duration::from_secs(1)).await;
    settle().await;
    assert_eq!((fake.calls().disposed, registry.runtime_count()), (0, 1));
    advance(Duration::from_secs(1)).await;
    settle().await;
    assert_eq!((fake.calls().disposed, registry.runtime_count()), (1, 0));
    // The next acquire starts a fresh runtime.
    let fresh = FakeRuntime::new();
    let c = acquire(&registry, "k", &space("a"), &fresh).await;
    assert_ne!(c.owner_id(), None);
    assert_eq!(registry.runtime_count(), 1);
    registry.dispose().await;
    assert_eq!(fresh.calls().disposed, 1);
}

#[tokio::test(start_paused = true)]
async fn a_new_facade_during_the_idle_period_cancels_the_close() {
    let registry = LocalRuntimeRegistry::with_config(config());
    let fake = FakeRuntime::new();
    drop(acquire(&registry, "k", &space("a"), &fake).await);
    settle().await;
    advance(IDLE / 2).await;
    let other = FakeRuntime::new();
    let again = acquire(&registry, "k", &space("b"), &other).await;
    settle().await;
    advance(IDLE * 3).await;
    settle().await;
    assert_eq!(fake.calls().disposed, 0);
    assert_eq!(
        other.calls().disposed,
        0,
        "the factory must not run again for a live key"
    );
    drop(again);
    settle().await;
    advance(IDLE).await;
    settle().await;
    assert_eq!(fake.calls().disposed, 1);
}

#[tokio::test(start_paused = true)]
async fn a_run_in_flight_keeps_an_unleased_runtime_open() {
    let registry = LocalRuntimeRegistry::with_config(config());
    let fake = FakeRuntime::new();
    let s = space("a");
    let facade = acquire(&registry, "k", &s, &fake).await;
    let release = fake.hold("r1");
    let mut stream = facade.run(request("r1", &s), CancellationToken::new());
    assert!(matches!(stream.next().await, Some(RuntimeEvent::Session { .. })));
    assert_eq!(facade.active_runs(), 1);
    drop(facade);
    settle().await;
    advance(IDLE * 2).await;
    settle().await;
    assert_eq!(fake.calls().disposed, 0);
    release.send(()).unwrap();
    let rest: Vec<_> = stream.collect().await;
    assert!(matches!(rest.last(), Some(RuntimeEvent::Ended { end: TurnEnd::Done { .. } })));
    settle().await;
    advance(IDLE).await;
    settle().await;
    assert_eq!(fake.calls().disposed, 1);
}

#[tokio::test(start_paused = true)]
async fn a_configuration_change_retires_the_old_runtime_after_its_run_drains() {
    let registry = LocalRuntimeRegistry::with_config(config());
    let (old, new) = (FakeRuntime::new(), FakeRuntime::new());
    let s = space("a");
    let old_facade = acquire(&registry, "v1", &s, &old).await;
    let old_id = old_facade.owner_id();
    let release = old.hold("r1");
    let mut in_flight = old_facade.run(request("r1", &s), CancellationToken::new());
    assert!(matches!(in_flight.next().await, Some(RuntimeEvent::Session { .. })));

    let new_facade = acquire(&registry, "v2", &s, &new).await;
    assert_ne!(new_facade.owner_id(), old_id);
    settle().await;
    assert_eq!(old.calls().disposed, 0, "the old runtime still has a run in flight");
    let status = registry.status();
    assert_eq!(status.iter().map(|r| r.retired).collect::<Vec<_>>(), [true, false]);

    // New runs go to the new runtime, even through a facade handed out before the change.
    collect(&new_facade, request("r2", &s)).await;
    collect(&old_facade, request("r3", &s)).await;
    assert_eq!(old_facade.owner_id(), new_facade.owner_id());
    let new_runs: Vec<_> = new.calls().runs.into_iter().map(|r| r.0).collect();
    assert_eq!(new_runs, ["r2", "r3"]);
    assert_eq!(old.calls().runs.len(), 1);

    release.send(()).unwrap();
    let rest: Vec<_> = in_flight.collect().await;
    assert!(
        matches!(rest.last(), Some(RuntimeEvent::Ended { end: TurnEnd::Done { .. } })),
        "the old run completes normally"
    );
    settle().await;
    assert_eq!((old.calls().disposed, new.calls().disposed), (1, 0));
    assert_eq!(registry.runtime_count(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_retired_runtime_without_runs_closes_at_once_and_a_failed_factory_keeps_the_old() {
    let registry = LocalRuntimeRegistry::with_config(config());
    let (old, new) = (FakeRuntime::new(), FakeRuntime::new());
    let _keep = acquire(&registry, "v1", &space("a"), &old).await;
    let failed = registry
        .acquire(RuntimeSlot::of(FAKE_FAMILY), RuntimeKey::new("v2"), space("a"), || {
            Err(RuntimeError::Start(Cause::new(std::io::Error::other("no binary"))))
        })
        .await;
    assert!(matches!(failed, Err(RuntimeError::Start(_))));
    settle().await;
    assert_eq!((old.calls().disposed, registry.runtime_count()), (0, 1));
    let _new = acquire(&registry, "v2", &space("a"), &new).await;
    settle().await;
    assert_eq!((old.calls().disposed, registry.runtime_count()), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn the_sweeper_frees_idle_instances_but_never_one_with_a_run() {
    let registry = LocalRuntimeRegistry::with_config(RegistryConfig {
        instance_idle_after: Duration::from_secs(60),
        ..config()
    });
    let fake = FakeRuntime::new();
    let (s1, s2) = (space("one"), space("two"));
    let (f1, f2) = (
        acquire(&registry, "k", &s1, &fake).await,
        acquire(&registry, "k", &s2, &fake).await,
    );
    collect(&f1, request("r1", &s1)).await;
    let release = fake.hold("r2");
    let mut busy = f2.run(request("r2", &s2), CancellationToken::new());
    busy.next().await;
    advance(Duration::from_secs(59)).await;
    settle().await;
    assert!(fake.calls().disposed_instances.is_empty(), "not idle long enough yet");
    advance(Duration::from_secs(120)).await;
    settle().await;
    assert_eq!(
        fake.calls().disposed_instances,
        std::slice::from_ref(&s1.cache_identity)
    );

    release.send(()).unwrap();
    busy.collect::<Vec<_>>().await;
    advance(Duration::from_secs(70)).await;
    settle().await;
    assert_eq!(
        fake.calls().disposed_instances,
        [s1.cache_identity.clone(), s2.cache_identity.clone()]
    );
    assert_eq!(fake.calls().disposed, 0, "instances go, the runtime stays");

    // An instance comes back lazily on next use.
    collect(&f1, request("r3", &s1)).await;
    assert_eq!(
        registry.status()[0].warm_instances,
        std::slice::from_ref(&s1.cache_identity)
    );
}

#[tokio::test(start_paused = true)]
async fn beyond_the_warm_bound_the_least_recently_used_idle_instances_go() {
    let registry = LocalRuntimeRegistry::with_config(RegistryConfig {
        max_warm_instances: 2,
        ..config()
    });
    let fake = FakeRuntime::new();
    let spaces: Vec<_> = (0..4).map(|i| space(&format!("p{i}"))).collect();
    let mut facades = Vec::new();
    for s in &spaces {
        facades.push(acquire(&registry, "k", s, &fake).await);
    }
    // p0 is the oldest but busy: it must survive; p1 is the oldest idle one.
    let release = fake.hold("r0");
    let mut busy = facades[0].run(request("r0", &spaces[0]), CancellationToken::new());
    busy.next().await;
    for i in 1..4 {
        advance(Duration::from_secs(1)).await;
        collect(&facades[i], request(&format!("r{i}"), &spaces[i])).await;
        settle().await;
    }
    // Three warm after p2 (p0 busy, p1, p2) → p1 went; after p3 → p2 went.
    assert_eq!(
        fake.calls().disposed_instances,
        [spaces[1].cache_identity.clone(), spaces[2].cache_identity.clone()]
    );
    let warm = &registry.status()[0].warm_instances;
    assert_eq!(
        warm,
        &[spaces[3].cache_identity.clone(), spaces[0].cache_identity.clone()]
    );
    release.send(()).unwrap();
    busy.collect::<Vec<_>>().await;
}

#[tokio::test(start_paused = true)]
async fn a_facade_refuses_a_request_for_another_space() {
    let registry = LocalRuntimeRegistry::with_config(config());
    let fake = FakeRuntime::new();
    let facade = acquire(&registry, "k", &space("mine"), &fake).await;
    let events = collect(&facade, request("r1", &space("theirs"))).await;
    match events.as_slice() {
        [RuntimeEvent::Ended { end: TurnEnd::Failed(TurnFailure { message, .. }) }] => {
            assert!(
                message.contains("/projects/theirs") && message.contains("opened for /projects/mine"),
                "{message}"
            )
        }
        other => panic!("{other:?}"),
    }
    let compact = facade
        .compact_conversation(
            CompactRequest {
                request_id: "c".into(),
                conversation_id: "x".into(),
                profile_id: None,
                space: space("theirs"),
                native_session: None,
            },
            CancellationToken::new(),
        )
        .await;
    assert!(matches!(compact, Err(RuntimeError::WrongSpace { .. })));
    assert!(fake.calls().runs.is_empty() && fake.calls().compactions.is_empty());
    assert_eq!(facade.active_runs(), 0);
}

#[tokio::test(start_paused = true)]
async fn active_runs_drop_when_a_stream_ends_or_is_dropped_early() {
    let registry = LocalRuntimeRegistry::with_config(config());
    let fake = FakeRuntime::new();
    let s = space("a");
    let facade = acquire(&registry, "k", &s, &fake).await;
    let _held = fake.hold("early");
    let mut stream = facade.run(request("early", &s), CancellationToken::new());
    stream.next().await;
    assert_eq!((facade.active_runs(), registry.status()[0].active_runs), (1, 1));
    drop(stream);
    assert_eq!((facade.active_runs(), registry.status()[0].active_runs), (0, 0));

    // Counted down at the terminal event, even if the caller keeps the stream.
    let mut stream = facade.run(request("full", &s), CancellationToken::new());
    while let Some(event) = stream.next().await {
        if event.is_terminal() {
            break;
        }
    }
    assert_eq!(facade.active_runs(), 0);
    drop(stream);

    // A compaction counts while it runs and not after.
    let outcome = facade
        .compact_conversation(
            CompactRequest {
                request_id: "c".into(),
                conversation_id: "x".into(),
                profile_id: None,
                space: s.clone(),
                native_session: None,
            },
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(outcome.compacted);
    assert_eq!((facade.active_runs(), registry.status()[0].active_runs), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn disposing_a_facade_gives_back_only_its_lease() {
    let registry = LocalRuntimeRegistry::with_config(config());
    let fake = FakeRuntime::new();
    let (a, b) = (
        acquire(&registry, "k", &space("a"), &fake).await,
        acquire(&registry, "k", &space("b"), &fake).await,
    );
    a.dispose().await;
    a.dispose().await;
    settle().await;
    assert_eq!(a.owner_id(), None);
    assert_eq!(registry.status()[0].facades, 1);
    let events = collect(&a, request("r", &space("a"))).await;
    assert!(matches!(events.as_slice(), [RuntimeEvent::Ended { end: TurnEnd::Failed(TurnFailure { message, .. }) }] if message == "The runtime was stopped."));
    assert!(matches!(
        collect(&b, request("r2", &space("b"))).await.last(),
        Some(RuntimeEvent::Ended { end: TurnEnd::Done { .. } })
    ));
    drop(a);
    assert_eq!((registry.status()[0].facades, fake.calls().disposed), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn release_conversation_reaches_every_live_runtime() {
    let registry = LocalRuntimeRegistry::with_config(config());
    let (x, y) = (FakeRuntime::new(), FakeRuntime::new());
    let _a = acquire(&registry, "k", &space("a"), &x).await;
    let y2 = y.clone();
    let _b = registry
        .acquire(RuntimeSlot::of("other"), RuntimeKey::new("k"), space("a"), move || {
            Ok(y2 as Arc<dyn ProcessRuntime>)
        })
        .await
        .unwrap();
    registry.release_conversation("conv-1").await.unwrap();
    assert_eq!(
        (x.calls().released, y.calls().released),
        (vec!["conv-1".to_owned()], vec!["conv-1".to_owned()])
    );
}

#[tokio::test(start_paused = true)]
async fn dispose_closes_every_runtime_and_stops_the_sweeper() {
    let registry = LocalRuntimeRegistry::with_config(RegistryConfig {
        instance_idle_after: Duration::from_secs(1),
        ..config()
    });
    let (x, y) = (FakeRuntime::new(), FakeRuntime::new());
    let s = space("a");
    let a = acquire(&registry, "k", &s, &x).await;
    let y2 = y.clone();
    let _b = registry
        .acquire(RuntimeSlot::of("other"), RuntimeKey::new("k"), s.clone(), move || {
            Ok(y2 as Arc<dyn ProcessRuntime>)
        })
        .await
        .unwrap();
    collect(&a, request("r1", &s)).await;
    registry.dispose().await;
    assert_eq!(
        (x.calls().disposed, y.calls().disposed, registry.runtime_count()),
        (1, 1, 0)
    );
    advance(Duration::from_secs(3600)).await;
    settle().await;
    assert!(x.calls().disposed_instances.is_empty(), "no sweep after dispose");
    assert_eq!(x.calls().disposed, 1, "no second close from an idle timer");
    let refused = registry
        .acquire(RuntimeSlot::of(FAKE_FAMILY), RuntimeKey::new("k"), s.clone(), || unreachable!())
        .await;
    assert!(matches!(refused, Err(RuntimeError::Disposed)));
    let events = collect(&a, request("r2", &s)).await;
    assert!(matches!(events.as_slice(), [RuntimeEvent::Ended { end: TurnEnd::Failed(_) }]));
    registry.dispose().await;
}

const MIB: u64 = 1024 * 1024;

#[tokio::test(start_paused = true)]
async fn an_idle_runtime_past_the_memory_bound_is_recycled_but_never_under_a_run() {
    let policy = RecyclePolicy { above_bytes: 500 * MIB, above_bytes_after_spaces: 1, ..RecyclePolicy::NEVER };
    let registry = LocalRuntimeRegistry::with_config(RegistryConfig { recycle: policy, ..config() });
    let fake = FakeRuntime::new();
    fake.set_memory(900 * MIB, 300 * MIB);
    let s = space("one");
    let facade = acquire(&registry, "k", &s, &fake).await;
    let release = fake.hold("r1");
    let mut held = facade.run(request("r1", &s), CancellationToken::new());
    held.next().await;
    registry.sweep_instances().await;
    settle().await;
    assert_eq!(fake.calls().recycles, 0, "a run is in flight");
    let report = registry.memory_report();
    assert_eq!(report.samples.iter().map(|m| m.rss_bytes / MIB).collect::<Vec<_>>(), [900], "the sweep read the memory");
    // When the run ends the runtime holds less again, but it has shown what its work takes.
    fake.set_memory(450 * MIB, 300 * MIB);

    release.send(()).unwrap();
    held.collect::<Vec<_>>().await;
    settle().await;
    assert_eq!(fake.calls().recycles, 1, "recycled as soon as the run ended");
    let report = registry.memory_report();
    assert_eq!(report.recycles.len(), 1);
    assert_eq!((report.recycles[0].reason, report.recycles[0].rss_bytes), (RecycleReason::Memory, Some(450 * MIB)));
    assert_eq!(report.samples.last().map(|m| m.rss_bytes), Some(300 * MIB), "the fresh process is read at once");
    assert!(registry.status()[0].warm_instances.is_empty(), "the fresh process has no instances");

    // The same facade keeps working; the fresh process is within the bound, so it stays.
    let events = collect(&facade, request("r2", &s)).await;
    assert!(matches!(events.last(), Some(RuntimeEvent::Ended { end: TurnEnd::Done { .. } })), "{events:?}");
    registry.sweep_instances().await;
    settle().await;
    assert_eq!((fake.calls().recycles, fake.calls().disposed), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn past_the_bound_a_runtime_serving_only_its_first_spaces_stays_until_another_is_opened() {
    let policy = RecyclePolicy { above_bytes: 500 * MIB, above_bytes_after_spaces: 3, ceiling_bytes: 2000 * MIB, ..RecyclePolicy::NEVER };
    let registry = LocalRuntimeRegistry::with_config(RegistryConfig { recycle: policy, ..config() });
    let fake = FakeRuntime::new();
    fake.set_memory(600 * MIB, 100 * MIB);
    let spaces: Vec<_> = (0..3).map(|i| space(&format!("p{i}"))).collect();
    let facades = [acquire(&registry, "k", &spaces[0], &fake).await, acquire(&registry, "k", &spaces[1], &fake).await];
    for round in 0..3 {
        for (facade, s) in facades.iter().zip(&spaces) {
            collect(facade, request(&format!("r{round}"), s)).await;
            settle().await;
        }
    }
    // Replacing it now would only restart it after every turn: these two would fill a fresh one again.
    assert_eq!(fake.calls().recycles, 0, "two spaces past the bound are its working set");
    collect(&acquire(&registry, "k", &spaces[2], &fake).await, request("r3", &spaces[2])).await;
    settle().await;
    assert_eq!(fake.calls().recycles, 1, "a third space: what the earlier ones left is given back");
    assert_eq!(registry.memory_report().recycles[0].reason, RecycleReason::Memory);

    // The fresh process counts from nothing: the first two spaces again do not replace it.
    fake.set_memory(600 * MIB, 100 * MIB);
    for (facade, s) in facades.iter().zip(&spaces) {
        collect(facade, request("r4", s)).await;
        settle().await;
    }
    assert_eq!(fake.calls().recycles, 1);
    // Past the ceiling it goes whatever it serves.
    fake.set_memory(2001 * MIB, 100 * MIB);
    collect(&facades[0], request("r5", &spaces[0])).await;
    settle().await;
    assert_eq!(fake.calls().recycles, 2, "past the ceiling");
}

#[tokio::test(start_paused = true)]
async fn a_runtime_that_freed_many_instances_is_recycled_and_counts_again_from_zero() {
    let policy = RecyclePolicy { after_disposals: 2, ..RecyclePolicy::NEVER };
    let registry = LocalRuntimeRegistry::with_config(RegistryConfig { recycle: policy, max_warm_instances: 1, ..config() });
    let fake = FakeRuntime::new();
    fake.set_memory(100 * MIB, 100 * MIB);
    let spaces: Vec<_> = (0..5).map(|i| space(&format!("p{i}"))).collect();
    for (i, s) in spaces.iter().take(2).enumerate() {
        collect(&acquire(&registry, "k", s, &fake).await, request(&format!("r{i}"), s)).await;
        settle().await;
    }
    assert_eq!((fake.calls().disposed_instances.len(), fake.calls().recycles), (1, 0), "one eviction is below the count");
    collect(&acquire(&registry, "k", &spaces[2], &fake).await, request("r2", &spaces[2])).await;
    settle().await;
    assert_eq!(fake.calls().recycles, 1);
    assert_eq!(registry.memory_report().recycles[0].reason, RecycleReason::Disposals);
    for (i, s) in spaces.iter().enumerate().skip(3) {
        collect(&acquire(&registry, "k", s, &fake).await, request(&format!("r{i}"), s)).await;
        settle().await;
    }
    assert_eq!(fake.calls().recycles, 1, "one eviction since the recycle");
}

#[tokio::test(start_paused = true)]
async fn a_runtime_within_its_bounds_is_never_recycled() {
    let registry = LocalRuntimeRegistry::with_config(RegistryConfig { recycle: RecyclePolicy::default(), ..config() });
    let fake = FakeRuntime::new();
    fake.set_memory(RecyclePolicy::default().above_bytes, 0);
    let s = space("one");
    let facade = acquire(&registry, "k", &s, &fake).await;
    for i in 0..5 {
        collect(&facade, request(&format!("r{i}"), &s)).await;
        advance(Duration::from_secs(10)).await;
        settle().await;
    }
    assert_eq!(fake.calls().recycles, 0);
    assert!(registry.memory_report().samples.len() >= 4, "each sweep reads the memory");
}
