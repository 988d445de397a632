import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { inTransaction } from './transaction';
import { writeChained } from './chain-writer';
import { safetyEventRow } from './chained-rows';
import { SafetyEventSchema } from './types';
import { applyRun, EMPTY_METRICS, FAILURES_BEFORE_DROP, failingRepo, nextLevel, type LadderLevel, type LadderMetrics, type LadderRun } from '../shared/ladder';

/** Where an agent profile stands on the automation ladder. */
export interface LadderState {
  readonly scope: string;
  readonly level: LadderLevel;
  /** A person pinned the level: runs still count, but the level does not move. */
  readonly pinned: boolean;
  readonly metrics: LadderMetrics;
  /** When the latest snapshot was written; absent before the first one. */
  readonly recordedAt?: Date;
}

/** Where a scope starts before anything is recorded, and whether it may climb (from the config). */
export interface LadderDefaults {
  readonly level: LadderLevel;
  readonly allowLevelUp: boolean;
}

interface SnapshotRow {
  id: string;
  recorded_at: Date;
  level: number;
  total_runs: number;
  successful_runs: number;
  false_positives: number;
  missed_critical_bugs: number;
  approval_rate: string | null;
  metadata: { pinned?: boolean; failureStreaks?: Record<string, number> };
}

/**
 * The automation ladder in the ledger: `ladder_metrics` is append-only, one snapshot per run or
 * per change a person makes; the latest snapshot of a scope is its state. Each change happens
 * in a transaction holding the scope's advisory lock, so two intents finishing at once count
 * both; a run is recorded under an id made from its workflow run, so a retry counts it once.
 */
export class LadderStore {
  constructor(private readonly pool: pg.Pool) {}

  async state(scope: string, defaults: LadderDefaults): Promise<LadderState> {
    const { rows } = await this.pool.query<SnapshotRow>(
      `SELECT * FROM ladder_metrics WHERE scope = $1 ORDER BY recorded_at DESC, id DESC LIMIT 1`,
      [scope],
    );
    return toState(scope, rows[0], defaults);
  }

  /** Every scope with a snapshot, latest state each. */
  async scopes(defaults: LadderDefaults): Promise<LadderState[]> {
    const { rows } = await this.pool.query<SnapshotRow & { scope: string }>(
      `SELECT DISTINCT ON (scope) * FROM ladder_metrics ORDER BY scope, recorded_at DESC, id DESC`,
    );
    return rows.map((row) => toState(row.scope, row, defaults));
  }

  /**
   * Counts one finished intent: new metrics, and the level they lead to (up when the next
   * level's requirements hold, down after a failed or rejected run). A level change is also a
   * LADDER_LEVEL_CHANGED safety event. Recording the same `id` again changes nothing.
   */
  async recordRun(input: { id: string; scope: string; intentId: string; run: LadderRun; defaults: LadderDefaults }): Promise<{ before: LadderState; after: LadderState; recorded: boolean }> {
    return this.locked(input.scope, async (client) => {
      const before = await this.latest(client, input.scope, input.defaults);
      const seen = await client.query(`SELECT 1 FROM ladder_metrics WHERE id = $1`, [input.id]);
      if (seen.rowCount) return { before, after: before, recorded: false };
      let metrics = applyRun(before.metrics, input.run);
      const level = nextLevel(before.level, metrics, input.run, { allowLevelUp: input.defaults.allowLevelUp, pinned: before.pinned });
      const repo = failingRepo(metrics, input.run);
      // The streak that dropped the level is spent: the next drop takes as many failures again.
      if (repo !== undefined && level < before.level) metrics = { ...metrics, failureStreaks: Object.fromEntries(Object.entries(metrics.failureStreaks ?? {}).filter(([r]) => r !== repo)) };
      const after = await this.insert(client, { id: input.id, scope: input.scope, level, pinned: before.pinned, metrics, metadata: { intentId: input.intentId, run: input.run } });
      if (level !== before.level) {
        const up = level > before.level;
        const why = input.run.humanApproved === false ? 'was rejected by a person' : (input.run.escapeAttempts ?? 0) > 0 ? `tried ${input.run.escapeAttempts} thing(s) its sandbox stopped (ESCAPE_ATTEMPTED)` : repo !== undefined ? `is the ${FAILURES_BEFORE_DROP}rd failed intent in a row on ${repo}` : 'failed';
        await this.levelEvent(client, {
          scope: input.scope,
          intentId: input.intentId,
          from: before.level,
          to: level,
          reason: up ? `${input.scope} climbed to L${level}: the level's requirements hold after ${metrics.totalRuns} runs` : `${input.scope} dropped to L${level}: intent ${input.intentId} ${why}`,
          ...(up
            ? {}
            : {
                suggestion: `Look at why it failed (warden audit ${input.intentId}); once the cause is fixed, restore the level with: warden ladder set ${before.level} --agent ${input.scope.replace(/^agent:/, '')} --no-pin --reason "…"`,
              }),
          ...(repo !== undefined ? { repo } : {}),
        });
      }
      return { before, after, recorded: true };
    });
  }

  /**
   * A person reports a critical bug that review missed in an intent of this profile (found after
   * the merge): it counts against the next level's requirements and drops the level one step
   * (trust degradation), unless pinned.
   */
  async recordMissedBug(input: { scope: string; intentId: string; by: string; reason: string; defaults: LadderDefaults }): Promise<LadderState> {
    return this.locked(input.scope, async (client) => {
      const before = await this.latest(client, input.scope, input.defaults);
      const metrics = { ...before.metrics, missedCriticalBugs: before.metrics.missedCriticalBugs + 1 };
      const level = before.pinned ? before.level : (Math.max(0, before.level - 1) as LadderLevel);
      const after = await this.insert(client, { id: randomUUID(), scope: input.scope, level, pinned: before.pinned, metrics, metadata: { missedBug: { intentId: input.intentId, by: input.by, reason: input.reason } } });
      if (level !== before.level) {
        await this.levelEvent(client, {
          scope: input.scope,
          intentId: input.intentId,
          from: before.level,
          to: level,
          reason: `${input.scope} dropped to L${level}: ${input.by} reported a critical bug review missed in ${input.intentId}: ${input.reason}`,
          by: input.by,
        });
      }
      return after;
    });
  }

  /** A person sets the level (`pinned` keeps it there until unpinned); recorded as an event. */
  async setLevel(input: { scope: string; level: LadderLevel; pinned: boolean; by: string; reason?: string; defaults: LadderDefaults }): Promise<LadderState> {
    return this.locked(input.scope, async (client) => {
      const before = await this.latest(client, input.scope, input.defaults);
      const after = await this.insert(client, {
        id: randomUUID(),
        scope: input.scope,
        level: input.level,
        pinned: input.pinned,
        metrics: before.metrics,
        metadata: { setBy: input.by, reason: input.reason ?? null },
      });
      await this.levelEvent(client, {
        scope: input.scope,
        from: before.level,
        to: input.level,
        reason: `${input.by} ${input.pinned ? 'pinned' : 'set'} ${input.scope} at L${input.level}${input.reason ? `: ${input.reason}` : ''}`,
        by: input.by,
      });
      return after;
    });
  }

  private async latest(client: pg.PoolClient, scope: string, defaults: LadderDefaults): Promise<LadderState> {
    const { rows } = await client.query<SnapshotRow>(`SELECT * FROM ladder_metrics WHERE scope = $1 ORDER BY recorded_at DESC, id DESC LIMIT 1`, [scope]);
    return toState(scope, rows[0], defaults);
  }

  private async insert(
    client: pg.PoolClient,
    row: { id: string; scope: string; level: LadderLevel; pinned: boolean; metrics: LadderMetrics; metadata: Record<string, unknown> },
  ): Promise<LadderState> {
    // clock_timestamp(), not now(): snapshots in one transaction must still order.
    const { rows } = await client.query<{ recorded_at: Date }>(
      `INSERT INTO ladder_metrics (id, recorded_at, scope, level, total_runs, successful_runs, false_positives, missed_critical_bugs, approval_rate, metadata)
       VALUES ($1, clock_timestamp(), $2, $3, $4, $5, $6, $7, $8, $9) RETURNING recorded_at`,
      [
        row.id,
        row.scope,
        row.level,
        row.metrics.totalRuns,
        row.metrics.successfulRuns,
        row.metrics.falsePositives,
        row.metrics.missedCriticalBugs,
        row.metrics.approvalRate.toFixed(4),
        JSON.stringify({ ...row.metadata, pinned: row.pinned, ...(row.metrics.failureStreaks ? { failureStreaks: row.metrics.failureStreaks } : {}) }),
      ],
    );
    return { scope: row.scope, level: row.level, pinned: row.pinned, metrics: { ...row.metrics, approvalRate: Number(row.metrics.approvalRate.toFixed(4)) }, recordedAt: rows[0]!.recorded_at };
  }

  private async levelEvent(client: pg.PoolClient, e: { scope: string; intentId?: string; from: number; to: number; reason: string; by?: string; suggestion?: string; repo?: string }): Promise<void> {
    const event = SafetyEventSchema.parse({
      id: randomUUID(),
      timestamp: new Date(),
      eventType: 'LADDER_LEVEL_CHANGED',
      intentId: e.intentId,
      agentId: e.scope.replace(/^agent:/, ''),
      reason: e.reason,
      suggestion: e.suggestion,
      metadata: { scope: e.scope, from: e.from, to: e.to, by: e.by ?? null, ...(e.repo !== undefined ? { repo: e.repo } : {}) },
      severity: e.to < e.from ? 'medium' : 'info',
    });
    await writeChained(client, [safetyEventRow(event)]);
  }

  private async locked<T>(scope: string, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return inTransaction(this.pool, async (client) => {
      await client.query(`SELECT pg_advisory_xact_lock(hashtext('ladder:' || $1))`, [scope]);
      return fn(client);
    });
  }
}

function toState(scope: string, row: SnapshotRow | undefined, defaults: LadderDefaults): LadderState {
  if (!row) return { scope, level: defaults.level, pinned: false, metrics: EMPTY_METRICS };
  return {
    scope,
    level: row.level as LadderLevel,
    pinned: row.metadata?.pinned === true,
    metrics: {
      totalRuns: row.total_runs,
      successfulRuns: row.successful_runs,
      falsePositives: row.false_positives,
      missedCriticalBugs: row.missed_critical_bugs,
      approvalRate: row.approval_rate === null ? 0 : Number(row.approval_rate),
      ...(row.metadata?.failureStreaks ? { failureStreaks: row.metadata.failureStreaks } : {}),
    },
    recordedAt: row.recorded_at,
  };
}
