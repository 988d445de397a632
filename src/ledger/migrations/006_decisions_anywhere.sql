-- Decision links: each one decides once. The web app records a link's nonce before it sends the
-- decision; a second use finds the row and is refused.
CREATE TABLE decision_links (
  nonce      text        PRIMARY KEY,
  intent_id  text        NOT NULL,
  gate       text        NOT NULL,
  approver   text        NOT NULL,
  decision   text        NOT NULL,
  used_at    timestamptz NOT NULL DEFAULT now()
);

-- A person may ask for changes (the stage before the gate runs again with their comments) or
-- approve their own edit of the document the gate shows.
ALTER TABLE gate_decisions DROP CONSTRAINT gate_decisions_decision_check;
ALTER TABLE gate_decisions ADD CONSTRAINT gate_decisions_decision_check
  CHECK (decision IN ('approve', 'reject', 'approve-with-conditions', 'defer', 'request-changes', 'approve-with-edits'));
