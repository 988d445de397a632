-- Limits every worker shares: token buckets, endpoint circuits and the agent-call error window.
-- One row per limit key; its state is the plain data of the pure classes in src/safety, read and
-- written under the row's lock (src/ledger/shared-limits.ts). NULL: created to be locked, never
-- written yet.
CREATE TABLE shared_limits (
  key        text        PRIMARY KEY,
  state      jsonb,
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
