-- Warden's ledger. Every table is append-only: the triggers at the end refuse UPDATE, TRUNCATE,
-- and any DELETE but retention cleanup's, which sets warden.retention_cleanup for its own
-- transaction and may delete only rows older than the retention floor.
-- Money is NUMERIC(14,6): exact to a millionth of a dollar, never a float.

-- One row per safety decision, written once (its id is deterministic).
CREATE TABLE safety_events (
  id            uuid        PRIMARY KEY,
  "timestamp"   timestamptz NOT NULL,
  event_type    text        NOT NULL,
  intent_id     text,
  stage         text,
  agent_id      text,
  model_id      text,
  breaker_id    text,
  cost_snapshot jsonb,
  reason        text        NOT NULL,
  suggestion    text,
  metadata      jsonb       NOT NULL DEFAULT '{}'::jsonb,
  severity      text        NOT NULL CHECK (severity IN ('info', 'low', 'medium', 'high', 'critical')),
  recorded_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX safety_events_intent_ts ON safety_events (intent_id, "timestamp");
CREATE INDEX safety_events_ts ON safety_events ("timestamp");

-- One row per paid (or metered) agent call.
CREATE TABLE cost_events (
  id            uuid          PRIMARY KEY,
  "timestamp"   timestamptz   NOT NULL,
  intent_id     text          NOT NULL,
  stage         text          NOT NULL,
  attempt       integer       NOT NULL CHECK (attempt >= 1),
  agent_id      text          NOT NULL,
  model_id      text          NOT NULL,
  input_tokens  bigint        NOT NULL CHECK (input_tokens >= 0),
  output_tokens bigint        NOT NULL CHECK (output_tokens >= 0),
  usd           numeric(14,6) NOT NULL CHECK (usd >= 0),
  recorded_at   timestamptz   NOT NULL DEFAULT now()
);
CREATE INDEX cost_events_intent_ts ON cost_events (intent_id, "timestamp");
CREATE INDEX cost_events_ts ON cost_events ("timestamp");

-- Human (or policy / timeout) decisions at gates. "by" is reserved in SQL, hence decided_by.
CREATE TABLE gate_decisions (
  id           uuid        PRIMARY KEY,
  intent_id    text        NOT NULL,
  gate         text        NOT NULL,
  decision     text        NOT NULL CHECK (decision IN ('approve', 'reject', 'approve-with-conditions', 'defer')),
  decided_by   text        NOT NULL,
  reason       text,
  conditions   jsonb       NOT NULL DEFAULT '[]'::jsonb,
  requested_at timestamptz NOT NULL,
  decided_at   timestamptz NOT NULL,
  timed_out    boolean     NOT NULL,
  recorded_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX gate_decisions_intent_ts ON gate_decisions (intent_id, decided_at);
CREATE INDEX gate_decisions_ts ON gate_decisions (decided_at);

-- Budgets: a paid call first reserves its maximum cost against every budget it counts in (the
-- day's, its agent's day budget, its intent's, and its stage's within the intent), in one
-- transaction serialised per day by a transaction-level advisory lock. The reservation is
-- recorded granted or denied, so a retry gets the same answer; a granted one is then settled or
-- released (budget_settlements).
CREATE TABLE budget_reservations (
  id            text          PRIMARY KEY,
  day           date          NOT NULL,
  intent_id     text          NOT NULL,
  amount_usd    numeric(14,6) NOT NULL CHECK (amount_usd >= 0),
  limit_usd     numeric(14,6) NOT NULL CHECK (limit_usd >= 0),
  granted       boolean       NOT NULL,
  -- The spend settled plus reservations open just before this one, in the budget that answered.
  committed_usd numeric(14,6) NOT NULL,
  created_at    timestamptz   NOT NULL DEFAULT now(),
  agent_id      text,
  stage         text,
  -- NULL when granted; otherwise the budget that refused, whose figures committed_usd and
  -- limit_usd then are.
  denied_by     text          CHECK (denied_by IN ('day', 'agent', 'intent', 'stage'))
);
CREATE INDEX budget_reservations_day ON budget_reservations (day);
CREATE INDEX budget_reservations_intent ON budget_reservations (intent_id);
CREATE INDEX budget_reservations_agent_day ON budget_reservations (agent_id, day);

-- The end of a granted reservation, written once: settled at the real cost, or released.
CREATE TABLE budget_settlements (
  reservation_id text          PRIMARY KEY REFERENCES budget_reservations (id),
  kind           text          NOT NULL CHECK (kind IN ('settled', 'released')),
  actual_usd     numeric(14,6) NOT NULL CHECK (actual_usd >= 0),
  at             timestamptz   NOT NULL DEFAULT now(),
  -- A call whose cost could not be bounded before it ran (a command, a script) reserves its
  -- declared cap; if it then reports more, it is settled at its real cost, above the
  -- reservation, and marked so.
  overrun        boolean       NOT NULL DEFAULT false
);

-- Global controls, as history: the latest row of a control is its state.
CREATE TABLE controls (
  seq     bigserial   PRIMARY KEY,
  control text        NOT NULL CHECK (control IN ('global_stop')),
  active  boolean     NOT NULL,
  set_by  text        NOT NULL,
  reason  text        NOT NULL,
  at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX controls_latest ON controls (control, seq DESC);

-- Automation ladder (levels 0-4): snapshots of the metrics that move a scope up or down.
CREATE TABLE ladder_metrics (
  id                   uuid         PRIMARY KEY,
  recorded_at          timestamptz  NOT NULL,
  scope                text         NOT NULL DEFAULT 'global',
  level                smallint     NOT NULL CHECK (level BETWEEN 0 AND 4),
  total_runs           integer      NOT NULL CHECK (total_runs >= 0),
  successful_runs      integer      NOT NULL CHECK (successful_runs >= 0),
  false_positives      integer      NOT NULL DEFAULT 0 CHECK (false_positives >= 0),
  missed_critical_bugs integer      NOT NULL DEFAULT 0 CHECK (missed_critical_bugs >= 0),
  approval_rate        numeric(5,4) CHECK (approval_rate BETWEEN 0 AND 1),
  metadata             jsonb        NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX ladder_metrics_scope_ts ON ladder_metrics (scope, recorded_at);

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

-- The shortest retention Warden accepts is a day. The floor is an hour short of that, so that
-- clocks of the hosts that stamped the rows may differ a little.
CREATE FUNCTION warden_retention_floor() RETURNS interval LANGUAGE sql IMMUTABLE AS $$ SELECT interval '23 hours' $$;

-- Refuses every change but retention cleanup's DELETE of a row older than the floor, by the
-- time column cleanup itself goes by (each table's trigger passes its name as the argument). A
-- settlement is as old as its reservation, with which it is kept and deleted.
CREATE FUNCTION warden_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  written_at timestamptz;
BEGIN
  IF TG_OP = 'DELETE' AND current_setting('warden.retention_cleanup', true) = 'on' AND TG_NARGS = 1 THEN
    IF TG_TABLE_NAME = 'budget_settlements' THEN
      SELECT r.created_at INTO written_at FROM budget_reservations r WHERE r.id = OLD.reservation_id;
      -- Gone already: deleted by this same statement, past its own check (the foreign key lets a
      -- reservation go only together with its settlement).
      IF NOT FOUND THEN
        RETURN OLD;
      END IF;
    ELSE
      written_at := (to_jsonb(OLD) ->> TG_ARGV[0])::timestamptz;
    END IF;
    IF written_at <= now() - warden_retention_floor() THEN
      RETURN OLD;
    END IF;
    RAISE EXCEPTION 'the ledger keeps every row for at least %: this % row is from %', warden_retention_floor(), TG_TABLE_NAME, written_at
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RAISE EXCEPTION 'the ledger is append-only: % on % is not allowed', TG_OP, TG_TABLE_NAME
    USING ERRCODE = 'insufficient_privilege';
END;
$$;

DO $$
DECLARE
  t record;
BEGIN
  FOR t IN SELECT * FROM (VALUES ('safety_events', 'timestamp'), ('cost_events', 'timestamp'), ('gate_decisions', 'decided_at'),
                                 ('activity_runs', 'ended_at'), ('budget_reservations', 'created_at'), ('budget_settlements', 'at'),
                                 ('controls', 'at'), ('ladder_metrics', 'recorded_at')) AS v (tbl, col) LOOP
    EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE OR DELETE ON %I FOR EACH ROW EXECUTE FUNCTION warden_append_only(%L)',
                   t.tbl || '_append_only', t.tbl, t.col);
    EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %I FOR EACH STATEMENT EXECUTE FUNCTION warden_append_only()',
                   t.tbl || '_no_truncate', t.tbl);
  END LOOP;
END;
$$;
