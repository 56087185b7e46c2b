-- Graph checkpoints. The hot table `checkpoints` holds only coordinates, parent,
-- metadata and time, so its heap and index pages stay small; the body lives in
-- `checkpoint_blobs` (jsonb, TOASTed and compressed out of line when large).
-- Checkpoint ids are monotonic text (UUID v7), so "newest first" is a backward
-- scan of the primary key (thread_id, checkpoint_ns, checkpoint_id).

CREATE TABLE IF NOT EXISTS checkpoints (
    thread_id text COLLATE "C" NOT NULL,
    checkpoint_ns text COLLATE "C" NOT NULL,
    checkpoint_id text COLLATE "C" NOT NULL,
    parent_checkpoint_id text COLLATE "C",
    metadata jsonb NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
);

CREATE TABLE IF NOT EXISTS checkpoint_blobs (
    thread_id text COLLATE "C" NOT NULL,
    checkpoint_ns text COLLATE "C" NOT NULL,
    checkpoint_id text COLLATE "C" NOT NULL,
    body jsonb NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id),
    FOREIGN KEY (thread_id, checkpoint_ns, checkpoint_id)
        REFERENCES checkpoints (thread_id, checkpoint_ns, checkpoint_id) ON DELETE CASCADE
);

-- Bodies are always stored out of line when they do not fit a small tuple.
ALTER TABLE checkpoint_blobs ALTER COLUMN body SET STORAGE EXTENDED;

CREATE SEQUENCE IF NOT EXISTS checkpoint_write_seq;

CREATE TABLE IF NOT EXISTS checkpoint_writes (
    thread_id text COLLATE "C" NOT NULL,
    checkpoint_ns text COLLATE "C" NOT NULL,
    checkpoint_id text COLLATE "C" NOT NULL,
    task_id text COLLATE "C" NOT NULL,
    channel text COLLATE "C" NOT NULL,
    seq bigint NOT NULL DEFAULT nextval('checkpoint_write_seq'),
    value jsonb NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, channel),
    FOREIGN KEY (thread_id, checkpoint_ns, checkpoint_id)
        REFERENCES checkpoints (thread_id, checkpoint_ns, checkpoint_id) ON DELETE CASCADE
);
