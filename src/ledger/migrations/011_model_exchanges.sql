-- What each model call through the gateway sent and got, for a later replay. Bodies are stored
-- once each, under the sha256 of their (redacted) bytes; an exchange points at its call's
-- `model_calls` row by id (no foreign key: the ledger's retention and the recording's are apart).
-- Not append-only like the ledger's decisions: a recording is evidence for replay, deleted by
-- its own retention (`worker.recording.keep`), which may be shorter than the ledger's floor.
CREATE TABLE exchange_bodies (
  hash       text        PRIMARY KEY CHECK (hash ~ '^[0-9a-f]{64}$'),
  body       text        NOT NULL,
  bytes      integer     NOT NULL CHECK (bytes >= 0),
  stored_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE model_exchanges (
  call_id       uuid        PRIMARY KEY,
  intent_id     text        NOT NULL,
  stage         text        NOT NULL,
  attempt       integer     NOT NULL CHECK (attempt >= 1),
  -- The call's place among its attempt's calls, from 1, in the order they reached the gateway.
  call_order    integer     NOT NULL CHECK (call_order >= 1),
  -- sha256 of the request normalised for matching (src/gateway/exchange.ts); null: no JSON body.
  request_key   text,
  -- The stored bodies; null when nothing was kept (the intent's recording was capped, or none came).
  request_hash  text,
  answer_hash   text,
  -- 'whole': one body; 'events': a JSON array of the server-sent events in the order they went out.
  answer_kind   text        NOT NULL CHECK (answer_kind IN ('whole', 'events')),
  status        integer     NOT NULL,
  request_bytes integer     NOT NULL CHECK (request_bytes >= 0),
  answer_bytes  integer     NOT NULL CHECK (answer_bytes >= 0),
  stored        boolean     NOT NULL,
  recorded_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX model_exchanges_intent ON model_exchanges (intent_id, stage, attempt, call_order);
CREATE INDEX model_exchanges_recorded ON model_exchanges (recorded_at);
CREATE INDEX model_exchanges_request_hash ON model_exchanges (request_hash);
CREATE INDEX model_exchanges_answer_hash ON model_exchanges (answer_hash);

-- One row per recorded intent: when its recording passed its cap, and what else a replay needs
-- (base commit, config hash, Warden's version, agent profile, CLI versions), written once.
CREATE TABLE intent_recordings (
  intent_id    text        PRIMARY KEY,
  -- What the intent's recording has stored so far (its exchanges' bodies, counted per exchange), against its cap.
  stored_bytes bigint      NOT NULL DEFAULT 0,
  capped_at    timestamptz,
  context      jsonb,
  recorded_at  timestamptz NOT NULL DEFAULT now()
);
