-- no-transaction
-- Pending runs by the instant they become claimable: the earliest delayed run is one
-- probe (`RunsRepo::next_available_at`, read again whenever a delayed run is queued),
-- where the queue's own index, in creation order, made it a read of every pending run
-- (docs/performance.md §14). Only pending rows are indexed, so a run claimed at its
-- insert never enters it. Built CONCURRENTLY, as 0005's are.
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_pending_available
    ON runs (available_at) WHERE status = 'pending';
