-- tooltrust-store schema, version 1 (PostgreSQL). Keep in step with sqlite/0001_initial.sql:
-- the same tables, columns and indexes, in PostgreSQL's types.

-- One hash chain per tenant: its last entry (the head) and its entries, each stored as the
-- exact canonical line the file audit log would write (without the newline). Appends lock
-- the head row (SELECT ... FOR UPDATE), so the chain stays linear across hosts.
CREATE TABLE chain_head (
    tenant TEXT PRIMARY KEY,
    seq BIGINT NOT NULL,
    hash TEXT NOT NULL
);

CREATE TABLE chain_entry (
    tenant TEXT NOT NULL,
    seq BIGINT NOT NULL,
    line TEXT NOT NULL,
    PRIMARY KEY (tenant, seq)
);

-- Calls the gate held for review, and their decisions.
-- id and created_at order the listings: COLLATE "C" compares them byte by byte, as SQLite
-- does, whatever the database's default collation.
CREATE TABLE pending_call (
    id TEXT COLLATE "C" PRIMARY KEY,
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
    status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'ran')),
    created_at TEXT COLLATE "C" NOT NULL,
    decided_by TEXT,
    decision_reason TEXT,
    decided_at TEXT
);

-- The review queue's listings: by status (all tenants) and by tenant, newest first.
CREATE INDEX pending_call_by_status ON pending_call (status, created_at DESC, id DESC);
CREATE INDEX pending_call_by_tenant ON pending_call (tenant, status, created_at DESC, id DESC);
CREATE INDEX pending_call_by_time ON pending_call (created_at DESC, id DESC);

-- Quarantined outputs: the sealed bytes of the runtime's encrypted store (ciphertext and
-- wrapped data key), never plaintext, never the key-encryption key.
CREATE TABLE quarantine (
    tenant TEXT NOT NULL,
    key TEXT NOT NULL,
    reader TEXT NOT NULL,
    target TEXT NOT NULL,
    sealed BYTEA NOT NULL,
    stored_at TEXT NOT NULL,
    PRIMARY KEY (tenant, key, reader)
);

-- Conversations, as the agent persists them: an opaque JSON text and its revision.
CREATE TABLE conversation (
    tenant TEXT NOT NULL,
    id TEXT NOT NULL,
    revision BIGINT NOT NULL,
    body TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (tenant, id)
);
