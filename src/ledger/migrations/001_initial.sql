-- Warden's ledger. Every table is append-only (the seeds: "Ledger is append-only (never
-- modified)"): the triggers at the end refuse UPDATE, TRUNCATE, and DELETE outside retention
-- cleanup, which sets warden.retention_cleanup for its own transaction.
-- Money is NUMERIC(14,6): exact to a millionth of a dollar, never a float.

-- ADR 0002's SafetyEvent: one row per safety decision, written once (id is deterministic).
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

-- Per-day budget: a paid call first reserves its maximum cost (granted or denied, recorded
-- either way so a retry gets the same answer), then settles or releases it (budget_settlements).
-- Reservations are serialised per day by a transaction-level advisory lock.
CREATE TABLE budget_reservations (
  id            text          PRIMARY KEY,
  day           date          NOT NULL,
  intent_id     text          NOT NULL,
  amount_usd    numeric(14,6) NOT NULL CHECK (amount_usd >= 0),
  limit_usd     numeric(14,6) NOT NULL CHECK (limit_usd >= 0),
  granted       boolean       NOT NULL,
  -- The day's settled spend plus open reservations just before this one: the answer given.
  committed_usd numeric(14,6) NOT NULL,
  created_at    timestamptz   NOT NULL DEFAULT now()
);
CREATE INDEX budget_reservations_day ON budget_reservations (day);

-- The end of a granted reservation, written once: settled at the real cost, or released.
CREATE TABLE budget_settlements (
  reservation_id text          PRIMARY KEY REFERENCES budget_reservations (id),
  kind           text          NOT NULL CHECK (kind IN ('settled', 'released')),
  actual_usd     numeric(14,6) NOT NULL CHECK (actual_usd >= 0),
  at             timestamptz   NOT NULL DEFAULT now()
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

CREATE FUNCTION warden_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' AND current_setting('warden.retention_cleanup', true) = 'on' THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'the ledger is append-only: % on % is not allowed', TG_OP, TG_TABLE_NAME
    USING ERRCODE = 'insufficient_privilege';
END;
$$;

DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['safety_events', 'cost_events', 'gate_decisions', 'budget_reservations',
                           'budget_settlements', 'controls', 'ladder_metrics'] LOOP
    EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE OR DELETE ON %I FOR EACH ROW EXECUTE FUNCTION warden_append_only()',
                   t || '_append_only', t);
    EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %I FOR EACH STATEMENT EXECUTE FUNCTION warden_append_only()',
                   t || '_no_truncate', t);
  END LOOP;
END;
$$;
