-- Notifications: the ledger's safety_events are the outbox. A worker's dispatcher starts one
-- delivery workflow per notifiable event and records it here; an event without a row is still
-- to be told (after a crash too). Events recorded before this migration are never told.
CREATE TABLE notification_dispatches (
  event_id    uuid        PRIMARY KEY,
  -- NULL when nobody was to be told (no channel takes the event)
  workflow_id text,
  at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE notification_epoch (
  at timestamptz NOT NULL
);
INSERT INTO notification_epoch (at) VALUES (now());

CREATE INDEX safety_events_type_recorded ON safety_events (event_type, recorded_at);

-- A delivery that failed its last attempt: what was not told, to whom, and why.
CREATE TABLE notification_dead_letters (
  delivery_id text        PRIMARY KEY,
  event_id    uuid        NOT NULL,
  intent_id   text,
  kind        text        NOT NULL,
  channel     text        NOT NULL,
  attempts    integer     NOT NULL,
  error       text        NOT NULL,
  at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notification_dead_letters_intent ON notification_dead_letters (intent_id, at);
