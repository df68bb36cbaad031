-- tooltrust-store schema, version 4 (SQLite). Keep in step with postgres/0004_signed.sql.

-- Each chain entry about a held call names the call in a column of its own, indexed, so
-- that a decision or a claim finds the call's hold, decision and claim without reading
-- the chain. The column is generated from the entry's line: it cannot be set apart from
-- the line, so a claim entry cannot be hidden from the claim by editing the index. The
-- line is still read and checked (its `call` field, its reviewer's signature) every time.
-- Not a partial index: SQLite's planner would prefer the primary key's (tenant) prefix.
ALTER TABLE chain_entry ADD COLUMN call TEXT GENERATED ALWAYS AS (
    CASE WHEN json_valid(line) AND json_type(line, '$.call') = 'text'
    THEN json_extract(line, '$.call') END
) VIRTUAL;
CREATE INDEX chain_entry_by_call ON chain_entry (tenant, call, seq);

-- The reviewer's signed decision (its statement and signature, as JSON), shown to hosts;
-- a claim reads the decision from the chain, never from here.
ALTER TABLE pending_call ADD COLUMN decision TEXT;

-- Calls held or approved before version 3 (whose holds the chain never recorded) have no
-- expiry: they get the default one (24
-- hours) from the upgrade. (Approvals given before version 4 carry no reviewer's
-- signature: none is ever spent, and each expires with the rest.)
UPDATE pending_call SET expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '+1 day')
WHERE expires_at IS NULL AND status IN ('held', 'approved')
    AND created_at < (SELECT applied_at FROM tooltrust_schema WHERE version = 3);
