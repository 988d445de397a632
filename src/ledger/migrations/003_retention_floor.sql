-- Retention cleanup may delete only rows past the shortest retention Warden accepts (1 day).
-- Until now the trigger let any DELETE through once a session set warden.retention_cleanup, so
-- any client could delete today's rows that way. Now the trigger also checks the row's age, by
-- the time column cleanup itself goes by (given to each trigger as its argument); a settlement is
-- as old as its reservation, with which it is kept and deleted. The floor is an hour short of a
-- day, so that clocks of the hosts that stamped the rows may differ a little.

CREATE FUNCTION warden_retention_floor() RETURNS interval LANGUAGE sql IMMUTABLE AS $$ SELECT interval '23 hours' $$;

CREATE OR REPLACE FUNCTION warden_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  written_at timestamptz;
BEGIN
  IF TG_OP = 'DELETE' AND current_setting('warden.retention_cleanup', true) = 'on' AND TG_NARGS = 1 THEN
    IF TG_TABLE_NAME = 'budget_settlements' THEN
      SELECT r.created_at INTO written_at FROM budget_reservations r WHERE r.id = OLD.reservation_id;
      -- Gone already: deleted by this same statement, past its own check (the foreign key lets a
      -- reservation go only together with its settlement).
      IF NOT FOUND THEN
        RETURN OLD;
      END IF;
    ELSE
      written_at := (to_jsonb(OLD) ->> TG_ARGV[0])::timestamptz;
    END IF;
    IF written_at <= now() - warden_retention_floor() THEN
      RETURN OLD;
    END IF;
    RAISE EXCEPTION 'the ledger keeps every row for at least %: this % row is from %', warden_retention_floor(), TG_TABLE_NAME, written_at
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RAISE EXCEPTION 'the ledger is append-only: % on % is not allowed', TG_OP, TG_TABLE_NAME
    USING ERRCODE = 'insufficient_privilege';
END;
$$;

DO $$
DECLARE
  t record;
BEGIN
  FOR t IN SELECT * FROM (VALUES ('safety_events', 'timestamp'), ('cost_events', 'timestamp'), ('gate_decisions', 'decided_at'),
                                 ('activity_runs', 'ended_at'), ('budget_reservations', 'created_at'), ('budget_settlements', 'at'),
                                 ('controls', 'at'), ('ladder_metrics', 'recorded_at')) AS v (tbl, col) LOOP
    EXECUTE format('DROP TRIGGER %I ON %I', t.tbl || '_append_only', t.tbl);
    EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE OR DELETE ON %I FOR EACH ROW EXECUTE FUNCTION warden_append_only(%L)',
                   t.tbl || '_append_only', t.tbl, t.col);
  END LOOP;
END;
$$;
