-- What a person says an intent's outcome was (`warden label`), and how each detector measured
-- against those labels (`warden eval`). Append-only like the ledger's decisions: a second label
-- of an intent is a new row, and the latest one is the intent's label; earlier ones stay as history.
CREATE TABLE intent_labels (
  id         uuid        PRIMARY KEY,
  intent_id  text        NOT NULL,
  label      text        NOT NULL CHECK (label IN ('risky', 'benign')),
  reason     text,
  labelled_by text       NOT NULL,
  -- 'label': given with `warden label`; 'gate-rejection' or 'revert': an offered label accepted
  -- with `warden label --suggest --accept`.
  source     text        NOT NULL CHECK (source IN ('label', 'gate-rejection', 'revert')),
  -- The labeller's signature when they have a key (like their gate decisions): {nonce, signedAt, signature}.
  proof      jsonb,
  labelled_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX intent_labels_intent ON intent_labels (intent_id, labelled_at);

-- One row per figure set a `warden eval` printed: a detector on the team's labelled intents
-- (set_name 'history') or on one of the shipped held-out sets, so a trend can be shown.
CREATE TABLE detector_evals (
  id          uuid         PRIMARY KEY,
  run_id      uuid         NOT NULL,
  detector    text         NOT NULL,
  set_name    text         NOT NULL,
  -- The period the labelled intents were taken from (`--since`); null: all of them.
  since       timestamptz,
  n           integer      NOT NULL CHECK (n >= 0),
  tp          integer      NOT NULL CHECK (tp >= 0),
  fp          integer      NOT NULL CHECK (fp >= 0),
  tn          integer      NOT NULL CHECK (tn >= 0),
  fn          integer      NOT NULL CHECK (fn >= 0),
  -- Null when there was no risky (recall) or no benign (specificity) case.
  recall      numeric(6,5) CHECK (recall BETWEEN 0 AND 1),
  specificity numeric(6,5) CHECK (specificity BETWEEN 0 AND 1),
  -- False negatives and false positives by id; the held-out sets' ids are not kept (not a tuning aid).
  missed      jsonb        NOT NULL DEFAULT '[]'::jsonb,
  false_alarms jsonb       NOT NULL DEFAULT '[]'::jsonb,
  -- Labelled intents left out: no recording, or no answer body kept.
  skipped     integer      NOT NULL DEFAULT 0 CHECK (skipped >= 0),
  evaluated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX detector_evals_detector_ts ON detector_evals (detector, set_name, evaluated_at);

CREATE TRIGGER intent_labels_append_only BEFORE UPDATE OR DELETE ON intent_labels
  FOR EACH ROW EXECUTE FUNCTION warden_append_only('labelled_at');
CREATE TRIGGER intent_labels_no_truncate BEFORE TRUNCATE ON intent_labels
  FOR EACH STATEMENT EXECUTE FUNCTION warden_append_only();
CREATE TRIGGER detector_evals_append_only BEFORE UPDATE OR DELETE ON detector_evals
  FOR EACH ROW EXECUTE FUNCTION warden_append_only('evaluated_at');
CREATE TRIGGER detector_evals_no_truncate BEFORE TRUNCATE ON detector_evals
  FOR EACH STATEMENT EXECUTE FUNCTION warden_append_only();
