-- The books balance: every settled call is one cost row, and an open reservation names the
-- activity attempt that made it, so a worker can ask Temporal whether that attempt still runs.

-- Which activity attempt reserved (NULL on rows from before this migration).
ALTER TABLE budget_reservations
  ADD COLUMN workflow_id      text,
  ADD COLUMN run_id           text,
  ADD COLUMN activity_id      text,
  ADD COLUMN activity_attempt integer CHECK (activity_attempt >= 1);

-- The reservation a cost row settled, written in the same transaction as the settlement; at
-- most one cost row per reservation (NULL on rows from before this migration).
ALTER TABLE cost_events ADD COLUMN reservation_id text UNIQUE REFERENCES budget_reservations (id);

-- Open reservations are looked for at every worker start and every minute.
CREATE INDEX budget_reservations_created ON budget_reservations (created_at) WHERE granted;
