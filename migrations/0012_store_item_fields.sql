-- Store search by an equality filter (docs/performance.md §14): each item's top-level
-- scalar fields, one row each, indexed by (field, value) newest first. A search with
-- `{"group": g}` walks that index from the newest item with the value and stops once
-- its page is full, where the value's GIN index (0005) found every item with it, and
-- each was visited and sorted: at 1M items with 1,000 per value, ~1,000 heap visits
-- per page. A trigger keeps the rows, so every writer of `store_items` (an older
-- instance during a rolling upgrade too) keeps them; they go with their item by the
-- foreign key. Numbers are kept normalised (trailing zeros trimmed: equal numbers,
-- one entry); a field whose name or value text is longer than 200 bytes is not kept,
-- and a search on such a value reads the GIN index instead
-- (`filter::indexed_equality` holds the same rule).
CREATE TABLE IF NOT EXISTS store_item_fields (
    ns_path text COLLATE "C" NOT NULL,
    key text COLLATE "C" NOT NULL,
    field text COLLATE "C" NOT NULL,
    value jsonb NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (ns_path, key, field),
    FOREIGN KEY (ns_path, key) REFERENCES store_items (ns_path, key) ON DELETE CASCADE
);

CREATE INDEX IF NOT EXISTS store_item_fields_by_value
    ON store_item_fields (field, value, updated_at DESC);

-- The rows an item's value gives.
CREATE OR REPLACE FUNCTION store_item_fields_of(item jsonb)
RETURNS TABLE (field text, value jsonb) LANGUAGE sql IMMUTABLE AS $$
    SELECT e.key, CASE WHEN jsonb_typeof(e.value) = 'number'
                       THEN to_jsonb(trim_scale(e.value::numeric)) ELSE e.value END
    FROM jsonb_each(item) e
    WHERE jsonb_typeof(e.value) IN ('string', 'number', 'boolean', 'null')
      AND octet_length(e.key) <= 200 AND octet_length(e.value::text) <= 200
$$;

CREATE OR REPLACE FUNCTION store_item_fields_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        -- A TTL refresh changes neither.
        IF NEW.value = OLD.value AND NEW.updated_at = OLD.updated_at THEN
            RETURN NULL;
        END IF;
        DELETE FROM store_item_fields WHERE ns_path = OLD.ns_path AND key = OLD.key;
    END IF;
    INSERT INTO store_item_fields (ns_path, key, field, value, updated_at)
    SELECT NEW.ns_path, NEW.key, f.field, f.value, NEW.updated_at
    FROM store_item_fields_of(NEW.value) f;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS store_item_fields_sync ON store_items;
CREATE TRIGGER store_item_fields_sync AFTER INSERT OR UPDATE ON store_items
    FOR EACH ROW EXECUTE FUNCTION store_item_fields_sync();

INSERT INTO store_item_fields (ns_path, key, field, value, updated_at)
SELECT i.ns_path, i.key, f.field, f.value, i.updated_at
FROM store_items i, store_item_fields_of(i.value) f
ON CONFLICT DO NOTHING;
