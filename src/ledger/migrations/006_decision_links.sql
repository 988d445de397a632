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
