-- tooltrust-store schema, version 4 (PostgreSQL). Keep in step with sqlite/0004_signed.sql.

-- Each chain entry about a held call names the call in a column of its own, indexed, so
-- that a decision or a claim finds the call's hold, decision and claim without reading
-- the chain. The column is only an index: what counts is the entry's line, which is read
-- and checked (its `call` field, its reviewer's signature) every time.
ALTER TABLE chain_entry ADD COLUMN call TEXT;
UPDATE chain_entry SET call = line::jsonb ->> 'call'
WHERE jsonb_typeof(line::jsonb -> 'call') = 'string';
CREATE INDEX chain_entry_by_call ON chain_entry (tenant, call) WHERE call IS NOT NULL;

-- The reviewer's signed decision (its statement and signature, as JSON), shown to hosts;
-- a claim reads the decision from the chain, never from here.
ALTER TABLE pending_call ADD COLUMN decision TEXT;
