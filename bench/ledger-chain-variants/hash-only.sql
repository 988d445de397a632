-- `bench/ledger-chain.ts --variant hash-only`: the chain's trigger with its hashing and nothing
-- else (no head, no lock, no retry check; every row links to the genesis hash). What it costs is
-- the floor of any chain computed in the database's trigger, however it is locked. Applied to the
-- bench's throwaway database only.
ALTER TABLE safety_events DROP CONSTRAINT safety_events_chain_pos_key;
ALTER TABLE gate_decisions DROP CONSTRAINT gate_decisions_chain_pos_key;
ALTER TABLE cost_events DROP CONSTRAINT cost_events_chain_pos_key;
CREATE OR REPLACE FUNCTION warden_chain_append() RETURNS trigger LANGUAGE plpgsql SET "TimeZone" = 'UTC' AS $$
DECLARE
  content text := jsonb_strip_nulls(to_jsonb(NEW) - 'chain_pos' - 'chain_prev' - 'chain_hash')::text;
BEGIN
  NEW.chain_pos := 1;
  NEW.chain_prev := repeat('0', 64);
  NEW.chain_hash := warden_chain_link(NEW.chain_prev, 1, TG_TABLE_NAME, content);
  RETURN NEW;
END;
$$;
