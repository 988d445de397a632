import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type { DetectorFigures } from '../safety/detector-figures';
import { JUDGE_STAGE_SUFFIX } from '../shared/scope-judge';
import { inTransaction } from './transaction';

/** What a person says an intent's outcome was. */
export type OutcomeLabel = 'risky' | 'benign';
/** Where a label came from: given with `warden label`, or an offered one accepted. */
export type LabelSource = 'label' | 'gate-rejection' | 'revert';

/** The labeller's signature over the label, when they have a key (as their gate decisions are signed). */
export interface LabelProof {
  readonly nonce: string;
  readonly signedAt: string;
  readonly signature: string;
  /** The public key it verifies with, as the config writes it. */
  readonly publicKey: string;
}

export interface LabelInput {
  readonly intentId: string;
  readonly label: OutcomeLabel;
  readonly reason?: string;
  readonly by: string;
  readonly source: LabelSource;
  readonly proof?: LabelProof;
}

/** A label as the ledger keeps it, and whether the intent has a recording. */
export interface IntentLabel extends LabelInput {
  readonly at: Date;
  /** Whether any model exchange of the intent was recorded. */
  readonly recorded: boolean;
}

/** A label the ledger suggests: a gate rejected with a reason, or a merged intent reverted. */
export interface OfferedLabel {
  readonly intentId: string;
  readonly label: OutcomeLabel;
  readonly source: Exclude<LabelSource, 'label'>;
  readonly reason: string;
  readonly at: Date;
}

/** One figure set of a `warden eval` run. */
export interface EvalFigures extends DetectorFigures {
  readonly detector: string;
  /** `history` (the team's labelled intents) or a shipped held-out set's name. */
  readonly set: string;
  readonly skipped: number;
}

export interface EvalRecord extends EvalFigures {
  readonly runId: string;
  readonly since?: Date;
  readonly at: Date;
}

/**
 * When an intent happened, for `--since`: its recording's start, else its INTENT_STARTED, else
 * its latest label. Used by the queries below over a relation aliased `i` with an `intent_id`.
 */
const INTENT_TIME = `coalesce((SELECT r.recorded_at FROM intent_recordings r WHERE r.intent_id = i.intent_id),
                              (SELECT min(s."timestamp") FROM safety_events s WHERE s.intent_id = i.intent_id AND s.event_type = 'INTENT_STARTED'))`;

/**
 * Outcome labels of intents and the figures of detectors measured on them, in the ledger's
 * database (migration 012): `intent_labels` (append-only; an intent's latest label that counts is its label) and
 * `detector_evals`, one row per figure set per `warden eval`.
 */
export class LabelStore {
  constructor(private readonly pool: pg.Pool) {}

  /** Whether the ledger knows the intent: it started, or something of it was recorded. */
  async intentKnown(intentId: string): Promise<boolean> {
    const { rows } = await this.pool.query<{ known: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM safety_events WHERE intent_id = $1 AND event_type = 'INTENT_STARTED')
           OR EXISTS (SELECT 1 FROM intent_recordings WHERE intent_id = $1)
           OR EXISTS (SELECT 1 FROM model_exchanges WHERE intent_id = $1) AS known`,
      [intentId],
    );
    return rows[0]!.known;
  }

  async addLabel(input: LabelInput): Promise<void> {
    await this.pool.query(`INSERT INTO intent_labels (id, intent_id, label, reason, labelled_by, source, proof) VALUES ($1, $2, $3, $4, $5, $6, $7)`, [
      randomUUID(),
      input.intentId,
      input.label,
      input.reason ?? null,
      input.by,
      input.source,
      input.proof ? JSON.stringify(input.proof) : null,
    ]);
  }

  /**
   * Every label of the intents that happened at or after `since`: by intent id, newest first
   * (the first that counts is the intent's label).
   */
  async labels(since?: Date): Promise<IntentLabel[]> {
    const { rows } = await this.pool.query<{
      intent_id: string;
      label: OutcomeLabel;
      reason: string | null;
      labelled_by: string;
      source: LabelSource;
      proof: LabelProof | null;
      labelled_at: Date;
      recorded: boolean;
    }>(
      `SELECT * FROM (
         SELECT i.intent_id, i.label, i.reason, i.labelled_by, i.source, i.proof, i.labelled_at, i.id,
                EXISTS (SELECT 1 FROM model_exchanges e WHERE e.intent_id = i.intent_id) AS recorded,
                coalesce(${INTENT_TIME}, max(i.labelled_at) OVER (PARTITION BY i.intent_id)) AS happened_at
           FROM intent_labels i
       ) labelled
       WHERE $1::timestamptz IS NULL OR happened_at >= $1
       ORDER BY intent_id, labelled_at DESC, id`,
      [since ?? null],
    );
    return rows.map((r) => ({
      intentId: r.intent_id,
      label: r.label,
      ...(r.reason === null ? {} : { reason: r.reason }),
      by: r.labelled_by,
      source: r.source,
      ...(r.proof ? { proof: r.proof } : {}),
      at: r.labelled_at,
      recorded: r.recorded,
    }));
  }

  /** Intents with a recording, started at or after `since`, that have no label. */
  async unlabelledRecorded(since?: Date): Promise<string[]> {
    const { rows } = await this.pool.query<{ intent_id: string }>(
      `SELECT DISTINCT i.intent_id FROM model_exchanges i
        WHERE NOT EXISTS (SELECT 1 FROM intent_labels l WHERE l.intent_id = i.intent_id)
          AND ($1::timestamptz IS NULL OR ${INTENT_TIME} >= $1)
        ORDER BY i.intent_id`,
      [since ?? null],
    );
    return rows.map((r) => r.intent_id);
  }

  /**
   * The labels the ledger offers for intents with none yet: a gate rejected with a reason (risky:
   * a person stopped it), and a merged intent whose revert merged (risky: it had to be undone).
   * One per intent, the earliest; at or after `since` when given.
   */
  async offeredLabels(since?: Date): Promise<OfferedLabel[]> {
    const { rows } = await this.pool.query<{ intent_id: string; source: OfferedLabel['source']; reason: string; at: Date }>(
      `SELECT DISTINCT ON (intent_id) intent_id, source, reason, at FROM (
         SELECT g.intent_id, 'gate-rejection' AS source, 'the ' || g.gate || ' gate was rejected by ' || g.decided_by || ': ' || g.reason AS reason, g.decided_at AS at
           FROM gate_decisions g
          WHERE g.decision = 'reject' AND g.timed_out = false AND coalesce(btrim(g.reason), '') <> ''
         UNION ALL
         SELECT t.metadata->>'revertOf', 'revert', 'reverted by intent ' || t.intent_id || ' (merged)', m."timestamp"
           FROM safety_events t
           JOIN safety_events m ON m.intent_id = t.intent_id AND m.event_type = 'INTENT_MERGED'
          WHERE t.event_type IN ('TESTS_PASSED', 'TESTS_FAILED') AND t.metadata ? 'revertOf'
       ) offered
       WHERE NOT EXISTS (SELECT 1 FROM intent_labels l WHERE l.intent_id = offered.intent_id)
         AND ($1::timestamptz IS NULL OR at >= $1)
       ORDER BY intent_id, at`,
      [since ?? null],
    );
    return rows.map((r) => ({ intentId: r.intent_id, label: 'risky', source: r.source, reason: r.reason, at: r.at }));
  }

  /** What the intent was asked to do, as its INTENT_STARTED says: the goal and declared paths. */
  async intentScope(intentId: string): Promise<{ readonly goal?: string; readonly paths?: readonly string[] }> {
    const { rows } = await this.pool.query<{ reason: string; paths: unknown }>(
      `SELECT reason, metadata->'paths' AS paths FROM safety_events WHERE intent_id = $1 AND event_type = 'INTENT_STARTED' ORDER BY "timestamp" LIMIT 1`,
      [intentId],
    );
    const row = rows[0];
    if (!row) return {};
    const paths = Array.isArray(row.paths) ? row.paths.filter((p): p is string => typeof p === 'string') : [];
    return { ...(row.reason ? { goal: row.reason } : {}), ...(paths.length > 0 ? { paths } : {}) };
  }

  /**
   * How many of the intent's agent answers the gateway's screening stopped whole (a CRITICAL
   * cascade): the agent got a refusal instead, and the recording kept that, not the answer's text.
   */
  async screenedAnswers(intentId: string): Promise<number> {
    const { rows } = await this.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM model_calls WHERE intent_id = $1 AND refusal LIKE 'screened:%' AND right(stage, $2) <> $3`, [
      intentId,
      JUDGE_STAGE_SUFFIX.length,
      JUDGE_STAGE_SUFFIX,
    ]);
    return rows[0]!.n;
  }

  /** Writes one `warden eval` run's figure sets under one run id; returns it. */
  async recordEval(sets: readonly EvalFigures[], since?: Date): Promise<string> {
    const runId = randomUUID();
    // A run's figure sets go in together: a trend never shows half a run.
    await inTransaction(this.pool, async (client) => {
      for (const f of sets) await client.query(
        `INSERT INTO detector_evals (id, run_id, detector, set_name, since, n, tp, fp, tn, fn, recall, specificity, missed, false_alarms, skipped)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
        [randomUUID(), runId, f.detector, f.set, since ?? null, f.n, f.tp, f.fp, f.tn, f.fn, f.recall ?? null, f.specificity ?? null, JSON.stringify(f.missed), JSON.stringify(f.falseAlarms), f.skipped],
      );
    });
    return runId;
  }

  /** Earlier runs' figure sets, oldest first; one detector's when named. */
  async evalHistory(detector?: string): Promise<EvalRecord[]> {
    const { rows } = await this.pool.query<{
      run_id: string;
      detector: string;
      set_name: string;
      since: Date | null;
      n: number;
      tp: number;
      fp: number;
      tn: number;
      fn: number;
      recall: string | null;
      specificity: string | null;
      missed: string[];
      false_alarms: string[];
      skipped: number;
      evaluated_at: Date;
    }>(`SELECT * FROM detector_evals WHERE $1::text IS NULL OR detector = $1 ORDER BY evaluated_at, set_name <> 'history', set_name`, [detector ?? null]);
    return rows.map((r) => ({
      runId: r.run_id,
      detector: r.detector,
      set: r.set_name,
      ...(r.since ? { since: r.since } : {}),
      n: r.n,
      tp: r.tp,
      fp: r.fp,
      tn: r.tn,
      fn: r.fn,
      ...(r.recall === null ? {} : { recall: Number(r.recall) }),
      ...(r.specificity === null ? {} : { specificity: Number(r.specificity) }),
      missed: r.missed,
      falseAlarms: r.false_alarms,
      skipped: r.skipped,
      at: r.evaluated_at,
    }));
  }
}
