-- The ledger as tamper-evident evidence: every safety event, gate decision and cost row carries
-- its place in one global hash chain (chain_pos), the hash of the row before it (chain_prev) and
-- its own hash (chain_hash) over its content and chain_prev. An edit, a deletion, an insertion or
-- a reordering breaks the chain from that row on; `warden ledger verify` walks it. See
-- src/ledger/chain.ts for why the chain is one and global.

ALTER TABLE safety_events ADD COLUMN chain_pos bigint UNIQUE, ADD COLUMN chain_prev text, ADD COLUMN chain_hash text;
ALTER TABLE gate_decisions ADD COLUMN chain_pos bigint UNIQUE, ADD COLUMN chain_prev text, ADD COLUMN chain_hash text;
ALTER TABLE cost_events ADD COLUMN chain_pos bigint UNIQUE, ADD COLUMN chain_prev text, ADD COLUMN chain_hash text;

-- The chain's head: the last position and its hash. Its one row is locked by every chained insert
-- until that insert's transaction ends, so concurrent writers take positions one after another
-- and never fork the chain. It is a convenience, not evidence: verify recomputes every hash.
CREATE TABLE ledger_chain_head (
  one  boolean PRIMARY KEY DEFAULT true CHECK (one),
  pos  bigint  NOT NULL,
  hash text    NOT NULL,
  -- The hash before the last link: what the last insert linked to.
  prev text    NOT NULL
);

-- What retention cuts is summarised in the chain itself, by a LEDGER_CHECKPOINT safety event
-- (see recordRetentionCheckpoint in src/ledger/chain.ts).

-- A row's content as the chain hashes it: the row as JSON without its chain columns and without
-- NULLs (so a nullable column added later leaves old rows' content as it was; a NULL inside a
-- JSON column goes too), with timestamps in UTC whatever the session's time zone. The chain's
-- trigger computes the same text inline (one function call less per insert).
CREATE FUNCTION warden_chain_content(r anyelement) RETURNS text LANGUAGE sql STABLE SET "TimeZone" = 'UTC' AS $$
  SELECT jsonb_strip_nulls(to_jsonb(r) - 'chain_pos' - 'chain_prev' - 'chain_hash')::text
$$;

-- A link: sha256 over the previous hash, the position, the table and the content's sha256.
CREATE FUNCTION warden_chain_link(prev text, pos bigint, tbl text, content text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT encode(sha256(convert_to(prev || ':' || pos::text || ':' || tbl || ':' || encode(sha256(convert_to(content, 'UTF8')), 'hex'), 'UTF8')), 'hex')
$$;

-- Appends the new row to the chain, in the insert's own transaction: one statement moves the
-- head (and locks it to commit). A row whose id (for a cost row: or reservation) is there
-- already is skipped, as ON CONFLICT DO NOTHING would skip it later, and the head is put back,
-- so that a retried write does not move the head past a row that was never written.
CREATE FUNCTION warden_chain_append() RETURNS trigger LANGUAGE plpgsql SET "TimeZone" = 'UTC' AS $$
DECLARE
  content   text := jsonb_strip_nulls(to_jsonb(NEW) - 'chain_pos' - 'chain_prev' - 'chain_hash')::text;
  duplicate boolean;
BEGIN
  UPDATE ledger_chain_head SET prev = hash, pos = pos + 1, hash = warden_chain_link(hash, pos + 1, TG_TABLE_NAME, content)
    RETURNING pos, prev, hash INTO NEW.chain_pos, NEW.chain_prev, NEW.chain_hash;
  IF TG_TABLE_NAME = 'safety_events' THEN
    duplicate := EXISTS (SELECT 1 FROM safety_events WHERE id = NEW.id);
  ELSIF TG_TABLE_NAME = 'gate_decisions' THEN
    duplicate := EXISTS (SELECT 1 FROM gate_decisions WHERE id = NEW.id);
  ELSE
    duplicate := EXISTS (SELECT 1 FROM cost_events WHERE id = NEW.id OR (NEW.reservation_id IS NOT NULL AND reservation_id = NEW.reservation_id));
  END IF;
  IF duplicate THEN
    UPDATE ledger_chain_head SET pos = pos - 1, hash = prev;
    RETURN NULL;
  END IF;
  RETURN NEW;
END;
$$;

-- Rows written before this migration join the chain in the order the ledger knows for them:
-- seq (rows from before it was numbered first), then their clocks.
ALTER TABLE safety_events DISABLE TRIGGER safety_events_append_only;
ALTER TABLE gate_decisions DISABLE TRIGGER gate_decisions_append_only;
ALTER TABLE cost_events DISABLE TRIGGER cost_events_append_only;
DO $$
DECLARE
  r    record;
  pos  bigint := 0;
  prev text := repeat('0', 64);
  hash text;
BEGIN
  FOR r IN
    SELECT * FROM (
      SELECT 'safety_events' AS tbl, id, seq, "timestamp" AS at, recorded_at, warden_chain_content(s) AS content FROM safety_events s
      UNION ALL
      SELECT 'gate_decisions', id, seq, decided_at, recorded_at, warden_chain_content(g) FROM gate_decisions g
      UNION ALL
      SELECT 'cost_events', id, seq, "timestamp", recorded_at, warden_chain_content(c) FROM cost_events c
    ) AS existing
    ORDER BY seq NULLS FIRST, at, recorded_at, tbl, id
  LOOP
    pos := pos + 1;
    hash := warden_chain_link(prev, pos, r.tbl, r.content);
    EXECUTE format('UPDATE %I SET chain_pos = $1, chain_prev = $2, chain_hash = $3 WHERE id = $4', r.tbl) USING pos, prev, hash, r.id;
    prev := hash;
  END LOOP;
  INSERT INTO ledger_chain_head (pos, hash, prev) VALUES (pos, prev, '');
END;
$$;
ALTER TABLE safety_events ENABLE TRIGGER safety_events_append_only;
ALTER TABLE gate_decisions ENABLE TRIGGER gate_decisions_append_only;
ALTER TABLE cost_events ENABLE TRIGGER cost_events_append_only;

CREATE TRIGGER safety_events_chain BEFORE INSERT ON safety_events FOR EACH ROW EXECUTE FUNCTION warden_chain_append();
CREATE TRIGGER gate_decisions_chain BEFORE INSERT ON gate_decisions FOR EACH ROW EXECUTE FUNCTION warden_chain_append();
CREATE TRIGGER cost_events_chain BEFORE INSERT ON cost_events FOR EACH ROW EXECUTE FUNCTION warden_chain_append();
