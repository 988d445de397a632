import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { WorkflowIdReusePolicy } from '@temporalio/common';
import type { Logger } from 'pino';
import { DELIVERY_TIMEOUT_MS, deliveryIdOf, type Delivery } from '../activities/notifications/delivery';
import type { NotificationOutbox, OutboxEvent } from '../ledger/notification-outbox';
import { NOTIFIED_EVENT_TYPES, notificationKindOf } from '../shared/notifications';
import type { NotifyChannel } from '../shared/notify-settings';
import type { NotificationInput } from '../workflows/notification-workflow';

export interface DispatcherOptions {
  readonly client: Client;
  readonly outbox: NotificationOutbox;
  readonly taskQueue: string;
  readonly logger: Logger;
  /** The worker's own channels (config `notify`): for events of no intent. */
  readonly channels: readonly NotifyChannel[];
  /** How often the ledger is read for new events. */
  readonly everyMs?: number;
  /** Attempts per delivery, and the wait before the first retry. */
  readonly attempts?: number;
  readonly firstRetryMs?: number;
  /** How long one attempt waits for a channel's answer. */
  readonly timeoutMs?: number;
  /** Whether to go on (the worker still runs); checked before every round. */
  readonly running?: () => boolean;
}

export const DISPATCH_DEFAULTS = { everyMs: 1000, attempts: 5, firstRetryMs: 2000, timeoutMs: DELIVERY_TIMEOUT_MS } as const;

/** Events read per round: a backlog (a worker that was down) drains over a few rounds. */
const BATCH = 100;

/** A notification workflow's id: one per event, so two workers dispatching the same event start it once. */
export function notificationWorkflowId(eventId: string): string {
  return `warden-notify-${eventId}`;
}

/**
 * Turns notifiable ledger events into delivery workflows. Every worker runs one: each round reads
 * the events no dispatcher has handed on yet, starts one workflow per event (its id is the
 * event's, so a race between workers starts it once) and then records the dispatch. A crash
 * between the two starts nothing twice: the next round finds the workflow already started.
 */
export class NotificationDispatcher {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly settings: { readonly everyMs: number; readonly attempts: number; readonly firstRetryMs: number; readonly timeoutMs: number };

  constructor(private readonly o: DispatcherOptions) {
    this.settings = {
      everyMs: o.everyMs ?? DISPATCH_DEFAULTS.everyMs,
      attempts: o.attempts ?? DISPATCH_DEFAULTS.attempts,
      firstRetryMs: o.firstRetryMs ?? DISPATCH_DEFAULTS.firstRetryMs,
      timeoutMs: o.timeoutMs ?? DISPATCH_DEFAULTS.timeoutMs,
    };
  }

  /** Rounds until `stop`; a failed round (ledger or server away) is logged and the next one tries again. */
  start(): void {
    const next = () => {
      if (this.stopped || this.o.running?.() === false) return;
      this.timer = setTimeout(() => {
        (this.o.running?.() === false ? Promise.resolve(0) : this.round())
          .catch((error: unknown) => this.o.logger.warn({ err: error }, 'notification dispatch round failed; trying again'))
          .finally(next);
      }, this.settings.everyMs);
      this.timer.unref();
    };
    next();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  /**
   * One round: the number of events handed on (to a workflow or, with no channel, to nobody).
   * Its ledger reads and writes are one query each for the round, not one per event: a stop of a
   * hundred intents records two notifiable events for each, most of them told to nobody.
   */
  async round(): Promise<number> {
    const events = await this.o.outbox.undispatched(NOTIFIED_EVENT_TYPES, BATCH);
    const channelsOfIntent = await this.o.outbox.intentChannels(events.flatMap((event) => (event.intentId ? [event.intentId] : [])));
    const toNobody: string[] = [];
    for (const event of events) {
      const channels = event.intentId ? (channelsOfIntent.get(event.intentId) ?? []) : this.o.channels;
      const deliveries = deliveriesOf(event, channels).map((d) => ({ ...d, timeoutMs: this.settings.timeoutMs }));
      if (deliveries.length === 0) {
        toNobody.push(event.id);
        continue;
      }
      const workflowId = notificationWorkflowId(event.id);
      const input: NotificationInput = { deliveries, attempts: this.settings.attempts, firstRetryMs: this.settings.firstRetryMs };
      try {
        await this.o.client.workflow.start('notificationWorkflow', {
          taskQueue: this.o.taskQueue,
          workflowId,
          args: [input],
          workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
        });
      } catch (error) {
        if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
      }
      await this.o.outbox.markDispatched([{ eventId: event.id, workflowId }]);
    }
    // (A round that failed above leaves these for the next one, which finds them again.)
    await this.o.outbox.markDispatched(toNobody.map((eventId) => ({ eventId, workflowId: null })));
    return events.length;
  }
}

/** One delivery per channel that takes the event's kind. */
export function deliveriesOf(event: OutboxEvent, channels: readonly NotifyChannel[]): Delivery[] {
  const kind = notificationKindOf(event.eventType, event.metadata);
  if (!kind) return [];
  return channels.flatMap((channel, index) => (channel.events === undefined || channel.events.includes(kind) ? [{ deliveryId: deliveryIdOf(event.id, index), kind, channel, event }] : []));
}
