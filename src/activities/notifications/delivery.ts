import { ApplicationFailure } from '@temporalio/common';
import { Context } from '@temporalio/activity';
import type { AuditStore } from '../../ledger/audit-store';
import type { NotificationOutbox, OutboxEvent } from '../../ledger/notification-outbox';
import { deterministicUuid } from '../../ledger/event-id';
import type { GateLink } from '../../shared/decision-links';
import type { NotificationKind } from '../../shared/notifications';
import { describeChannel, type NotifyChannel } from '../../shared/notify-settings';
import type { Redactor } from '../../shared/redact';
import { buildNotification, slackMessage, webhookRequest } from './message';

/** One channel's share of an event: what the delivery workflow hands each attempt. */
export interface Delivery {
  /** The same on every attempt, so a receiver can drop a repeat. */
  readonly deliveryId: string;
  readonly kind: NotificationKind;
  readonly channel: NotifyChannel;
  readonly event: OutboxEvent;
  /** How long one attempt waits for an answer (default DELIVERY_TIMEOUT_MS). */
  readonly timeoutMs?: number;
}

export interface NotificationDeps {
  readonly ledger: { readonly audit: Pick<AuditStore, 'recordSafetyEvent'> };
  readonly outbox: Pick<NotificationOutbox, 'recordDeadLetter'>;
  readonly redact: Redactor;
  /** Where channel URLs and secrets named by `urlEnv` / `secretEnv` are read: the worker's environment. */
  readonly env: NodeJS.ProcessEnv;
  readonly fetch?: typeof fetch;
  /** The link a gate's notification carries to this channel (see gateLinks); undefined when there is none. */
  readonly gateLink?: (event: OutboxEvent, channel: NotifyChannel) => Promise<GateLink | undefined>;
}

/** How long one attempt waits for a channel to answer: a hanging endpoint is a failed attempt. */
export const DELIVERY_TIMEOUT_MS = 10_000;

/**
 * A failed attempt, carrying its number for the dead letter. `permanent`: retrying cannot mend it
 * (a missing variable, an endpoint that refuses the request itself).
 */
function failedAttempt(message: string, permanent: boolean): ApplicationFailure {
  const attempt = Context.current().info.attempt;
  return ApplicationFailure.create({ type: permanent ? 'NotificationRefused' : 'NotificationFailed', message, nonRetryable: permanent, details: [attempt] });
}

function variable(env: NodeJS.ProcessEnv, name: string, what: string): string {
  const value = env[name];
  if (value === undefined || value === '') throw failedAttempt(`${what}: $${name} is not set in the worker's environment`, true);
  return value;
}

export function createNotificationActivities(deps: NotificationDeps) {
  const send = deps.fetch ?? fetch;
  return {
    /**
     * Sends one notification to one channel. Throws on a failed attempt (the workflow's retry
     * policy decides whether another follows): 408, 429 and 5xx, a timeout or a network error
     * are retried; any other status, or a channel missing its variable, is not.
     */
    async deliverNotification(delivery: Delivery): Promise<{ readonly status: number }> {
      const { channel, event, kind, deliveryId } = delivery;
      const url = channel.url ?? variable(deps.env, channel.urlEnv!, `the ${channel.kind} channel's URL`);
      const link = kind.startsWith('gate.') && kind !== 'gate.decided' ? await deps.gateLink?.(event, channel) : undefined;
      const notification = buildNotification(event, kind, { redact: deps.redact, link });
      let request: { body: string; headers: Record<string, string> };
      if (channel.kind === 'slack') {
        request = { body: JSON.stringify(slackMessage(notification)), headers: { 'content-type': 'application/json' } };
      } else {
        const secret = channel.secretEnv ? variable(deps.env, channel.secretEnv, "the webhook's signing secret") : undefined;
        request = webhookRequest(notification, deliveryId, secret, new Date());
      }
      const timeoutMs = delivery.timeoutMs ?? DELIVERY_TIMEOUT_MS;
      // One controller held here, not AbortSignal.any over a timeout signal: on Node 20 such a
      // combined signal could be collected before it fired, and a silent endpoint then held the
      // attempt until the activity's own timeout.
      const abort = new AbortController();
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        abort.abort();
      }, timeoutMs);
      const cancelled = Context.current().cancellationSignal;
      const onCancel = () => abort.abort();
      cancelled.addEventListener('abort', onCancel);
      let response: Response;
      let answer: string;
      try {
        response = await send(url, { method: 'POST', body: request.body, headers: request.headers, signal: abort.signal });
        answer = deps.redact((await response.text().catch(() => '')).slice(0, 200));
      } catch (error) {
        throw failedAttempt(`${describeChannel(channel)}: ${timedOut ? `no answer within ${timeoutMs / 1000}s` : deps.redact((error as Error).message)}`, false);
      } finally {
        clearTimeout(timer);
        cancelled.removeEventListener('abort', onCancel);
      }
      if (response.ok) return { status: response.status };
      const message = `${describeChannel(channel)} answered ${response.status}${answer ? `: ${answer}` : ''}`;
      throw failedAttempt(message, !(response.status === 408 || response.status === 429 || response.status >= 500));
    },

    /** After a delivery's last attempt failed: a dead letter, and a SafetyEvent so the intent's timeline shows it. */
    async recordUndelivered(input: { readonly delivery: Delivery; readonly attempts: number; readonly error: string }): Promise<void> {
      const { delivery, attempts } = input;
      const channel = describeChannel(delivery.channel);
      const error = deps.redact(input.error);
      await deps.outbox.recordDeadLetter({ deliveryId: delivery.deliveryId, eventId: delivery.event.id, intentId: delivery.event.intentId, kind: delivery.kind, channel, attempts, error });
      await deps.ledger.audit.recordSafetyEvent({
        id: deterministicUuid('NOTIFICATION_UNDELIVERED', delivery.deliveryId),
        timestamp: new Date(),
        eventType: 'NOTIFICATION_UNDELIVERED',
        severity: 'medium',
        reason: `${delivery.kind} was not delivered to ${channel} after ${attempts} attempt(s): ${error}`,
        ...(delivery.event.intentId ? { intentId: delivery.event.intentId } : {}),
        suggestion: 'check the channel (URL, secret, the endpoint itself); warden notifications lists what was not delivered',
        metadata: { deliveryId: delivery.deliveryId, eventId: delivery.event.id, kind: delivery.kind, channel },
      });
    },
  };
}

export type NotificationActivities = ReturnType<typeof createNotificationActivities>;

/** A delivery's id: the same for an event and a channel however often it is tried. */
export function deliveryIdOf(eventId: string, channelIndex: number): string {
  return deterministicUuid('notification', eventId, String(channelIndex));
}
