-- Every request an agent made through the model gateway: refused ones too, with why.
CREATE TABLE model_calls (
  id            uuid          PRIMARY KEY,
  "timestamp"   timestamptz   NOT NULL,
  intent_id     text          NOT NULL,
  stage         text          NOT NULL,
  attempt       integer       NOT NULL CHECK (attempt >= 1),
  agent_id      text          NOT NULL,
  api           text          NOT NULL CHECK (api IN ('chat', 'responses', 'messages')),
  model_id      text          NOT NULL,
  streamed      boolean       NOT NULL,
  -- The HTTP status the agent got.
  status        integer       NOT NULL,
  outcome       text          NOT NULL CHECK (outcome IN ('answered', 'refused', 'failed', 'cut')),
  refusal       text,
  input_tokens  bigint        NOT NULL CHECK (input_tokens >= 0),
  output_tokens bigint        NOT NULL CHECK (output_tokens >= 0),
  usd           numeric(14,6) NOT NULL CHECK (usd >= 0),
  -- Counted at an estimate (a cut stream, an unreadable usage), not at a reported usage.
  estimated     boolean       NOT NULL,
  latency_ms    integer       NOT NULL CHECK (latency_ms >= 0),
  recorded_at   timestamptz   NOT NULL DEFAULT now()
);
CREATE INDEX model_calls_intent_ts ON model_calls (intent_id, "timestamp");

CREATE TRIGGER model_calls_append_only BEFORE UPDATE OR DELETE ON model_calls
  FOR EACH ROW EXECUTE FUNCTION warden_append_only('timestamp');
CREATE TRIGGER model_calls_no_truncate BEFORE TRUNCATE ON model_calls
  FOR EACH STATEMENT EXECUTE FUNCTION warden_append_only();

-- A reservation whose call never reported back (its worker died mid-call) is closed at its
-- maximum when a worker finds it stale: the call may have been billed.
ALTER TABLE budget_settlements DROP CONSTRAINT budget_settlements_kind_check;
ALTER TABLE budget_settlements ADD CONSTRAINT budget_settlements_kind_check CHECK (kind IN ('settled', 'released', 'reconciled'));
