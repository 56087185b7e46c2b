-- no-transaction
-- Active (pending or running) runs of a thread, in creation order: what a finished
-- run asks (does anything wait on its thread?) and what the multitask check reads.
-- Keyed by the thread, a lookup reads only that thread's entries. The status-first
-- index `runs_status_created` keeps an entry for every earlier row version of every
-- run until vacuum (a status change is never a HOT update), so under load a lookup
-- there walks thousands of dead entries. Built CONCURRENTLY, as 0005's are.
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_active_by_thread
    ON runs (thread_id, created_at, run_id) WHERE status IN ('pending', 'running');
