-- The order the ledger received its rows in, one sequence across the tables an intent's timeline
-- merges. Clocks cannot give that order: rows milliseconds apart are stamped by different hosts
-- and processes (a gate's decision is stamped when the workflow accepted it, which can be before
-- the workflow wrote the gate's request), while the workflow writes its rows in the order it
-- recorded them.
CREATE SEQUENCE ledger_seq AS bigint;

-- Rows written before this migration keep seq NULL: the ledger does not know their order, and
-- every one of them came before any row numbered from here on. Setting the default after adding
-- the column numbers new rows only, so the tables are neither rewritten nor updated.
ALTER TABLE safety_events ADD COLUMN seq bigint;
ALTER TABLE safety_events ALTER COLUMN seq SET DEFAULT nextval('ledger_seq');
ALTER TABLE cost_events ADD COLUMN seq bigint;
ALTER TABLE cost_events ALTER COLUMN seq SET DEFAULT nextval('ledger_seq');
ALTER TABLE gate_decisions ADD COLUMN seq bigint;
ALTER TABLE gate_decisions ALTER COLUMN seq SET DEFAULT nextval('ledger_seq');
ALTER TABLE activity_runs ADD COLUMN seq bigint;
ALTER TABLE activity_runs ALTER COLUMN seq SET DEFAULT nextval('ledger_seq');
