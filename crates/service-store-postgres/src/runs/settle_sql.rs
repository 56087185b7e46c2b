//! The settle statements' text: a settle (with or without the thread mirror and the
//! next run's claim) and the webhook delivery row it may insert in the same statement.
//!
//! A run named by its id is found with its status test wrapped in `IS TRUE` (the same
//! rows): a bare `status IN ('pending', 'running')` lets the planner read the run
//! through a partial index of active runs instead of the primary key, walking the
//! whole index for the id. It does so when its statistics were taken with few active
//! runs, and a plan kept from then walks every entry of a backlog queued since, at each
//! settle (docs/performance.md §14).

use service_types::DeliveryStatus;

use super::*;

/// Settles a run, mirrors it onto its thread and claims the next run, in one
/// statement and so one (synchronous) commit. `$1` is the run; `$2` to `$7` the
/// mirror (`MirrorParams`, `$6` now); `$8` the status it settles as, `$9` the status
/// when a cancel won, `$10` its error; `$11` the run to claim (or NULL) and `$12` the
/// instant it is claimed at. The thread's `runs_wait` and the claim's busy check read
/// the snapshot from before the settle: this run is still active there, so it is left
/// out of the first, and a next run of its own thread is not claimed.
///
/// `with_claim: false` leaves the claim out (and `$11`, `$12`): a statement whose
/// claim could be given a NULL run would be planned afresh at every execution, as
/// PostgreSQL's custom plan for a NULL folds the claim away and so always looks
/// cheaper than the generic plan, and planning the claim's checks costs more than
/// executing the whole settle.
///
/// `with_delivery`: the run's webhook delivery row is inserted by the same statement
/// ([`delivered_cte`] after the other parameters), and its id returned after
/// `others_wait`.
fn settle_and_mirror_text(with_claim: bool, with_delivery: bool) -> String {
    let (delivery, delivered) = if with_delivery {
        (
            delivered_cte(if with_claim { 13 } else { 11 }, "$6", "$8"),
            ", (SELECT delivery_id FROM delivered) AS delivery_id",
        )
    } else {
        (String::new(), "")
    };
    let (claim, claimed) = if with_claim {
        (
            CLAIM_CTE.as_str(),
            ", claimed.* FROM settled LEFT JOIN claimed ON true",
        )
    } else {
        ("", " FROM settled")
    };
    format!(
        "WITH settled AS (
             UPDATE runs SET
                 status = CASE WHEN cancel_requested THEN $9 ELSE $8 END,
                 error = CASE WHEN cancel_requested THEN NULL ELSE $10::jsonb END,
                 updated_at = $6
             WHERE run_id = $1 AND (status IN ('pending', 'running')) IS TRUE
             RETURNING {SETTLED_COLUMNS}),
         waiting AS (
             SELECT EXISTS (
                 SELECT 1 FROM runs, settled
                 WHERE runs.thread_id = settled.thread_id
                   AND runs.status IN ('pending', 'running')
                   AND runs.run_id <> $1) AS runs_wait),
         mirrored AS (
             UPDATE threads SET {MIRROR_SET}
             FROM waiting, settled
             WHERE threads.thread_id = settled.thread_id AND settled.status = $8
             RETURNING waiting.runs_wait){claim}{delivery}
         SELECT settled.*, (SELECT runs_wait FROM mirrored) AS others_wait{delivered}{claimed}"
    )
}

/// The next run's claim of [`settle_and_mirror_text`]: `$11` the run, `$12` now (its
/// busy check a probe by the thread, as [`CLAIM_SQL`]'s).
static CLAIM_CTE: LazyLock<String> = LazyLock::new(|| {
    format!(
        ",
         claimed AS (
             UPDATE runs SET status = 'running', updated_at = $12, started = true
             WHERE run_id = $11 AND (status = 'pending') IS TRUE AND available_at <= $12
               AND thread_id <> (SELECT thread_id FROM settled)
               AND NOT EXISTS (
                   SELECT 1 FROM runs busy
                   WHERE busy.thread_id = runs.thread_id AND busy.status = 'running'
                   OFFSET 0)
               AND NOT EXISTS (
                   SELECT 1 FROM thread_state_holds hold
                   WHERE hold.thread_id = runs.thread_id AND hold.held_until > $12)
             RETURNING {COLUMNS}, {NO_CHECKPOINT})"
    )
});

/// `, delivered AS (...)`: inserts the settled run's webhook delivery row when the run
/// had started, with [`DeliveryParams`] from `$first` on (pending, or already leased
/// for its inline first attempt); `now` and `status` are the placeholders of the
/// settle's instant and of the status it settles as.
fn delivered_cte(first: usize, now: &str, status: &str) -> String {
    let p = |offset: usize| format!("${}", first + offset);
    let (id, truncated, url, payload) = (p(0), p(1), p(2), p(3));
    let (if_settled, if_cancelled, run_metadata) = (p(4), p(5), p(6));
    let (status_as_inserted, attempt, next_attempt_at) = (p(7), p(8), p(9));
    format!(
        ",
         delivered AS (
             INSERT INTO webhook_deliveries ({DELIVERY_COLUMNS})
             SELECT {id}, settled.run_id, settled.thread_id, {status_as_inserted}::text,
                 {attempt}::integer, NULL, {next_attempt_at}::timestamptz,
                 {truncated}, true, {now}, {now}, {url},
                 jsonb_set({payload}::jsonb, '{{status}}', to_jsonb(
                     CASE WHEN settled.status = {status} THEN {if_settled}::text
                          ELSE {if_cancelled}::text END)),
                 NULL, {run_metadata}::jsonb
             FROM settled JOIN runs ON runs.run_id = settled.run_id
             WHERE runs.started
             RETURNING delivery_id)"
    )
}

/// A settle without the mirror (see [`RunsRepo::settle`]): `$1` the run, `$2` the
/// status it settles as, `$3` the status when a cancel won, `$4` its error, `$5` now;
/// `with_delivery`, the delivery row as [`delivered_cte`] from `$6`. The status a
/// cancel recorded meanwhile turns it into is chosen under the row lock.
fn settle_text(with_delivery: bool) -> String {
    let (delivery, delivered) = if with_delivery {
        (
            delivered_cte(6, "$5", "$2"),
            ", (SELECT delivery_id FROM delivered) AS delivery_id",
        )
    } else {
        (String::new(), "")
    };
    format!(
        "WITH settled AS (
             UPDATE runs SET
                 status = CASE WHEN cancel_requested THEN $3 ELSE $2 END,
                 error = CASE WHEN cancel_requested THEN NULL ELSE $4::jsonb END,
                 updated_at = $5
             WHERE run_id = $1 AND (status IN ('pending', 'running')) IS TRUE
             RETURNING {SETTLED_COLUMNS}){delivery}
         SELECT settled.*{delivered} FROM settled"
    )
}

pub(super) fn settle_sql(with_delivery: bool) -> &'static str {
    static PLAIN: LazyLock<String> = LazyLock::new(|| settle_text(false));
    static WITH_DELIVERY: LazyLock<String> = LazyLock::new(|| settle_text(true));
    if with_delivery {
        WITH_DELIVERY.as_str()
    } else {
        PLAIN.as_str()
    }
}

pub(crate) fn settle_and_mirror_sql(with_claim: bool, with_delivery: bool) -> &'static str {
    static TEXTS: LazyLock<[[String; 2]; 2]> = LazyLock::new(|| {
        [false, true].map(|with_claim| {
            [false, true].map(|with_delivery| settle_and_mirror_text(with_claim, with_delivery))
        })
    });
    &TEXTS[usize::from(with_claim)][usize::from(with_delivery)]
}

/// The parameters of [`delivered_cte`]: the new row's id, the request's truncation
/// flag, URL, payload (its `"status"` set in the statement to the first status, or to
/// the second when a cancel won), run metadata, and the row's state as a settle at
/// `now` inserts it (its status, attempt and next attempt, which is the lease's end
/// when it is leased).
pub(super) struct DeliveryParams {
    delivery_id: Uuid,
    truncated: bool,
    url: String,
    payload: Value,
    status: &'static str,
    status_if_cancelled: &'static str,
    run_metadata: Value,
    row_status: String,
    attempt: i32,
    next_attempt_at: chrono::DateTime<chrono::Utc>,
}

impl DeliveryParams {
    pub(super) fn new(
        settlement: &Settlement,
        webhook: &WebhookRequest,
        now: Timestamp,
    ) -> StoreResult<Self> {
        let interrupted = settlement.interrupted;
        // As `DeliveryRecord::at_settle` makes it (conformance compares the two).
        let (row_status, attempt, next_attempt_at) = match webhook.lease_end(now) {
            Some(lease_end) => (DeliveryStatus::Delivering, 1, lease_end),
            None => (DeliveryStatus::Pending, 0, now),
        };
        Ok(Self {
            delivery_id: Uuid::now_v7(),
            truncated: webhook.payload_truncated,
            url: webhook.url.clone(),
            payload: Value::Object(webhook.payload.clone()),
            status: webhook_status(final_status(settlement, false)?, interrupted),
            status_if_cancelled: webhook_status(final_status(settlement, true)?, interrupted),
            run_metadata: Value::Object(webhook.run_metadata.clone()),
            row_status: enum_text(&row_status)?,
            attempt,
            next_attempt_at: at(next_attempt_at),
        })
    }

    pub(super) fn params(&self) -> [&(dyn ToSql + Sync); 10] {
        [
            &self.delivery_id,
            &self.truncated,
            &self.url,
            &self.payload,
            &self.status,
            &self.status_if_cancelled,
            &self.run_metadata,
            &self.row_status,
            &self.attempt,
            &self.next_attempt_at,
        ]
    }
}
