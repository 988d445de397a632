import type pg from 'pg';
import { storable } from './storable';
import { ModelCallSchema, type ModelCallInput, type ModelCallRow } from './types';
import { normalizeUsd } from '../shared/money';

/** The requests agents made through the model gateway (`model_calls`), one row each, idempotent by id. */
export class ModelCallStore {
  constructor(private readonly pool: pg.Pool) {}

  /** Appends one request made through the model gateway. True if inserted; false if the id already exists. */
  async record(input: ModelCallInput): Promise<boolean> {
    const m = ModelCallSchema.parse(storable(input));
    const result = await this.pool.query(
      `INSERT INTO model_calls (id, "timestamp", intent_id, stage, attempt, agent_id, api, model_id, streamed, status, outcome, refusal,
                                input_tokens, output_tokens, usd, estimated, latency_ms)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
       ON CONFLICT (id) DO NOTHING`,
      [m.id, m.timestamp, m.intentId, m.stage, m.attempt, m.agentId, m.api, m.modelId, m.streamed, m.status, m.outcome, m.refusal ?? null,
       m.inputTokens, m.outputTokens, m.usd, m.estimated, m.latencyMs],
    );
    return result.rowCount === 1;
  }

  /** The gateway requests of an intent, oldest first. */
  async ofIntent(intentId: string): Promise<ModelCallRow[]> {
    const result = await this.pool.query<Record<string, unknown>>(
      `SELECT id, "timestamp", intent_id, stage, attempt, agent_id, api, model_id, streamed, status, outcome, refusal,
              input_tokens::int AS input_tokens, output_tokens::int AS output_tokens, usd::text AS usd, estimated, latency_ms
         FROM model_calls WHERE intent_id = $1 ORDER BY "timestamp", recorded_at`,
      [intentId],
    );
    return result.rows.map((r) => ({
      id: r.id as string,
      timestamp: r.timestamp as Date,
      intentId: r.intent_id as string,
      stage: r.stage as string,
      attempt: r.attempt as number,
      agentId: r.agent_id as string,
      api: r.api as ModelCallRow['api'],
      modelId: r.model_id as string,
      streamed: r.streamed as boolean,
      status: r.status as number,
      outcome: r.outcome as ModelCallRow['outcome'],
      ...(r.refusal === null ? {} : { refusal: r.refusal as string }),
      inputTokens: r.input_tokens as number,
      outputTokens: r.output_tokens as number,
      usd: normalizeUsd(r.usd as string),
      estimated: r.estimated as boolean,
      latencyMs: r.latency_ms as number,
    }));
  }
}
