-- Webhook delivery outbox. Rows are written by the run settle in the same
-- transaction as the terminal status; they outlive their thread and run (no FK).

CREATE TABLE IF NOT EXISTS webhook_deliveries (
    delivery_id uuid PRIMARY KEY,
    run_id uuid NOT NULL,
    thread_id uuid NOT NULL,
    status text NOT NULL,
    attempt integer NOT NULL,
    last_error text,
    next_attempt_at timestamptz,
    payload_truncated boolean NOT NULL,
    replayable boolean NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    url text NOT NULL,
    payload jsonb,
    retain_until timestamptz
);

-- Due rows (pending, or delivering with an expired lease), earliest first.
CREATE INDEX IF NOT EXISTS webhook_deliveries_due
    ON webhook_deliveries (next_attempt_at, delivery_id)
    WHERE status IN ('pending', 'delivering');
