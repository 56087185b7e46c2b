-- A checkpoint's body moves into its `checkpoints` row. Every read returned the body
-- with its row and every write stored both, so the separate `checkpoint_blobs` (0004)
-- cost each new checkpoint a second heap row, a second primary-key entry and a
-- foreign-key check that locks the parent row, and each read a join. Large bodies are
-- still TOASTed (compressed and stored out of line) by the row itself.
--
-- The body becomes `json`: the server writes it as JSON text and reads it back whole,
-- never queries inside it, so keeping the text spares building a jsonb tree on every
-- write and printing it again on every read.
ALTER TABLE checkpoints ADD COLUMN IF NOT EXISTS body json;

UPDATE checkpoints c SET body = b.body::json
FROM checkpoint_blobs b
WHERE b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns
  AND b.checkpoint_id = c.checkpoint_id;

-- The saver wrote a checkpoint and its body in one statement; a row without one
-- cannot be read (it never could: reads joined the body).
DELETE FROM checkpoints WHERE body IS NULL;

ALTER TABLE checkpoints ALTER COLUMN body SET NOT NULL;

DROP TABLE IF EXISTS checkpoint_blobs;
