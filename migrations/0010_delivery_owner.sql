-- A delivery keeps the metadata of the run that made it (its owner's stamp among it):
-- deliveries outlive their thread, and a later thread with the same id may be another
-- owner's, so listing and replaying deliveries checks ownership against this column.
ALTER TABLE webhook_deliveries ADD COLUMN IF NOT EXISTS run_metadata jsonb NOT NULL DEFAULT '{}';
