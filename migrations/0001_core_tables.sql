-- Core protocol tables: assistants, threads, runs (the queue), crons, store items,
-- idempotency keys. Every timestamp is written by the service from its injected
-- clock, never by now(). Text that is sorted or compared bytewise uses COLLATE "C"
-- so ordering matches the in-memory driver.

CREATE TABLE IF NOT EXISTS assistants (
    assistant_id uuid PRIMARY KEY,
    graph_id text COLLATE "C" NOT NULL,
    config jsonb NOT NULL,
    context jsonb NOT NULL,
    metadata jsonb NOT NULL,
    name text COLLATE "C" NOT NULL,
    description text,
    version bigint NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE TABLE IF NOT EXISTS threads (
    thread_id uuid PRIMARY KEY,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    state_updated_at timestamptz NOT NULL,
    metadata jsonb NOT NULL,
    status text COLLATE "C" NOT NULL,
    config jsonb NOT NULL,
    state_values jsonb,
    interrupts jsonb NOT NULL,
    error text,
    ttl_strategy text,
    ttl_minutes double precision,
    expires_at timestamptz
);

CREATE TABLE IF NOT EXISTS runs (
    run_id uuid PRIMARY KEY,
    thread_id uuid NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
    assistant_id uuid NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    status text COLLATE "C" NOT NULL,
    metadata jsonb NOT NULL,
    multitask_strategy text,
    kwargs jsonb NOT NULL,
    error jsonb,
    available_at timestamptz NOT NULL,
    started boolean NOT NULL DEFAULT false,
    cancel_requested boolean NOT NULL DEFAULT false
);

-- The queue: pending runs in claim order (created_at, run_id).
CREATE INDEX IF NOT EXISTS runs_pending_queue
    ON runs (created_at, run_id) WHERE status = 'pending';

-- One running run per thread, enforced by the database: a claim that would start a
-- second run on a thread fails with a unique violation and is retried.
CREATE UNIQUE INDEX IF NOT EXISTS runs_one_running_per_thread
    ON runs (thread_id) WHERE status = 'running';

CREATE TABLE IF NOT EXISTS crons (
    cron_id uuid PRIMARY KEY,
    assistant_id uuid,
    thread_id uuid REFERENCES threads (thread_id) ON DELETE CASCADE,
    user_id text,
    schedule text NOT NULL,
    timezone text,
    end_time timestamptz,
    next_run_date timestamptz,
    payload jsonb NOT NULL,
    metadata jsonb NOT NULL,
    on_run_completed text,
    enabled boolean NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

-- Store items. `namespace` is the path (ordered element-wise, bytewise); `ns_path`
-- is the same path joined with '.' (labels never contain dots), so a literal
-- namespace prefix is a btree range scan on the primary key.
CREATE TABLE IF NOT EXISTS store_items (
    ns_path text COLLATE "C" NOT NULL,
    key text COLLATE "C" NOT NULL,
    namespace text[] COLLATE "C" NOT NULL,
    value jsonb NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    ttl_micros bigint,
    expires_at timestamptz,
    PRIMARY KEY (ns_path, key)
);

CREATE TABLE IF NOT EXISTS idempotency_keys (
    key text PRIMARY KEY,
    fingerprint text NOT NULL,
    expires_at timestamptz NOT NULL,
    response_status integer,
    response_headers jsonb,
    response_body bytea
);
