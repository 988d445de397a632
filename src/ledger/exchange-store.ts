import { createHash } from 'node:crypto';
import type pg from 'pg';
import { inTransaction } from './transaction';

/** How the gateway's recording of model exchanges is kept (config `worker.recording`). */
export interface RecordingSettings {
  /** Record every exchange (default true). */
  readonly enabled: boolean;
  /** How long a recorded exchange is kept (a duration, default 30d); retention deletes it after. */
  readonly keep: string;
  /** The most an intent's recording stores, MB (default 20); past it calls are still made, bodies no longer kept. */
  readonly maxPerIntentMb: number;
}

export const RECORDING_DEFAULTS: RecordingSettings = { enabled: true, keep: '30d', maxPerIntentMb: 20 };

/** An answer as the agent got it: one body, or a stream's server-sent events in the order they went out. */
export type RecordedAnswer = { readonly kind: 'whole'; readonly text: string } | { readonly kind: 'events'; readonly events: readonly string[] };

/** One model call as the gateway hands it over: bodies already redacted. */
export interface ExchangeInput {
  /** The call's `model_calls` id. */
  readonly callId: string;
  readonly intentId: string;
  readonly stage: string;
  readonly attempt: number;
  /** Its place among the attempt's calls, from 1. */
  readonly order: number;
  /** The normalised request's hash, for matching a replayed request to this one; undefined when the body was not JSON. */
  readonly requestKey?: string;
  /** The request body the agent sent; undefined when none was read (refused before its body). */
  readonly request?: string;
  readonly answer: RecordedAnswer;
  /** The HTTP status the agent got. */
  readonly status: number;
}

/** What a replay needs of an intent besides its exchanges; written once, by the intent's first agent attempt. */
export interface RecordingContext {
  readonly baseCommit: string;
  /** sha256 of the intent as the worker checked it: its completed config. */
  readonly configHash: string;
  readonly wardenVersion: string;
  /** The intent's agent profiles as configured: `default` and each stage routed elsewhere. */
  readonly agents: Readonly<Record<string, unknown>>;
  /** The first line of `--version` of each agent CLI the profiles run, by CLI name, as this worker found it. */
  readonly cliVersions: Readonly<Record<string, string>>;
}

/** One recorded exchange as read back; bodies only when asked for and stored. */
export interface RecordedExchange {
  readonly callId: string;
  readonly stage: string;
  readonly attempt: number;
  readonly order: number;
  readonly requestKey?: string;
  readonly status: number;
  readonly answerKind: RecordedAnswer['kind'];
  readonly requestBytes: number;
  readonly answerBytes: number;
  /** False when the bodies were not kept (past the intent's cap). */
  readonly stored: boolean;
  readonly recordedAt: Date;
  /** From the call's `model_calls` row, when it is still there. */
  readonly modelId?: string;
  readonly outcome?: string;
  readonly request?: string;
  readonly answer?: RecordedAnswer;
}

/** An intent's recording: its exchanges in the order they were made, per stage and attempt. */
export interface Recording {
  readonly intentId: string;
  /** When the recording passed its cap; later exchanges have no bodies. */
  readonly cappedAt?: Date;
  readonly context?: RecordingContext;
  readonly exchanges: readonly RecordedExchange[];
}

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/** The bytes an answer is stored as: the body, or its events as a JSON array. */
function answerBody(answer: RecordedAnswer): string {
  return answer.kind === 'whole' ? answer.text : JSON.stringify(answer.events);
}

/**
 * The recording of model exchanges in the ledger's database: `exchange_bodies` holds each body
 * once under its sha256, `model_exchanges` one row per call pointing at its bodies, and
 * `intent_recordings` an intent's cap mark and replay context (migration 011).
 */
export class ExchangeStore {
  private readonly capBytes: number;

  constructor(
    private readonly pool: pg.Pool,
    settings: Pick<RecordingSettings, 'maxPerIntentMb'> = RECORDING_DEFAULTS,
  ) {
    this.capBytes = Math.floor(settings.maxPerIntentMb * 1024 * 1024);
  }

  /**
   * Records one exchange in one statement: its bodies (each at most once) and its row, or, when
   * they would take the intent's recording past its cap (or it was capped before), the row alone,
   * the recording marked capped. `newlyCapped` is true for the one call that marked it. Calls of
   * one intent in flight together may each pass the check: the cap can be passed by that much.
   */
  async record(exchange: ExchangeInput): Promise<{ readonly stored: boolean; readonly newlyCapped: boolean }> {
    const request = exchange.request;
    const answer = answerBody(exchange.answer);
    const requestBytes = request === undefined ? 0 : Buffer.byteLength(request);
    const answerBytes = Buffer.byteLength(answer);
    // The intent's running total and cap mark are one row, kept in the same statement: no sum
    // over its exchanges per call. `now()` is this statement's time, so `capped_at = now()` after
    // the upsert says this call is the one that marked the recording capped.
    const { rows } = await this.pool.query<{ stored: boolean; newly_capped: boolean }>(
      `WITH fits AS (
         SELECT coalesce((SELECT r.capped_at IS NULL AND r.stored_bytes + $11::bigint + $12::bigint <= $15::bigint FROM intent_recordings r WHERE r.intent_id = $2),
                         $11::bigint + $12::bigint <= $15::bigint) AS ok
       ), bodies AS (
         INSERT INTO exchange_bodies (hash, body, bytes)
         SELECT b.hash, b.body, b.bytes FROM (VALUES ($7::text, $9::text, $11::int), ($8::text, $10::text, $12::int)) AS b (hash, body, bytes)
          WHERE b.hash IS NOT NULL AND (SELECT ok FROM fits)
         ON CONFLICT (hash) DO NOTHING
       ), recording AS (
         INSERT INTO intent_recordings AS r (intent_id, stored_bytes, capped_at)
         SELECT $2, CASE WHEN ok THEN $11::bigint + $12::bigint ELSE 0 END, CASE WHEN ok THEN NULL ELSE now() END FROM fits
         ON CONFLICT (intent_id) DO UPDATE
           SET stored_bytes = r.stored_bytes + EXCLUDED.stored_bytes, capped_at = coalesce(r.capped_at, EXCLUDED.capped_at)
         RETURNING r.capped_at = now() AS newly_capped
       ), exchange AS (
         INSERT INTO model_exchanges (call_id, intent_id, stage, attempt, call_order, request_key, request_hash, answer_hash, answer_kind, status, request_bytes, answer_bytes, stored)
         SELECT $1, $2, $3, $4, $5, $6, CASE WHEN ok THEN $7 END, CASE WHEN ok THEN $8 END, $13, $14, $11, $12, ok FROM fits
         ON CONFLICT (call_id) DO NOTHING
       )
       SELECT (SELECT ok FROM fits) AS stored, coalesce((SELECT newly_capped FROM recording), false) AS newly_capped`,
      [
        exchange.callId,
        exchange.intentId,
        exchange.stage,
        exchange.attempt,
        exchange.order,
        exchange.requestKey ?? null,
        request === undefined ? null : sha256(request),
        sha256(answer),
        request ?? null,
        answer,
        requestBytes,
        answerBytes,
        exchange.answer.kind,
        exchange.status,
        this.capBytes,
      ],
    );
    return { stored: rows[0]!.stored, newlyCapped: rows[0]!.newly_capped };
  }

  /** Keeps what a replay needs of the intent; the first context written stays. */
  async recordContext(intentId: string, context: RecordingContext): Promise<void> {
    await this.pool.query(
      `INSERT INTO intent_recordings (intent_id, context) VALUES ($1, $2)
       ON CONFLICT (intent_id) DO UPDATE SET context = EXCLUDED.context WHERE intent_recordings.context IS NULL`,
      [intentId, JSON.stringify(context)],
    );
  }

  /** The intent's recording, exchanges ordered by stage's first call, attempt and order; bodies when `bodies` is set. */
  async recordingOf(intentId: string, options: { readonly bodies?: boolean } = {}): Promise<Recording> {
    const head = await this.pool.query<{ capped_at: Date | null; context: RecordingContext | null }>(`SELECT capped_at, context FROM intent_recordings WHERE intent_id = $1`, [intentId]);
    const { rows } = await this.pool.query<{
      call_id: string;
      stage: string;
      attempt: number;
      call_order: number;
      request_key: string | null;
      status: number;
      answer_kind: RecordedAnswer['kind'];
      request_bytes: number;
      answer_bytes: number;
      stored: boolean;
      recorded_at: Date;
      model_id: string | null;
      outcome: string | null;
      request: string | null;
      answer: string | null;
    }>(
      `SELECT e.call_id, e.stage, e.attempt, e.call_order, e.request_key, e.status, e.answer_kind, e.request_bytes, e.answer_bytes, e.stored, e.recorded_at,
              c.model_id, c.outcome, ${options.bodies ? 'rq.body' : 'NULL'} AS request, ${options.bodies ? 'an.body' : 'NULL'} AS answer
         FROM model_exchanges e
         LEFT JOIN model_calls c ON c.id = e.call_id
         ${options.bodies ? 'LEFT JOIN exchange_bodies rq ON rq.hash = e.request_hash LEFT JOIN exchange_bodies an ON an.hash = e.answer_hash' : ''}
        WHERE e.intent_id = $1
        ORDER BY min(e.recorded_at) OVER (PARTITION BY e.stage), e.stage, e.attempt, e.call_order`,
      [intentId],
    );
    const row = head.rows[0];
    return {
      intentId,
      ...(row?.capped_at ? { cappedAt: row.capped_at } : {}),
      ...(row?.context ? { context: row.context } : {}),
      exchanges: rows.map((r) => ({
        callId: r.call_id,
        stage: r.stage,
        attempt: r.attempt,
        order: r.call_order,
        ...(r.request_key === null ? {} : { requestKey: r.request_key }),
        status: r.status,
        answerKind: r.answer_kind,
        requestBytes: r.request_bytes,
        answerBytes: r.answer_bytes,
        stored: r.stored,
        recordedAt: r.recorded_at,
        ...(r.model_id === null ? {} : { modelId: r.model_id }),
        ...(r.outcome === null ? {} : { outcome: r.outcome }),
        ...(r.request === null ? {} : { request: r.request }),
        ...(r.answer === null ? {} : { answer: r.answer_kind === 'whole' ? { kind: 'whole' as const, text: r.answer } : { kind: 'events' as const, events: JSON.parse(r.answer) as string[] } }),
      })),
    };
  }

  /**
   * Retention: deletes the exchanges recorded before `cutoff`, then every body no kept exchange
   * points at, then the recordings of intents with nothing left that were started before it.
   * Returns what it deleted per table.
   */
  async cleanup(cutoff: Date): Promise<Record<string, number>> {
    return inTransaction(this.pool, async (client) => {
      const exchanges = await client.query(`DELETE FROM model_exchanges WHERE recorded_at < $1`, [cutoff]);
      // Taken before the bodies are judged: a body stored by a call now in flight is not deleted under it.
      await client.query(`LOCK TABLE exchange_bodies IN SHARE ROW EXCLUSIVE MODE`);
      const bodies = await client.query(
        `DELETE FROM exchange_bodies b
          WHERE NOT EXISTS (SELECT 1 FROM model_exchanges e WHERE e.request_hash = b.hash)
            AND NOT EXISTS (SELECT 1 FROM model_exchanges e WHERE e.answer_hash = b.hash)`,
      );
      const recordings = await client.query(
        `DELETE FROM intent_recordings r WHERE r.recorded_at < $1 AND NOT EXISTS (SELECT 1 FROM model_exchanges e WHERE e.intent_id = r.intent_id)`,
        [cutoff],
      );
      return { model_exchanges: exchanges.rowCount ?? 0, exchange_bodies: bodies.rowCount ?? 0, intent_recordings: recordings.rowCount ?? 0 };
    });
  }
}
