-- Links that only show a gate, made where no decision link can be (the worker has no link
-- secret). The ledger keeps a hash of each token (reading the ledger gives no working link) and
-- the opening of the gate it shows: the link ends when that opening closes.
CREATE TABLE gate_view_links (
  token_hash     text        PRIMARY KEY,
  intent_id      text        NOT NULL,
  gate           text        NOT NULL,
  -- the gate's requestedAt as the workflow wrote it, compared as text
  gate_opened_at text        NOT NULL,
  -- why the link cannot decide, for the page to say
  why            text        NOT NULL,
  made_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TRIGGER gate_view_links_append_only BEFORE UPDATE OR DELETE ON gate_view_links
  FOR EACH ROW EXECUTE FUNCTION warden_append_only('made_at');
CREATE TRIGGER gate_view_links_no_truncate BEFORE TRUNCATE ON gate_view_links
  FOR EACH STATEMENT EXECUTE FUNCTION warden_append_only();
