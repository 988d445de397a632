import type pg from 'pg';
import { NotifyChannelsSchema, type NotifyChannel } from '../shared/notify-settings';
import type { Severity } from '../shared/safety-events';

/**
 * The ledger as the outbox of notifications: notifiable SafetyEvents not yet dispatched, the
 * record that one was, the channels an intent asked for, and the dead letters of deliveries
 * that failed for good. The only module that knows these tables' SQL.
 */

/** A notifiable event as the dispatcher reads it. */
export interface OutboxEvent {
  readonly id: string;
  readonly timestamp: string;
  readonly eventType: string;
  readonly severity: Severity;
  readonly intentId?: string;
  readonly stage?: string;
  readonly agentId?: string;
  readonly breakerId?: string;
  readonly reason: string;
  readonly suggestion?: string;
  readonly costSnapshot?: Readonly<Record<string, unknown>>;
  readonly metadata: Readonly<Record<string, unknown>>;
}

export interface DeadLetter {
  readonly deliveryId: string;
  readonly eventId: string;
  readonly intentId?: string;
  readonly kind: string;
  /** The channel as describeChannel says it: no credential. */
  readonly channel: string;
  readonly attempts: number;
  readonly error: string;
  readonly at?: string;
}

/** How far back an event may be and still be told: older news is not worth a message. */
const OLDEST_TOLD_MS = 7 * 24 * 3600_000;

export class NotificationOutbox {
  constructor(private readonly pool: pg.Pool) {}

  /** Events of `types` recorded since notifications exist (and within a week) and not yet dispatched, oldest first. */
  async undispatched(types: readonly string[], limit: number): Promise<OutboxEvent[]> {
    const { rows } = await this.pool.query(
      `SELECT e.id, e."timestamp", e.event_type, e.severity, e.intent_id, e.stage, e.agent_id, e.breaker_id, e.reason, e.suggestion, e.cost_snapshot, e.metadata
         FROM safety_events e
        WHERE e.event_type = ANY($1::text[])
          AND e.recorded_at >= greatest((SELECT min(at) FROM notification_epoch), now() - make_interval(secs => $2::float8 / 1000))
          AND NOT EXISTS (SELECT 1 FROM notification_dispatches d WHERE d.event_id = e.id)
        ORDER BY e.recorded_at, e.id
        LIMIT $3`,
      [types, OLDEST_TOLD_MS, limit],
    );
    return rows.map((r) => ({
      id: r.id,
      timestamp: new Date(r.timestamp).toISOString(),
      eventType: r.event_type,
      severity: r.severity,
      ...(r.intent_id ? { intentId: r.intent_id } : {}),
      ...(r.stage ? { stage: r.stage } : {}),
      ...(r.agent_id ? { agentId: r.agent_id } : {}),
      ...(r.breaker_id ? { breakerId: r.breaker_id } : {}),
      reason: r.reason,
      ...(r.suggestion ? { suggestion: r.suggestion } : {}),
      ...(r.cost_snapshot ? { costSnapshot: r.cost_snapshot } : {}),
      metadata: r.metadata ?? {},
    }));
  }

  /**
   * Records that each event was handed to its delivery workflow (or to nobody: null), in one
   * statement. A repeat changes nothing.
   */
  async markDispatched(dispatches: ReadonlyArray<{ readonly eventId: string; readonly workflowId: string | null }>): Promise<void> {
    if (dispatches.length === 0) return;
    await this.pool.query(
      'INSERT INTO notification_dispatches (event_id, workflow_id) SELECT * FROM unnest($1::uuid[], $2::text[]) ON CONFLICT (event_id) DO NOTHING',
      [dispatches.map((d) => d.eventId), dispatches.map((d) => d.workflowId)],
    );
  }

  /**
   * The channels each of `intentIds` asked for, from its latest INTENT_STARTED event, in one
   * query; none for an intent that asked for none. A row that no longer parses (written by
   * another version) counts as none.
   */
  async intentChannels(intentIds: readonly string[]): Promise<Map<string, NotifyChannel[]>> {
    const channels = new Map<string, NotifyChannel[]>(intentIds.map((id) => [id, []]));
    if (intentIds.length === 0) return channels;
    const { rows } = await this.pool.query<{ intent_id: string; notify: unknown }>(
      `SELECT DISTINCT ON (intent_id) intent_id, metadata->'notify' AS notify FROM safety_events
        WHERE intent_id = ANY($1::text[]) AND event_type = 'INTENT_STARTED' ORDER BY intent_id, "timestamp" DESC`,
      [[...new Set(intentIds)]],
    );
    for (const row of rows) {
      const parsed = NotifyChannelsSchema.safeParse(row.notify ?? []);
      channels.set(row.intent_id, parsed.success ? parsed.data : []);
    }
    return channels;
  }

  /** A delivery that failed for good. A repeat (a retried workflow task) changes nothing. */
  async recordDeadLetter(letter: DeadLetter): Promise<void> {
    await this.pool.query(
      `INSERT INTO notification_dead_letters (delivery_id, event_id, intent_id, kind, channel, attempts, error)
       VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (delivery_id) DO NOTHING`,
      [letter.deliveryId, letter.eventId, letter.intentId ?? null, letter.kind, letter.channel, letter.attempts, letter.error.slice(0, 2000)],
    );
  }

  /** Dead letters, newest first: of one intent, or all. */
  async deadLetters(intentId?: string): Promise<DeadLetter[]> {
    const { rows } = await this.pool.query(
      `SELECT delivery_id, event_id, intent_id, kind, channel, attempts, error, at FROM notification_dead_letters
        WHERE $1::text IS NULL OR intent_id = $1 ORDER BY at DESC LIMIT 500`,
      [intentId ?? null],
    );
    return rows.map((r) => ({
      deliveryId: r.delivery_id,
      eventId: r.event_id,
      ...(r.intent_id ? { intentId: r.intent_id } : {}),
      kind: r.kind,
      channel: r.channel,
      attempts: r.attempts,
      error: r.error,
      at: new Date(r.at).toISOString(),
    }));
  }
}
