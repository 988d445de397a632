-- Audit of every activity attempt the worker ran: when it started and ended, how it ended, and
-- what it spent. Written once per attempt by the worker's agent-safety interceptor, after the
-- attempt ends; the key makes a repeated write a no-op. The run id is part of the key because a
-- reset (`warden resume`) starts a new run of the same workflow id, whose activity ids count
-- from the reset point again.
CREATE TABLE activity_runs (
  workflow_id   text          NOT NULL,
  run_id        text          NOT NULL,
  activity_id   text          NOT NULL,
  attempt       integer       NOT NULL CHECK (attempt >= 1),
  activity_type text          NOT NULL,
  task_queue    text          NOT NULL,
  intent_id     text,
  stage         text,
  agent_id      text,
  model_id      text,
  started_at    timestamptz   NOT NULL,
  ended_at      timestamptz   NOT NULL CHECK (ended_at >= started_at),
  duration_ms   integer       NOT NULL CHECK (duration_ms >= 0),
  outcome       text          NOT NULL CHECK (outcome IN ('completed', 'failed', 'cancelled')),
  -- The ApplicationFailure type (or error name) of a failed attempt; never its message, which
  -- may quote agent output.
  failure_type  text,
  -- Metered spend of a paid call; NULL where nothing was paid or the cost is unknown.
  spend_usd     numeric(14,6) CHECK (spend_usd >= 0),
  recorded_at   timestamptz   NOT NULL DEFAULT now(),
  PRIMARY KEY (workflow_id, run_id, activity_id, attempt)
);
CREATE INDEX activity_runs_intent_started ON activity_runs (intent_id, started_at);
CREATE INDEX activity_runs_ended ON activity_runs (ended_at);

-- Append-only like every other ledger table (warden_append_only() comes from 001): only
-- retention cleanup may delete.
CREATE TRIGGER activity_runs_append_only BEFORE UPDATE OR DELETE ON activity_runs
  FOR EACH ROW EXECUTE FUNCTION warden_append_only();
CREATE TRIGGER activity_runs_no_truncate BEFORE TRUNCATE ON activity_runs
  FOR EACH STATEMENT EXECUTE FUNCTION warden_append_only();
