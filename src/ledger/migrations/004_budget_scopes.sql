-- A paid call reserves its maximum against every budget it counts in, in one transaction: the
-- day's (as before), its agent's day budget, its intent's budget and its stage's budget within
-- the intent. The reservation says which agent and stage it is for, and which budget refused it.
ALTER TABLE budget_reservations
  ADD COLUMN agent_id  text,
  ADD COLUMN stage     text,
  -- NULL when granted; otherwise 'day', 'agent', 'intent' or 'stage'. committed_usd and
  -- limit_usd are then that budget's.
  ADD COLUMN denied_by text CHECK (denied_by IN ('day', 'agent', 'intent', 'stage'));
CREATE INDEX budget_reservations_intent ON budget_reservations (intent_id);
CREATE INDEX budget_reservations_agent_day ON budget_reservations (agent_id, day);

-- A call whose cost could not be bounded before it ran (a command, a script) reserves its
-- declared cap; if it then reports more, it is settled at its real cost, above the reservation,
-- and marked so.
ALTER TABLE budget_settlements ADD COLUMN overrun boolean NOT NULL DEFAULT false;
