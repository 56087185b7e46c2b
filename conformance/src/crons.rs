//! Crons: schedules in a time zone, end time, pause/resume, due firings.

use serde_json::json;
use service_store::containment::Enforced;
use service_store::{CronFilter, CronPatch, CronQuery, ErrorKind, NewCron};
use service_types::{Metadata, Timestamp};
use uuid::Uuid;

use crate::harness::{Factory, Harness, assert_kind, obj};

fn at(text: &str) -> Timestamp {
    Timestamp::parse(text).expect("valid timestamp")
}

fn cron(schedule: &str) -> NewCron {
    NewCron {
        cron_id: Uuid::now_v7(),
        assistant_id: Some(Uuid::now_v7()),
        thread_id: None,
        user_id: None,
        schedule: schedule.into(),
        timezone: None,
        end_time: None,
        payload: json!({"input": {}}),
        metadata: Metadata::new(),
        on_run_completed: None,
        enabled: true,
    }
}

/// next_run_date is the next occurrence after now, read in the cron's time zone.
pub async fn cron_next_run_date_is_read_in_its_timezone(factory: Factory) {
    let h = Harness::new(&factory).await;
    // The clock starts at 2025-01-15T12:00:00Z, 07:00 in New York.
    let utc = h
        .store
        .crons()
        .create(cron("0 9 * * *"))
        .await
        .expect("create");
    assert_eq!(utc.next_run_date, Some(at("2025-01-16T09:00:00Z")));
    let zoned = NewCron {
        timezone: Some("America/New_York".into()),
        ..cron("0 9 * * *")
    };
    let zoned = h.store.crons().create(zoned).await.expect("create");
    assert_eq!(zoned.next_run_date, Some(at("2025-01-15T14:00:00Z")));
}

/// No firing is scheduled past end_time.
pub async fn cron_end_time_stops_firings(factory: Factory) {
    let h = Harness::new(&factory).await;
    let ending = NewCron {
        end_time: Some(at("2025-01-15T12:30:00Z")),
        ..cron("0 * * * *")
    };
    let created = h.store.crons().create(ending).await.expect("create");
    assert_eq!(
        created.next_run_date, None,
        "next hour is past end_time: no upcoming run"
    );
    let patch = CronPatch {
        end_time: Some(None),
        ..Default::default()
    };
    let updated = h
        .store
        .crons()
        .update(created.cron_id, patch)
        .await
        .expect("update");
    assert_eq!(updated.next_run_date, Some(at("2025-01-15T13:00:00Z")));
}

/// Bad expressions, sub-minute (6-field) schedules and unknown zones are invalid.
pub async fn cron_invalid_schedule_or_timezone_is_invalid(factory: Factory) {
    let h = Harness::new(&factory).await;
    for schedule in ["not a cron", "* * * * * *", "61 * * * *", "* * *"] {
        let error = h
            .store
            .crons()
            .create(cron(schedule))
            .await
            .expect_err("invalid schedule");
        assert_eq!(error.kind, ErrorKind::Invalid);
        assert!(
            error
                .message
                .starts_with(&format!("Invalid cron schedule: '{schedule}'")),
            "{}",
            error.message
        );
    }
    let zoned = NewCron {
        timezone: Some("Mars/Olympus".into()),
        ..cron("0 9 * * *")
    };
    let error = h
        .store
        .crons()
        .create(zoned)
        .await
        .expect_err("invalid zone");
    assert_eq!(error.kind, ErrorKind::Invalid);
    assert_eq!(
        error.message,
        "Invalid timezone: 'Mars/Olympus'. Use IANA timezone format (e.g. 'America/New_York')."
    );
}

/// A due cron is returned once per occurrence: advancing claims the firing, a second
/// advance for the same occurrence gets nothing.
pub async fn cron_due_and_advance_fire_each_occurrence_once(factory: Factory) {
    let h = Harness::new(&factory).await;
    let id = h
        .store
        .crons()
        .create(cron("*/10 * * * *"))
        .await
        .expect("create")
        .cron_id;
    assert!(
        h.store
            .crons()
            .due(h.now(), 10)
            .await
            .expect("due")
            .is_empty()
    );
    h.advance_minutes(10.0);
    let due = h.store.crons().due(h.now(), 10).await.expect("due");
    assert_eq!(due.iter().map(|c| c.cron_id).collect::<Vec<_>>(), vec![id]);
    let fired_for = due[0].next_run_date.expect("next run");
    let advanced = h
        .store
        .crons()
        .advance(id, fired_for)
        .await
        .expect("advance")
        .expect("won the firing");
    assert_eq!(advanced.next_run_date, Some(at("2025-01-15T12:20:00Z")));
    assert_eq!(
        h.store
            .crons()
            .advance(id, fired_for)
            .await
            .expect("advance"),
        None
    );
    assert!(
        h.store
            .crons()
            .due(h.now(), 10)
            .await
            .expect("due")
            .is_empty()
    );
}

/// A disabled cron is not due; resuming after a long pause schedules from now.
pub async fn cron_disable_pauses_and_resume_skips_missed_firings(factory: Factory) {
    let h = Harness::new(&factory).await;
    let id = h
        .store
        .crons()
        .create(cron("0 * * * *"))
        .await
        .expect("create")
        .cron_id;
    let paused = h.store.crons().set_enabled(id, false).await.expect("pause");
    assert!(!paused.enabled);
    h.advance_minutes(185.0);
    assert!(
        h.store
            .crons()
            .due(h.now(), 10)
            .await
            .expect("due")
            .is_empty()
    );
    let resumed = h.store.crons().set_enabled(id, true).await.expect("resume");
    assert!(resumed.enabled);
    assert_eq!(resumed.next_run_date, Some(at("2025-01-15T16:00:00Z")));
}

/// Update recomputes next_run_date when the schedule changes and merges metadata.
pub async fn cron_update_recomputes_schedule_and_merges_metadata(factory: Factory) {
    let h = Harness::new(&factory).await;
    let created = NewCron {
        metadata: obj(json!({"a": 1})),
        ..cron("0 0 * * *")
    };
    let id = h
        .store
        .crons()
        .create(created)
        .await
        .expect("create")
        .cron_id;
    h.advance_minutes(1.0);
    let patch = CronPatch {
        schedule: Some("30 12 * * *".into()),
        metadata: Some(obj(json!({"b": 2}))),
        payload: Some(json!({"input": {"x": 1}})),
        ..Default::default()
    };
    let updated = h.store.crons().update(id, patch).await.expect("update");
    assert_eq!(updated.next_run_date, Some(at("2025-01-15T12:30:00Z")));
    assert_eq!(updated.metadata, obj(json!({"a": 1, "b": 2})));
    assert_eq!(
        (updated.payload.clone(), updated.updated_at),
        (json!({"input": {"x": 1}}), h.now())
    );
    let bad = CronPatch {
        schedule: Some("nope".into()),
        ..Default::default()
    };
    assert_kind(h.store.crons().update(id, bad).await, ErrorKind::Invalid);
    assert_kind(
        h.store
            .crons()
            .update(Uuid::now_v7(), CronPatch::default())
            .await,
        ErrorKind::NotFound,
    );
}

/// Search and count filter by assistant, thread, enabled and metadata.
pub async fn cron_search_and_count_filter(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread().await.thread_id;
    let assistant = Uuid::now_v7();
    let mine = NewCron {
        assistant_id: Some(assistant),
        metadata: obj(json!({"k": "v"})),
        ..cron("0 * * * *")
    };
    let mine = h.store.crons().create(mine).await.expect("create").cron_id;
    let on_thread = NewCron {
        thread_id: Some(thread),
        enabled: false,
        ..cron("0 * * * *")
    };
    let on_thread = h
        .store
        .crons()
        .create(on_thread)
        .await
        .expect("create")
        .cron_id;
    h.store
        .crons()
        .create(cron("0 * * * *"))
        .await
        .expect("create");
    let cases = [
        (
            CronFilter {
                assistant_id: Some(assistant),
                ..Default::default()
            },
            vec![mine],
        ),
        (
            CronFilter {
                thread_id: Some(thread),
                ..Default::default()
            },
            vec![on_thread],
        ),
        (
            CronFilter {
                enabled: Some(false),
                ..Default::default()
            },
            vec![on_thread],
        ),
        (
            CronFilter {
                metadata: Some(obj(json!({"k": "v"}))),
                ..Default::default()
            },
            vec![mine],
        ),
    ];
    for (filter, expected) in cases {
        let query = CronQuery {
            filter: filter.clone(),
            ..Default::default()
        };
        let found: Vec<Uuid> = h
            .store
            .crons()
            .search(&query)
            .await
            .expect("search")
            .iter()
            .map(|c| c.cron_id)
            .collect();
        assert_eq!(found, expected, "{filter:?}");
        assert_eq!(
            h.store.crons().count(&filter).await.expect("count"),
            expected.len() as u64
        );
    }
    assert_eq!(
        h.store
            .crons()
            .count(&CronFilter::default())
            .await
            .expect("count"),
        3
    );
}

/// A thread cron needs an existing thread; delete removes a cron, unknown is NotFound.
pub async fn cron_thread_must_exist_and_delete_removes(factory: Factory) {
    let h = Harness::new(&factory).await;
    let orphan = NewCron {
        thread_id: Some(Uuid::now_v7()),
        ..cron("0 * * * *")
    };
    assert_kind(h.store.crons().create(orphan).await, ErrorKind::NotFound);
    let id = h
        .store
        .crons()
        .create(cron("0 * * * *"))
        .await
        .expect("create")
        .cron_id;
    h.store.crons().delete(id).await.expect("delete");
    assert_eq!(h.store.crons().get(id).await.expect("get"), None);
    assert_kind(h.store.crons().delete(id).await, ErrorKind::NotFound);
}

/// An enforced filter narrows cron search and count; a key collision matches nothing.
pub async fn cron_search_and_count_within_enforced_metadata(factory: Factory) {
    let h = Harness::new(&factory).await;
    let mine = NewCron {
        metadata: obj(json!({"owner": "me", "k": 1})),
        ..cron("0 * * * *")
    };
    let mine = h.store.crons().create(mine).await.expect("create").cron_id;
    let yours = NewCron {
        metadata: obj(json!({"owner": "you", "k": 1})),
        ..cron("0 * * * *")
    };
    h.store.crons().create(yours).await.expect("create");
    let filter = CronFilter {
        metadata: Some(obj(json!({"k": 1}))),
        enforced: Some(Enforced::metadata(obj(json!({"owner": "me"})))),
        ..Default::default()
    };
    let query = CronQuery {
        filter: filter.clone(),
        ..Default::default()
    };
    let found: Vec<Uuid> = h
        .store
        .crons()
        .search(&query)
        .await
        .expect("search")
        .iter()
        .map(|c| c.cron_id)
        .collect();
    assert_eq!(found, vec![mine]);
    assert_eq!(h.store.crons().count(&filter).await.expect("count"), 1);
    let colliding = CronFilter {
        metadata: Some(obj(json!({"owner": "me"}))),
        enforced: Some(Enforced::metadata(obj(json!({"owner": "me"})))),
        ..Default::default()
    };
    assert_eq!(h.store.crons().count(&colliding).await.expect("count"), 0);
}
