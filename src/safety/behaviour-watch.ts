/**
 * NOT workflow-safe: hashes with node:crypto and reads the ledger.
 *
 * The worker's behaviour monitor (one per worker process, fed by the activity interceptor): every
 * attempt of every agent call — Temporal's retries included — and every circuit transition, for
 * every intent the worker runs. Baselines of cost and latency per stage and agent start from the
 * ledger's recent `activity_runs`, so a new worker (every `warden run` starts one) judges outliers
 * from its first call once ten runs of that stage and agent exist anywhere.
 *
 * HIGH findings wait here until the intent's next answered agent call carries them to its
 * workflow, which holds the intent at the human-only `anomaly` gate; CRITICAL ones halt at once.
 */
import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { CircuitStateChange } from './circuit-breaker';
import { BehaviourMonitor, type BaselineSample, type BehaviourMonitorConfig, type Finding } from './behaviour-monitor';

/** A finding as the workflow receives it with a stage result. */
export interface AnomalyNotice {
  readonly kind: Finding['kind'];
  readonly severity: Finding['severity'];
  readonly reason: string;
}

/** One attempt of an agent call, as the interceptor saw it. */
export interface AgentCallFacts {
  readonly intentId: string;
  readonly stage: string;
  readonly agentId: string;
  readonly modelId: string;
  /** What the agent was asked beyond the intent: the same again is the same action. */
  readonly request: { readonly feedback?: string; readonly conditions?: readonly string[] };
  /** Hash of the answer; absent when the attempt failed. */
  readonly outputHash?: string;
  readonly costUsd: string;
  readonly latencyMs: number;
  readonly at: number;
}

/** Past runs of agent calls loaded at most this many, newest first, to seed the baselines. */
export const BASELINE_HISTORY_LIMIT = 2000;

export class BehaviourWatch {
  private readonly monitor: BehaviourMonitor;
  private readonly pending = new Map<string, AnomalyNotice[]>();
  private seeding: Promise<void> | undefined;

  constructor(
    private readonly history?: () => Promise<readonly BaselineSample[]>,
    config: Partial<BehaviourMonitorConfig> = {},
  ) {
    this.monitor = new BehaviourMonitor(config);
  }

  /** Seeds the baselines from history, once; a failure is reported and leaves them empty. */
  ready(onError: (error: unknown) => void = () => undefined): Promise<void> {
    this.seeding ??= (async () => {
      try {
        for (const sample of (await this.history?.()) ?? []) this.monitor.seed(sample);
      } catch (error) {
        onError(error);
      }
    })();
    return this.seeding;
  }

  /** Observes one attempt; HIGH findings are also kept for the intent's next answer. */
  agentCall(facts: AgentCallFacts): Finding[] {
    const findings = this.monitor.observe({
      at: facts.at,
      scope: facts.intentId,
      stage: facts.stage,
      agent: agentKey(facts.agentId, facts.modelId),
      action: requestHash(facts.stage, facts.request),
      outputHash: facts.outputHash,
      costUsd: facts.costUsd,
      latencyMs: facts.latencyMs,
    });
    this.hold(facts.intentId, findings);
    return findings;
  }

  /** Observes circuit transitions seen by an agent call of `intentId`. */
  breakerChanges(changes: readonly CircuitStateChange[], intentId?: string): Finding[] {
    const findings = changes.flatMap((change) => this.monitor.observeBreaker(change.endpoint, change.to, change.at, intentId));
    if (intentId !== undefined) this.hold(intentId, findings);
    return findings;
  }

  /** The HIGH findings the intent's workflow has not received yet; they are handed over once. */
  deliver(intentId: string): AnomalyNotice[] {
    const notices = this.pending.get(intentId) ?? [];
    this.pending.delete(intentId);
    return notices;
  }

  private hold(intentId: string, findings: readonly Finding[]): void {
    const high = findings.filter((f) => f.severity === 'high').map(({ kind, severity, reason }) => ({ kind, severity, reason }));
    if (high.length > 0) this.pending.set(intentId, [...(this.pending.get(intentId) ?? []), ...high]);
  }
}

/** Baselines are per stage and agent; an agent is its profile and model. */
export function agentKey(agentId: string, modelId: string): string {
  return agentId === modelId ? agentId : `${agentId}/${modelId}`;
}

function requestHash(stage: string, request: AgentCallFacts['request']): string {
  return createHash('sha256')
    .update(JSON.stringify([stage, request.feedback ?? '', request.conditions ?? []]))
    .digest('hex')
    .slice(0, 16);
}

/** The ledger's most recent answered agent calls, oldest first, as baseline samples. */
export async function recentAgentRuns(pool: pg.Pool, limit = BASELINE_HISTORY_LIMIT): Promise<BaselineSample[]> {
  const result = await pool.query<{ stage: string; agent_id: string | null; model_id: string | null; duration_ms: number; spend_usd: string | null }>(
    `SELECT stage, agent_id, model_id, duration_ms, spend_usd::text AS spend_usd FROM activity_runs
      WHERE activity_type = 'runAgentStage' AND outcome = 'completed' AND stage IS NOT NULL
      ORDER BY ended_at DESC LIMIT $1`,
    [limit],
  );
  return result.rows.reverse().map((row) => ({
    stage: row.stage,
    agent: agentKey(row.agent_id ?? 'unknown', row.model_id ?? row.agent_id ?? 'unknown'),
    latencyMs: row.duration_ms,
    ...(row.spend_usd !== null ? { costUsd: row.spend_usd } : {}),
  }));
}
