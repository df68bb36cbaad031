-- tooltrust-store schema, version 3 (PostgreSQL). Keep in step with sqlite/0003_lifecycle.sql.

-- One lifecycle for held calls across the runtime and the store: held → approved |
-- rejected | expired → claimed → ran | failed. An approval is bound to its tenant, scope,
-- tool, checksum and (for MCP) upstream, and expires. A call that was 'pending' is now
-- 'held'.
ALTER TABLE pending_call DROP CONSTRAINT IF EXISTS pending_call_status_check;
UPDATE pending_call SET status = 'held' WHERE status = 'pending';
ALTER TABLE pending_call ADD CONSTRAINT pending_call_status_check CHECK (status IN
    ('held', 'approved', 'rejected', 'expired', 'claimed', 'ran', 'failed'));
ALTER TABLE pending_call ADD COLUMN upstream TEXT;
ALTER TABLE pending_call ADD COLUMN expires_at TEXT;
