-- no-transaction
-- Performance indexes, built CONCURRENTLY so an upgrade does not block writes.
-- The migrator runs each statement on its own (CREATE INDEX CONCURRENTLY cannot run
-- inside a transaction block), drops an INVALID index left by an interrupted build
-- before retrying it, and writes the ledger row only after the last statement.
-- Every statement is idempotent (IF NOT EXISTS). Indexes here are plain (no
-- predicate, no expression) so concurrent builds do not wait on each other.

-- Thread search by metadata containment (@>).
CREATE INDEX CONCURRENTLY IF NOT EXISTS threads_metadata_gin
    ON threads USING gin (metadata jsonb_path_ops);

-- Thread sweeper: expired threads, earliest expiry first.
CREATE INDEX CONCURRENTLY IF NOT EXISTS threads_expires_at
    ON threads (expires_at, thread_id);

-- Thread search by status (count by status, busy threads).
CREATE INDEX CONCURRENTLY IF NOT EXISTS threads_status_updated
    ON threads (status, updated_at);

-- Runs of a thread, newest first; also the latest run of a thread.
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_thread_created
    ON runs (thread_id, created_at, run_id);

-- Active runs across threads (pending and running) in queue order.
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_status_created
    ON runs (status, created_at, run_id);

-- Assistant search by metadata containment and by graph.
CREATE INDEX CONCURRENTLY IF NOT EXISTS assistants_metadata_gin
    ON assistants USING gin (metadata jsonb_path_ops);
CREATE INDEX CONCURRENTLY IF NOT EXISTS assistants_graph_id
    ON assistants (graph_id);

-- Crons of a thread, and due crons.
CREATE INDEX CONCURRENTLY IF NOT EXISTS crons_thread_id
    ON crons (thread_id);
CREATE INDEX CONCURRENTLY IF NOT EXISTS crons_next_run_date
    ON crons (next_run_date, cron_id);

-- Store items: newest first, expiry sweep, value filters.
CREATE INDEX CONCURRENTLY IF NOT EXISTS store_items_expires_at
    ON store_items (expires_at);
CREATE INDEX CONCURRENTLY IF NOT EXISTS store_items_value_gin
    ON store_items USING gin (value jsonb_path_ops);

-- Idempotency key expiry.
CREATE INDEX CONCURRENTLY IF NOT EXISTS idempotency_keys_expires_at
    ON idempotency_keys (expires_at);

-- Deliveries of a run, oldest first; dead rows awaiting payload purge.
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_deliveries_run
    ON webhook_deliveries (run_id, created_at, delivery_id);

