-- Assistant version history: immutable snapshots; the live row in `assistants`
-- mirrors the active one. Deleting an assistant deletes its versions.

CREATE TABLE IF NOT EXISTS assistant_versions (
    assistant_id uuid NOT NULL REFERENCES assistants (assistant_id) ON DELETE CASCADE,
    version bigint NOT NULL,
    graph_id text COLLATE "C" NOT NULL,
    config jsonb NOT NULL,
    context jsonb NOT NULL,
    metadata jsonb NOT NULL,
    name text COLLATE "C" NOT NULL,
    description text,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (assistant_id, version)
);
