-- tooltrust-store schema, version 3 (SQLite). Keep in step with postgres/0003_lifecycle.sql.

-- One lifecycle for held calls across the runtime and the store: held → approved |
-- rejected | expired → claimed → ran | failed. An approval is bound to its tenant, scope,
-- tool, checksum and (for MCP) upstream, and expires. SQLite cannot change a CHECK in
-- place, so the table is rebuilt; a call that was 'pending' is now 'held'.
CREATE TABLE pending_call_v3 (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    tool TEXT NOT NULL,
    args TEXT NOT NULL,
    checksum TEXT NOT NULL,
    rule TEXT NOT NULL,
    reason TEXT NOT NULL,
    scope TEXT NOT NULL,
    author TEXT NOT NULL,
    principal_request TEXT,
    context TEXT,
    status TEXT NOT NULL CHECK (status IN
        ('held', 'approved', 'rejected', 'expired', 'claimed', 'ran', 'failed')),
    created_at TEXT NOT NULL,
    decided_by TEXT,
    decision_reason TEXT,
    decided_at TEXT,
    declaration TEXT,
    upstream TEXT,
    expires_at TEXT
) STRICT;

INSERT INTO pending_call_v3
SELECT id, tenant, tool, args, checksum, rule, reason, scope, author, principal_request,
       context, CASE status WHEN 'pending' THEN 'held' ELSE status END, created_at,
       decided_by, decision_reason, decided_at, declaration, NULL, NULL
FROM pending_call;

DROP TABLE pending_call;
ALTER TABLE pending_call_v3 RENAME TO pending_call;

CREATE INDEX pending_call_by_status ON pending_call (status, created_at DESC, id DESC);
CREATE INDEX pending_call_by_tenant ON pending_call (tenant, status, created_at DESC, id DESC);
CREATE INDEX pending_call_by_time ON pending_call (created_at DESC, id DESC);
