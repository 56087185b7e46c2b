-- State holds (ThreadsRepo::hold_state): a thread's state is being edited through its
-- graph, so no run of the thread may be claimed until `held_until` (a lease, so a
-- holder that died frees the thread by itself) or the hold's release. A table of its
-- own: it is empty but for edits in progress, and the thread rows stay as they were.
CREATE TABLE IF NOT EXISTS thread_state_holds (
    thread_id uuid PRIMARY KEY REFERENCES threads (thread_id) ON DELETE CASCADE,
    hold_id uuid NOT NULL,
    held_until timestamptz NOT NULL
);
