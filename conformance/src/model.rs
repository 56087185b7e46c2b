//! Model tests: random operation sequences applied to the driver and to a tiny
//! reference model must give identical results.

use service_store::containment::Enforced;
use service_store::ordering::SortField;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::json;
use service_store::ordering::sort_rows;
use service_store::page::paginate;
use service_store::{
    ErrorKind, ItemSearch, NamespaceQuery, NewThread, PageLimits, PutItem, StoreFilter,
    StoreResult, ThreadFilter, ThreadPatch, ThreadQuery, ThreadSortBy, TtlChange, compare_items,
};
use service_types::{
    IfExists, Item, Metadata, SortOrder, Thread, ThreadStatus, ThreadTtl, Timestamp, TtlSetting,
};
use uuid::Uuid;

use crate::harness::{Factory, Harness, StoreFactory, obj};

const NAMESPACES: [&[&str]; 5] = [&["a"], &["a", "b"], &["a", "c"], &["b"], &["a", "b", "c"]];
const KEYS: [&str; 2] = ["k0", "k1"];
const CASES: u32 = 128;

/// Runs `check` on `CASES` random operation sequences, each against a fresh store.
fn run_model<S, F, Fut>(factory: impl StoreFactory, strategy: S, check: F)
where
    S: Strategy,
    S::Value: Clone,
    F: Fn(Factory, S::Value) -> Fut,
    Fut: Future<Output = Result<(), TestCaseError>>,
{
    let factory: Factory = Arc::new(factory);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let config = Config {
        cases: CASES,
        failure_persistence: None,
        ..Config::default()
    };
    let result = TestRunner::new(config).run(&strategy, |ops| {
        runtime.block_on(check(factory.clone(), ops))
    });
    if let Err(failure) = result {
        panic!("driver and model disagree: {failure}");
    }
}

fn ns(index: usize) -> Vec<String> {
    NAMESPACES[index]
        .iter()
        .map(|segment| (*segment).to_owned())
        .collect()
}

/// Error kinds only: messages may differ between drivers.
fn kinds<T>(result: StoreResult<T>) -> Result<T, ErrorKind> {
    result.map_err(|error| error.kind)
}

// ---------------------------------------------------------------------------------
// Items

#[derive(Clone, Debug)]
enum ItemOp {
    Put {
        ns: usize,
        key: usize,
        n: i64,
        ttl: Option<u8>,
    },
    Get {
        ns: usize,
        key: usize,
        refresh: bool,
    },
    Delete {
        ns: usize,
        key: usize,
    },
    Search {
        prefix: Option<usize>,
        /// An operator and a number: `$eq`, `$in` (the number and the next), `$ne` or
        /// `$gte` on `n`.
        condition: Option<(&'static str, i64)>,
        limit: usize,
        offset: usize,
    },
    Namespaces {
        prefix: Option<usize>,
        suffix: Option<&'static str>,
        max_depth: Option<usize>,
        limit: usize,
    },
    Advance {
        minutes: u8,
    },
    Sweep,
}

fn item_op() -> impl Strategy<Value = ItemOp> {
    let ns = 0..NAMESPACES.len();
    let key = 0..KEYS.len();
    prop_oneof![
        4 => (ns.clone(), key.clone(), 0..5i64, proptest::option::of(1..4u8))
            .prop_map(|(ns, key, n, ttl)| ItemOp::Put { ns, key, n, ttl }),
        4 => (ns.clone(), key.clone(), any::<bool>()).prop_map(|(ns, key, refresh)| ItemOp::Get { ns, key, refresh }),
        1 => (ns.clone(), key).prop_map(|(ns, key)| ItemOp::Delete { ns, key }),
        2 => (proptest::option::of(ns.clone()),
              proptest::option::of((prop_oneof![Just("$eq"), Just("$in"), Just("$ne"), Just("$gte")], 0..5i64)),
              1..6usize, 0..3usize)
            .prop_map(|(prefix, condition, limit, offset)| ItemOp::Search { prefix, condition, limit, offset }),
        2 => (proptest::option::of(ns), proptest::option::of(prop_oneof![Just("b"), Just("c"), Just("*")]),
              proptest::option::of(1..3usize), 1..6usize)
            .prop_map(|(prefix, suffix, max_depth, limit)| ItemOp::Namespaces { prefix, suffix, max_depth, limit }),
        2 => (0..3u8).prop_map(|minutes| ItemOp::Advance { minutes }),
        1 => Just(ItemOp::Sweep),
    ]
}

#[derive(Clone, Debug)]
struct ModelItem {
    item: Item,
    ttl: Option<f64>,
    expires_at: Option<Timestamp>,
}

impl ModelItem {
    fn live(&self, now: Timestamp) -> bool {
        self.expires_at.is_none_or(|at| at > now)
    }
}

/// Store items: put, get (with refresh), delete, search, namespace listing, ttl and
/// sweep agree with a map-based model.
pub fn items_match_reference_model(factory: impl StoreFactory) {
    run_model(
        factory,
        proptest::collection::vec(item_op(), 1..60),
        check_items,
    );
}

async fn check_items(factory: Factory, ops: Vec<ItemOp>) -> Result<(), TestCaseError> {
    let h = Harness::new(&factory).await;
    let mut model: BTreeMap<(Vec<String>, String), ModelItem> = BTreeMap::new();
    for op in ops {
        let now = h.now();
        match op {
            ItemOp::Put {
                ns: n,
                key,
                n: value,
                ttl,
            } => {
                let (namespace, key) = (ns(n), KEYS[key].to_owned());
                let ttl = ttl.map(f64::from);
                let put = PutItem {
                    namespace: namespace.clone(),
                    key: key.clone(),
                    value: obj(json!({"n": value})),
                    ttl_minutes: ttl,
                    vectors: Vec::new(),
                };
                h.store
                    .items()
                    .put(put)
                    .await
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let slot = (namespace.clone(), key.clone());
                let created_at = model
                    .get(&slot)
                    .filter(|m| m.live(now))
                    .map_or(now, |m| m.item.created_at);
                let item = Item {
                    namespace,
                    key,
                    value: obj(json!({"n": value})),
                    created_at,
                    updated_at: now,
                };
                model.insert(
                    slot,
                    ModelItem {
                        item,
                        ttl,
                        expires_at: ttl.map(|t| now.plus_minutes(t)),
                    },
                );
            }
            ItemOp::Get {
                ns: n,
                key,
                refresh,
            } => {
                let got = h
                    .store
                    .items()
                    .get(&ns(n), KEYS[key], refresh)
                    .await
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let expected = match model.get_mut(&(ns(n), KEYS[key].to_owned())) {
                    Some(m) if m.live(now) => {
                        if refresh && let Some(ttl) = m.ttl {
                            m.expires_at = Some(now.plus_minutes(ttl));
                        }
                        Some(m.item.clone())
                    }
                    _ => None,
                };
                prop_assert_eq!(got, expected);
            }
            ItemOp::Delete { ns: n, key } => {
                h.store
                    .items()
                    .delete(&ns(n), KEYS[key])
                    .await
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                model.remove(&(ns(n), KEYS[key].to_owned()));
            }
            ItemOp::Search {
                prefix,
                condition,
                limit,
                offset,
            } => {
                let filter = condition.map_or_else(StoreFilter::default, |(op, n)| {
                    let operand = if op == "$in" {
                        json!([n, n + 1])
                    } else {
                        json!(n)
                    };
                    StoreFilter::parse(&json!({"n": {op: operand}})).expect("valid filter")
                });
                let prefix = prefix.map(ns).unwrap_or_default();
                let search = ItemSearch {
                    namespace_prefix: prefix.clone(),
                    filter: filter.clone(),
                    limit: Some(limit),
                    offset,
                    ..ItemSearch::default()
                };
                let got: Vec<Item> = h
                    .store
                    .items()
                    .search(&search)
                    .await
                    .map_err(|e| TestCaseError::fail(e.to_string()))?
                    .into_iter()
                    .map(|hit| hit.item)
                    .collect();
                let mut expected: Vec<Item> = model
                    .values()
                    .filter(|m| {
                        m.live(now)
                            && m.item.namespace.starts_with(&prefix)
                            && filter.matches(&m.item.value)
                    })
                    .map(|m| m.item.clone())
                    .collect();
                expected.sort_by(compare_items);
                prop_assert_eq!(got, paginate(expected, offset, Some(limit)));
            }
            ItemOp::Namespaces {
                prefix,
                suffix,
                max_depth,
                limit,
            } => {
                let query = NamespaceQuery {
                    prefix: prefix.map(ns),
                    suffix: suffix.map(|s| vec![s.to_owned()]),
                    max_depth,
                    limit: Some(limit),
                    offset: 0,
                };
                let got = h
                    .store
                    .items()
                    .list_namespaces(&query)
                    .await
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let live: Vec<&[String]> = model
                    .iter()
                    .filter(|(_, m)| m.live(now))
                    .map(|((namespace, _), _)| namespace.as_slice())
                    .collect();
                let expected = query
                    .collect(live, PageLimits::default())
                    .expect("valid query");
                prop_assert_eq!(got, expected);
            }
            ItemOp::Advance { minutes } => h.advance_minutes(f64::from(minutes)),
            ItemOp::Sweep => {
                let swept = h
                    .store
                    .items()
                    .sweep_expired(now)
                    .await
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let before = model.len();
                model.retain(|_, m| m.live(now));
                prop_assert_eq!(swept, (before - model.len()) as u64);
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------
// Threads

const THREADS: usize = 4;

#[derive(Clone, Debug)]
enum ThreadOp {
    Create {
        id: usize,
        owner: Option<&'static str>,
        ttl: Option<u8>,
    },
    Get {
        id: usize,
    },
    Patch {
        id: usize,
        tag: Option<u8>,
        ttl: Option<Option<u8>>,
    },
    SetStatus {
        id: usize,
        status: ThreadStatus,
    },
    Delete {
        id: usize,
    },
    Search {
        owner: Option<&'static str>,
        enforced: Option<&'static str>,
        status: Option<ThreadStatus>,
        sort_by: ThreadSortBy,
        order: SortOrder,
        limit: usize,
        offset: usize,
    },
    Count {
        owner: Option<&'static str>,
        status: Option<ThreadStatus>,
    },
    Advance {
        minutes: u8,
    },
}

fn thread_op() -> impl Strategy<Value = ThreadOp> {
    let id = 0..THREADS;
    let owner = proptest::option::of(prop_oneof![Just("a"), Just("b")]);
    let status = prop_oneof![
        Just(ThreadStatus::Idle),
        Just(ThreadStatus::Busy),
        Just(ThreadStatus::Error)
    ];
    let sort_by = prop_oneof![
        Just(ThreadSortBy::ThreadId),
        Just(ThreadSortBy::Status),
        Just(ThreadSortBy::CreatedAt),
        Just(ThreadSortBy::UpdatedAt),
    ];
    let order = prop_oneof![Just(SortOrder::Asc), Just(SortOrder::Desc)];
    prop_oneof![
        3 => (id.clone(), owner.clone(), proptest::option::of(1..4u8)).prop_map(|(id, owner, ttl)| ThreadOp::Create { id, owner, ttl }),
        2 => id.clone().prop_map(|id| ThreadOp::Get { id }),
        2 => (id.clone(), proptest::option::of(0..3u8), proptest::option::of(proptest::option::of(1..4u8)))
            .prop_map(|(id, tag, ttl)| ThreadOp::Patch { id, tag, ttl }),
        2 => (id.clone(), status.clone()).prop_map(|(id, status)| ThreadOp::SetStatus { id, status }),
        1 => id.prop_map(|id| ThreadOp::Delete { id }),
        3 => (owner.clone(), owner.clone(), proptest::option::of(status.clone()), sort_by, order, 1..5usize, 0..3usize)
            .prop_map(|(owner, enforced, status, sort_by, order, limit, offset)| ThreadOp::Search { owner, enforced, status, sort_by, order, limit, offset }),
        1 => (owner, proptest::option::of(status)).prop_map(|(owner, status)| ThreadOp::Count { owner, status }),
        1 => (0..3u8).prop_map(|minutes| ThreadOp::Advance { minutes }),
    ]
}

fn thread_id(index: usize) -> Uuid {
    Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0000 + index as u128)
}

fn owner_metadata(owner: Option<&str>) -> Option<Metadata> {
    owner.map(|owner| obj(json!({"owner": owner})))
}

fn ttl_of(minutes: u8, now: Timestamp) -> ThreadTtl {
    let setting = TtlSetting::Minutes(f64::from(minutes));
    ThreadTtl {
        strategy: setting.strategy(),
        ttl_minutes: setting.minutes(),
        expires_at: now.plus_minutes(setting.minutes()),
    }
}

/// Threads: create, get, patch (metadata, ttl), status, delete, search with enforced
/// metadata and sorting, and count agree with a map-based model.
pub fn threads_match_reference_model(factory: impl StoreFactory) {
    run_model(
        factory,
        proptest::collection::vec(thread_op(), 1..60),
        check_threads,
    );
}

async fn check_threads(factory: Factory, ops: Vec<ThreadOp>) -> Result<(), TestCaseError> {
    let h = Harness::new(&factory).await;
    let threads = h.store.threads();
    let mut model: BTreeMap<Uuid, Thread> = BTreeMap::new();
    for op in ops {
        let now = h.now();
        match op {
            ThreadOp::Create { id, owner, ttl } => {
                let new = NewThread {
                    thread_id: thread_id(id),
                    metadata: owner_metadata(owner).unwrap_or_default(),
                    status: ThreadStatus::Idle,
                    ttl: ttl.map(|m| TtlSetting::Minutes(f64::from(m))),
                };
                let got = kinds(threads.create(new.clone(), IfExists::Raise).await);
                let expected = if model.contains_key(&new.thread_id) {
                    Err(ErrorKind::Conflict)
                } else {
                    let thread = Thread {
                        thread_id: new.thread_id,
                        created_at: now,
                        updated_at: now,
                        state_updated_at: now,
                        metadata: new.metadata,
                        status: ThreadStatus::Idle,
                        config: json!({}),
                        values: None,
                        interrupts: Default::default(),
                        error: None,
                        ttl: ttl.map(|m| ttl_of(m, now)),
                    };
                    model.insert(thread.thread_id, thread.clone());
                    Ok(thread)
                };
                prop_assert_eq!(got, expected);
            }
            ThreadOp::Get { id } => {
                let got = kinds(threads.get(thread_id(id)).await);
                prop_assert_eq!(got, Ok(model.get(&thread_id(id)).cloned()));
            }
            ThreadOp::Patch { id, tag, ttl } => {
                let change = match ttl {
                    None => TtlChange::Keep,
                    Some(None) => TtlChange::Clear,
                    Some(Some(m)) => TtlChange::Set(TtlSetting::Minutes(f64::from(m))),
                };
                let metadata = tag.map(|tag| obj(json!({"tag": tag})));
                let got = kinds(
                    threads
                        .patch(
                            thread_id(id),
                            ThreadPatch {
                                metadata: metadata.clone(),
                                ttl: change,
                            },
                        )
                        .await,
                );
                let expected = match model.get_mut(&thread_id(id)) {
                    None => Err(ErrorKind::NotFound),
                    Some(thread) => {
                        thread.metadata.extend(metadata.unwrap_or_default());
                        match ttl {
                            None => {}
                            Some(None) => thread.ttl = None,
                            Some(Some(m)) => thread.ttl = Some(ttl_of(m, now)),
                        }
                        thread.updated_at = now;
                        Ok(thread.clone())
                    }
                };
                prop_assert_eq!(got, expected);
            }
            ThreadOp::SetStatus { id, status } => {
                let got = kinds(threads.set_status(thread_id(id), status).await);
                let expected = match model.get_mut(&thread_id(id)) {
                    None => Err(ErrorKind::NotFound),
                    Some(thread) => {
                        thread.status = status;
                        thread.updated_at = now;
                        Ok(())
                    }
                };
                prop_assert_eq!(got, expected);
                let stored = threads.get(thread_id(id)).await.expect("get");
                prop_assert_eq!(stored.as_ref(), model.get(&thread_id(id)));
            }
            ThreadOp::Delete { id } => {
                let got = kinds(threads.delete(thread_id(id)).await);
                let expected = model
                    .remove(&thread_id(id))
                    .map(|_| ())
                    .ok_or(ErrorKind::NotFound);
                prop_assert_eq!(got, expected);
            }
            ThreadOp::Search {
                owner,
                enforced,
                status,
                sort_by,
                order,
                limit,
                offset,
            } => {
                let filter = ThreadFilter {
                    metadata: owner_metadata(owner),
                    enforced: owner_metadata(enforced).map(Enforced::metadata),
                    status,
                    ..Default::default()
                };
                let query = ThreadQuery {
                    filter: filter.clone(),
                    sort_by,
                    sort_order: order,
                    limit: Some(limit),
                    offset,
                };
                let got = kinds(threads.search(&query).await);
                let matcher = filter.matcher();
                let mut expected: Vec<Thread> = model
                    .values()
                    .filter(|t| matcher.matches(t))
                    .cloned()
                    .collect();
                sort_rows(&mut expected, order, |t| (sort_by.key(t), t.thread_id));
                prop_assert_eq!(got, Ok(paginate(expected, offset, Some(limit))));
            }
            ThreadOp::Count { owner, status } => {
                let filter = ThreadFilter {
                    metadata: owner_metadata(owner),
                    status,
                    ..Default::default()
                };
                let got = kinds(threads.count(&filter).await);
                let matcher = filter.matcher();
                prop_assert_eq!(
                    got,
                    Ok(model.values().filter(|t| matcher.matches(t)).count() as u64)
                );
            }
            ThreadOp::Advance { minutes } => h.advance_minutes(f64::from(minutes)),
        }
    }
    Ok(())
}
