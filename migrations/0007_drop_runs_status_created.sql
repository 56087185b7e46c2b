-- no-transaction
-- The status-first index `runs_status_created` (0005) took an entry for every row
-- version of every run: three per run (queued, claimed, settled), each a write on the
-- hottest path, to serve only reads of the active runs across threads. Those reads
-- name their statuses literally and use the partial indexes instead: pending runs
-- `runs_pending_queue`, running ones `runs_one_running_per_thread`, a thread's
-- `runs_active_by_thread`. Dropped CONCURRENTLY, so an upgrade does not block writes.
DROP INDEX CONCURRENTLY IF EXISTS runs_status_created;
