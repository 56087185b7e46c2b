//! The shared store-driver conformance suite.
//!
//! Every rule of SPEC's store sections is a `pub async fn` taking a [`Factory`]
//! (something that builds a fresh, empty [`service_store::Store`] around a
//! [`service_store::ManualClock`]), grouped in a module per SPEC section. A driver
//! runs them all from one test file with [`conformance_tests!`], which also runs the
//! proptest model tests in [`model`]. Nothing here assumes a particular driver. A
//! rule that needs a repository the driver declares it lacks is reported as ignored,
//! never passed unchecked. [`checkpointer`], [`coordinator`] and [`bus`] hold the
//! suites of the other seams.

pub mod assistants;
pub mod bus;
pub mod checkpointer;
pub mod coordinator;
pub mod crons;
pub mod deliveries;
pub mod harness;
pub mod idempotency;
pub mod item_ttl;
pub mod limits;
pub mod model;
pub mod namespaces;
pub mod ordering;
pub mod runs;
mod runs_claim_checkpoints;
mod runs_on_existing;
mod runs_traceparent;
pub mod semantic;
pub mod state_holds;
pub mod store_filter;
pub mod text;
pub mod thread_ttl;
pub mod threads;

pub use harness::{Factory, Harness, StoreFactory, TestEnv, TestStore, run};

/// Expands to one `#[test]` per conformance rule, plus the model tests, each building
/// its store with `$factory` (an expression implementing [`StoreFactory`], e.g. an
/// `async fn(TestEnv) -> TestStore`). Tests land in one module per SPEC section.
///
/// A driver without a deliveries repository, or without semantic search, says so:
/// `conformance_tests!(factory, without: [deliveries])`,
/// `without: [semantic_search]` or `without: [deliveries, semantic_search]`. The rules
/// of what it lacks are then reported as ignored (with the reason), and one more test
/// checks that the store really lacks it. Without that declaration such a rule fails
/// on the store rather than pass unchecked.
#[macro_export]
macro_rules! conformance_tests {
    ($factory:expr) => {
        $crate::__conformance_tests!(($factory) run run);
    };
    ($factory:expr, without: [deliveries]) => {
        $crate::__conformance_tests!(($factory) skip run);
        $crate::__declared_without!(($factory) deliveries);
    };
    ($factory:expr, without: [semantic_search]) => {
        $crate::__conformance_tests!(($factory) run skip);
        $crate::__declared_without!(($factory) semantic_search);
    };
    ($factory:expr, without: [deliveries, semantic_search]) => {
        $crate::__conformance_tests!(($factory) skip skip);
        $crate::__declared_without!(($factory) deliveries semantic_search);
    };
}

/// The checks that a driver really lacks what it declared it lacks.
#[doc(hidden)]
#[macro_export]
macro_rules! __declared_without {
    (($factory:expr) $($capability:ident)+) => {
        mod declared_without {
            #[allow(unused_imports)]
            use super::*;

            $($crate::__lacks!(($factory) $capability);)+
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __lacks {
    (($factory:expr) deliveries) => {
        #[test]
        fn the_store_has_no_deliveries_repository() {
            $crate::run(
                $factory,
                $crate::deliveries::store_has_no_deliveries_repository,
            );
        }
    };
    (($factory:expr) semantic_search) => {
        #[test]
        fn the_store_has_no_semantic_search() {
            $crate::run($factory, $crate::semantic::store_has_no_semantic_search);
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_tests {
    (($factory:expr) $deliveries:ident $semantic:ident) => {
        $crate::__conformance_suite! {
            ($factory)
            store_filter: [
                filter_applies_to_top_level_keys_and_dotted_names_are_literal,
                filter_keys_and_operators_are_anded_and_bare_scalar_is_equality,
                filter_supports_each_operator,
                filter_ordering_ops_never_match_strings,
                filter_absent_key_matches_only_ne_and_nin,
                filter_present_null_is_distinct_from_absent,
                filter_empty_operator_object_matches_everything,
                filter_unknown_operator_or_non_scalar_operand_is_invalid,
                filter_applies_before_paging,
            ];
            namespaces: [
                namespace_wildcard_stands_for_exactly_one_segment,
                namespace_prefix_anchors_first_and_suffix_anchors_last,
                namespace_longer_pattern_never_matches_shorter_selects_subtree,
                namespace_max_depth_truncates_and_dedupes_before_paging,
                namespace_results_sorted_elementwise_shorter_first,
                namespace_omitted_prefix_matches_every_namespace,
                namespace_search_prefix_selects_subtree,
                namespace_empty_or_dotted_label_is_invalid,
            ];
            text: [
                nul_in_thread_metadata_is_invalid_and_writes_nothing,
                nul_in_an_item_is_invalid_and_writes_nothing,
                nul_in_a_search_is_invalid,
                nul_in_an_assistant_or_cron_is_invalid_and_writes_nothing,
                nul_in_a_new_run_is_invalid_and_leaves_its_thread_as_it_was,
            ];
            limits: [
                limits_search_limit_above_1000_is_rejected,
                limits_omitted_limit_returns_max_page_size,
                limits_max_page_size_clamps_client_limits,
                limits_counts_are_not_bounded,
                limits_run_list_is_not_bounded_by_page_size,
                limits_run_list_limit_above_1000_is_clamped,
                limits_namespace_list_limit_above_1000_is_clamped,
                limits_namespace_list_obeys_max_page_size,
                limits_active_runs_are_bounded,
            ];
            ordering: [
                ordering_run_list_newest_first_ties_by_run_id_desc,
                ordering_latest_run_ties_by_run_id_desc,
                ordering_queue_oldest_first_ties_by_run_id_asc,
                ordering_thread_search_ties_by_thread_id,
                ordering_assistant_search_ties_by_assistant_id,
                ordering_cron_search_ties_by_cron_id,
                ordering_item_search_newest_first_ties_by_namespace_then_key,
                ordering_item_search_by_equality_pages_ties_by_namespace_then_key,
            ];
            thread_ttl: [
                thread_ttl_expires_minutes_after_create,
                thread_ttl_patch_restarts_the_clock,
                thread_ttl_null_pins_and_absent_keeps,
                thread_expired_stays_readable_until_swept,
                thread_expired_query_is_bounded_earliest_first,
                thread_ttl_must_be_positive_and_at_most_100_years,
            ];
            item_ttl: [
                item_ttl_expired_reads_as_absent_at_once,
                item_refresh_on_read_extends_expiry,
                item_get_without_refresh_keeps_expiry,
                item_search_with_refresh_extends_expiry,
                item_put_restarts_expiry_and_no_ttl_never_expires,
                item_sweep_removes_expired_only,
                item_ttl_must_be_positive_and_at_most_100_years,
            ];
            assistants: [
                assistant_create_is_version_one_with_snapshot,
                assistant_create_existing_conflicts_or_returns_existing,
                assistant_update_mints_max_plus_one,
                assistant_set_latest_reactivates_without_new_snapshot,
                assistant_set_latest_unknown_version_is_not_found,
                assistant_versions_newest_first_filter_and_page,
                assistant_delete_removes_versions,
                assistant_search_filters_and_reports_total,
                assistant_search_and_count_within_enforced_metadata,
            ];
            threads: [
                thread_create_is_idle_with_null_values,
                thread_create_existing_conflicts_or_returns_existing,
                thread_created_busy_reads_back_busy,
                thread_patch_merges_metadata_and_bumps_updated_at,
                thread_mirror_error_writes_metadata_error_and_success_clears_it,
                thread_mirror_after_run_stays_busy_while_runs_wait,
                thread_search_enforced_metadata_is_anded,
                thread_search_enforced_metadata_key_collision_matches_nothing,
                thread_search_enforced_alternatives_match_any,
                thread_search_filters_ids_status_and_values,
                thread_search_and_count_leave_out_excluded_metadata,
                thread_search_sorts_by_each_field,
                thread_count_by_status,
                thread_copy_duplicates_state_under_new_id,
                thread_delete_cascades_to_runs_and_thread_crons,
            ];
            runs: [
                run_create_is_pending_on_an_existing_thread,
                run_create_marks_its_thread_busy_or_changes_nothing,
                run_claim_serializes_runs_of_one_thread,
                run_claim_tells_whether_more_runs_wait,
                run_claim_waits_for_available_at,
                run_create_with_thread_writes_both_or_neither,
                run_create_with_thread_claimed_is_running_and_started,
                run_create_claimed_on_existing_thread_starts_only_if_free,
                run_thread_and_active_reads_both,
                run_create_requires_its_assistant_unchanged_when_asked,
                run_claim_by_id_takes_only_a_claimable_run,
                run_claim_says_whether_its_thread_has_a_checkpoint,
                run_keeps_its_traceparent_beside_its_kwargs,
                run_cancel_pending_is_immediate_and_sends_no_webhook,
                run_cancel_running_is_a_durable_request,
                run_cancel_of_a_pending_run_records_its_reason,
                run_cancel_of_a_running_run_keeps_the_first_reason_through_settle,
                run_settle_cancel_wins_the_race,
                run_settle_and_mirror_mirrors_only_the_planned_outcome,
                run_settle_and_mirror_claims_the_next_run,
                run_settle_writes_status_error_and_delivery_in_one_step,
                run_settle_of_never_started_run_writes_no_delivery,
                run_settle_reports_interrupted_webhook_status,
                run_settle_of_terminal_run_is_a_noop,
                run_list_filters_status_and_pages,
                run_active_lists_pending_and_running,
                run_active_within_enforced_metadata,
                run_delete_removes_only_that_run,
                run_concurrent_claims_never_double_run_a_thread,
            ];
            state_holds: [
                state_hold_is_refused_while_the_thread_is_busy,
                state_hold_keeps_the_threads_runs_pending_until_released,
                state_hold_lease_ends_it_and_a_late_release_keeps_the_next,
            ];
            crons: [
                cron_next_run_date_is_read_in_its_timezone,
                cron_end_time_stops_firings,
                cron_invalid_schedule_or_timezone_is_invalid,
                cron_due_and_advance_fire_each_occurrence_once,
                cron_disable_pauses_and_resume_skips_missed_firings,
                cron_update_recomputes_schedule_and_merges_metadata,
                cron_search_and_count_filter,
                cron_search_and_count_within_enforced_metadata,
                cron_thread_must_exist_and_delete_removes,
            ];
            idempotency: [
                idempotency_first_begin_acquires_duplicate_is_in_progress,
                idempotency_completed_key_replays_response,
                idempotency_fingerprint_mismatch,
                idempotency_abandon_releases_the_key,
                idempotency_expired_key_starts_fresh,
                idempotency_concurrent_duplicates_acquire_once,
            ];
        }
        $crate::__conformance_section! {
            ($factory) $deliveries "driver has no deliveries repository"
            deliveries: [
                delivery_first_attempt_counts_one,
                delivery_success_clears_payload,
                delivery_unknown_ids_are_not_found,
                delivery_failure_schedules_retry,
                delivery_dead_keeps_payload_for_retention,
                delivery_replay_makes_undelivered_due_now,
                delivery_replay_of_delivered_conflicts,
                delivery_replay_with_another_runs_id_is_not_found,
                delivery_list_by_run_filters_status_and_pages,
                delivery_claim_due_is_exclusive_and_recovers_stalled,
                delivery_rows_survive_thread_and_run_delete,
                delivery_rows_keep_their_owner_and_list_within_it,
                delivery_leased_at_settle_is_its_first_attempt,
                delivery_leased_at_settle_is_retried_when_its_lease_ends,
                delivery_count_awaiting_retry_counts_failed_undelivered_rows,
            ]
        }
        $crate::__conformance_section! {
            ($factory) $semantic "driver has no semantic search"
            semantic: [
                semantic_query_ranks_by_cosine_similarity_best_first,
                semantic_score_is_cosine_similarity_and_null_without_query,
                semantic_filter_and_paging_apply_to_the_ranked_candidates,
                semantic_namespace_prefix_bounds_the_candidates,
                semantic_vectors_of_other_dims_are_invalid_and_write_nothing,
                semantic_update_replaces_the_items_vectors,
                semantic_delete_removes_the_vectors,
                semantic_unindexed_items_follow_every_scored_one,
                semantic_pages_of_tied_scores_follow_the_whole_ranking,
                semantic_a_store_without_an_index_refuses_vectors,
            ]
        }

        mod model {
            #[allow(unused_imports)]
            use super::*;

            #[test]
            fn items_match_reference_model() {
                $crate::model::items_match_reference_model($factory);
            }

            #[test]
            fn threads_match_reference_model() {
                $crate::model::threads_match_reference_model($factory);
            }
        }
    };
}

/// One SPEC section whose rules all run (`run`) or are all reported as ignored
/// with `$reason` (`skip`).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_section {
    (($factory:expr) $mode:ident $reason:literal $module:ident: [$($test:ident),* $(,)?]) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;

            $(
                $crate::__skippable!($mode, $reason,
                    #[test]
                    fn $test() {
                        $crate::run($factory, $crate::$module::$test);
                    }
                );
            )*
        }
    };
}

/// A test item as is (`run`), or marked ignored with `$reason` (`skip`), so a cargo
/// test run lists and counts it as skipped.
#[doc(hidden)]
#[macro_export]
macro_rules! __skippable {
    (run, $reason:literal, $item:item) => {
        $item
    };
    (skip, $reason:literal, $item:item) => {
        #[ignore = $reason]
        $item
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_suite {
    (($factory:expr) $($module:ident: [$($test:ident),* $(,)?];)*) => {
        $(
            mod $module {
                #[allow(unused_imports)]
                use super::*;

                $(
                    #[test]
                    fn $test() {
                        $crate::run($factory, $crate::$module::$test);
                    }
                )*
            }
        )*
    };
}
