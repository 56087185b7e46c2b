-- Why a run was cancelled (`Run.cancel_reason` on the wire), written by the cancel
-- that stopped it; NULL for a run nobody cancelled. Adding a nullable column without
-- a default rewrites no rows.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS cancel_reason text;
