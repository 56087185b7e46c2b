-- no-transaction
-- Delayed runs (pending, claimable later than they were created) by the instant they
-- become claimable: the earliest one due is one probe (`RunsRepo::next_available_at`,
-- read again whenever a delayed run is queued), where the queue's own index, in
-- creation order, made it a read of every pending run (docs/performance.md §14).
-- Its predicate names `created_at`, which no claim does, so a claim never reads runs
-- through it (it must take them in creation order, from `runs_pending_queue`); a run
-- that is claimable when created never enters it. Built CONCURRENTLY, as 0005's are.
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_delayed_by_availability
    ON runs (available_at) WHERE status = 'pending' AND available_at > created_at;
