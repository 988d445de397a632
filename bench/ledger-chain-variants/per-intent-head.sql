-- `bench/ledger-chain.ts --variant per-intent-head`: the chain's trigger as it would be with one
-- chain per intent (rows of no intent in a chain of their own), each with its own head row moved
-- by one upsert, so writers of different intents never wait on each other. Applied to the bench's
-- throwaway database only: verify and export do not know per-intent positions.
ALTER TABLE safety_events DROP CONSTRAINT safety_events_chain_pos_key;
ALTER TABLE gate_decisions DROP CONSTRAINT gate_decisions_chain_pos_key;
ALTER TABLE cost_events DROP CONSTRAINT cost_events_chain_pos_key;
CREATE TABLE ledger_chain_heads (chain text PRIMARY KEY, pos bigint NOT NULL, hash text NOT NULL, prev text NOT NULL);
CREATE OR REPLACE FUNCTION warden_chain_append() RETURNS trigger LANGUAGE plpgsql SET "TimeZone" = 'UTC' AS $$
DECLARE
  content   text := jsonb_strip_nulls(to_jsonb(NEW) - 'chain_pos' - 'chain_prev' - 'chain_hash')::text;
  digest    text := encode(sha256(convert_to(content, 'UTF8')), 'hex');
  duplicate boolean;
BEGIN
  -- The head first: it serialises writers of one intent, so a retried row sees the first one.
  INSERT INTO ledger_chain_heads AS h (chain, pos, prev, hash)
    VALUES (coalesce(NEW.intent_id, ''), 1, repeat('0', 64), encode(sha256(convert_to(repeat('0', 64) || ':1:' || TG_TABLE_NAME || ':' || digest, 'UTF8')), 'hex'))
    ON CONFLICT (chain) DO UPDATE SET prev = h.hash, pos = h.pos + 1,
      hash = encode(sha256(convert_to(h.hash || ':' || (h.pos + 1)::text || ':' || TG_TABLE_NAME || ':' || digest, 'UTF8')), 'hex')
    RETURNING pos, prev, hash INTO NEW.chain_pos, NEW.chain_prev, NEW.chain_hash;
  IF TG_TABLE_NAME = 'safety_events' THEN
    duplicate := EXISTS (SELECT 1 FROM safety_events WHERE id = NEW.id);
  ELSIF TG_TABLE_NAME = 'gate_decisions' THEN
    duplicate := EXISTS (SELECT 1 FROM gate_decisions WHERE id = NEW.id);
  ELSE
    duplicate := EXISTS (SELECT 1 FROM cost_events WHERE id = NEW.id OR (NEW.reservation_id IS NOT NULL AND reservation_id = NEW.reservation_id));
  END IF;
  IF duplicate THEN
    UPDATE ledger_chain_heads SET pos = pos - 1, hash = prev WHERE chain = coalesce(NEW.intent_id, '');
    RETURN NULL;
  END IF;
  RETURN NEW;
END;
$$;
