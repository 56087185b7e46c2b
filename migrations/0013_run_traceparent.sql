-- The W3C `traceparent` of the request that created a run (`Run::traceparent`), read
-- by the worker that executes it: a column, where it was one more field of every
-- run's JSON `kwargs` (docs/performance.md §17). NULL when traces were not exported;
-- runs created before this migration keep theirs in `kwargs`, where it is still read.
-- Adding a nullable column without a default rewrites no rows.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS traceparent text;
