-- tooltrust-store schema, version 2 (SQLite). Keep in step with postgres/0002_declaration.sql.

-- The declaration of the tool a held call names (its trust, effects, output kind and
-- description, as canonical JSON), so a reviewer sees what the tool is without the
-- agent's registry. NULL for calls held before version 2, or by hosts that do not say.
ALTER TABLE pending_call ADD COLUMN declaration TEXT;
