-- The ledger as tamper-evident evidence: a hash chain per intent (rows of no intent: one `system`
-- chain, keyed ''), over every safety event, gate decision and cost row. Warden's chain writer
-- (src/ledger/chain-writer.ts) hashes each row's content in Node and moves the chain's head in the
-- same statement that inserts the rows: a batch of rows takes positions chain_pos, and each of its
-- rows keeps chain_head, the head after the batch:
--   head = sha256(previous head || the batch's content hashes, in order)
-- `warden ledger verify` recomputes every head from the rows (see src/ledger/chain.ts).

ALTER TABLE safety_events ADD COLUMN chain_pos bigint, ADD COLUMN chain_head bytea;
ALTER TABLE gate_decisions ADD COLUMN chain_pos bigint, ADD COLUMN chain_head bytea;
ALTER TABLE cost_events ADD COLUMN chain_pos bigint, ADD COLUMN chain_head bytea;

-- Each chain's head and length. A chained write locks its chain's row to its commit, so writers
-- of one intent take positions one after another; writers of different intents never wait on
-- each other. A convenience and a cross-check, not evidence: verify recomputes every head.
CREATE TABLE ledger_chains (
  chain  text   PRIMARY KEY,
  head   bytea  NOT NULL,
  length bigint NOT NULL,
  -- The length the last anchor listed (see writeAnchorRow in src/ledger/chain.ts): the next lists
  -- only chains that moved since. Never set by a write.
  anchored_length bigint
);

-- When the chains began. Rows written before (recorded_at earlier) stay outside them: their
-- content hash is defined in Node, which a migration cannot run. Verify counts them apart; a row
-- outside the chains recorded after this is a break.
CREATE TABLE ledger_chain_origin (
  one        boolean     PRIMARY KEY DEFAULT true CHECK (one),
  started_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
INSERT INTO ledger_chain_origin DEFAULT VALUES;
