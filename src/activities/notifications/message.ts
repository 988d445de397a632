import { createHmac } from 'node:crypto';
import type { OutboxEvent } from '../../ledger/notification-outbox';
import { decideCommands } from '../../shared/decide-commands';
import type { GateLink, LinkKind } from '../../shared/decision-links';
import type { NotificationKind } from '../../shared/notifications';
import { forTerminal } from '../../shared/control-characters';

/**
 * What a notification says, built from its ledger event: a title a person can act on, the
 * event's reason, the few figures that matter for its kind, and a link where there is a page to
 * go to. Then the two wire formats: a signed generic webhook body and a Slack message.
 */
export interface Notification {
  readonly kind: NotificationKind;
  readonly eventId: string;
  readonly eventType: string;
  readonly at: string;
  readonly severity: string;
  readonly intentId?: string;
  readonly gate?: string;
  readonly title: string;
  readonly text: string;
  /** Label → value, in the order a person reads them. */
  readonly fields: Readonly<Record<string, string>>;
  readonly suggestion?: string;
  /** The gate's page in the web app (gate kinds), with a token: see linkKind. */
  readonly link?: string;
  /** `decide`: the link decides once, as the approver linkNote names; `view`: it only shows the gate. */
  readonly linkKind?: LinkKind;
  /** What the link does, in a sentence a person reads before opening it. */
  readonly linkNote?: string;
}

/** Longest text a notification carries; the ledger keeps the whole reason. */
const MAX_TEXT = 1500;

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

function str(value: unknown): string | undefined {
  return typeof value === 'string' && value.length > 0 ? value : typeof value === 'number' ? String(value) : undefined;
}

/** The notification of `event`; `redact` runs over every text that leaves the worker. */
export function buildNotification(event: OutboxEvent, kind: NotificationKind, options: { readonly redact: (text: string) => string; readonly link?: GateLink }): Notification {
  // Reasons and fields carry goals and agents' words: redacted, and their escape sequences made visible for whoever prints them.
  const clean = (text: string): string => forTerminal(options.redact(text));
  const m = event.metadata;
  const gate = str(m.gate);
  const intent = event.intentId ? `Intent ${event.intentId}` : 'Warden';
  const fields: Record<string, string> = {};
  const put = (label: string, value: string | undefined) => {
    if (value !== undefined) fields[label] = clip(clean(value), 300);
  };
  let title: string;
  switch (kind) {
    case 'gate.opened': {
      title = `${intent}: the ${gate} gate is waiting for a decision`;
      put('Risk', str(m.risk));
      put('Spend', str(m.spendUsd) && `$${str(m.spendUsd)}`);
      const tests = m.tests as { passed?: boolean; summary?: string } | undefined;
      put('Tests', tests ? `${tests.passed ? 'passed' : 'failed'}${tests.summary ? ` (${tests.summary})` : ''}` : undefined);
      const predicted = m.predicted as { files?: number; lines?: number } | undefined;
      const actual = m.actual as { files?: number; lines?: number } | undefined;
      put('Size', actual ? `${actual.files} file(s), ${actual.lines} line(s) (predicted ${predicted?.files ?? '?'} / ${predicted?.lines ?? '?'})` : undefined);
      put('Review', str(m.review));
      put('Times out', str(m.timeoutAt));
      break;
    }
    case 'gate.timeout-near':
      title = `${intent}: the ${gate} gate times out soon`;
      put('Times out', str(m.timeoutAt));
      break;
    case 'gate.escalated':
      title = `${intent}: the ${gate} gate was escalated to ${str(m.escalateTo) ?? 'its escalation target'}`;
      put('Then', str(m.policy));
      break;
    case 'gate.decided':
      title = event.eventType === 'GATE_AUTO_PASSED' ? `${intent}: the ${gate} gate passed automatically` : `${intent}: the ${gate} gate was decided: ${str(m.decision)} by ${str(m.by)}${m.signed === false && m.timedOut !== true ? ' (unsigned)' : ''}`;
      put('Signed', typeof m.signed === 'boolean' ? (m.signed ? 'yes' : 'no') : undefined);
      put('Timed out', m.timedOut === true ? 'yes' : undefined);
      break;
    case 'breaker.opened':
      title = `Circuit ${event.breakerId ?? str(m.breaker) ?? ''} opened`.replace('  ', ' ');
      put('Intent', event.intentId);
      break;
    case 'budget.warning':
      title = `${intent}: the ${str(m.budget)} budget is past ${str(m.share)}%`;
      put('Spent', str(m.spentUsd) && `$${str(m.spentUsd)} of $${str(m.limitUsd)}`);
      break;
    case 'budget.exhausted':
      title = `${intent}: a budget ran out`;
      break;
    case 'intent.merged':
      title = `${intent} merged`;
      break;
    case 'intent.rejected':
      title = `${intent} was rejected`;
      break;
    case 'intent.failed':
      title = `${intent} failed`;
      break;
    case 'intent.stopped':
      title = `${intent} was stopped`;
      break;
  }
  put('Stage', event.stage);
  return {
    kind,
    eventId: event.id,
    eventType: event.eventType,
    at: event.timestamp,
    severity: event.severity,
    ...(event.intentId ? { intentId: event.intentId } : {}),
    ...(gate ? { gate } : {}),
    title: clip(clean(title), 200),
    text: clip(clean(event.reason), MAX_TEXT),
    fields,
    ...(event.suggestion ? { suggestion: clip(clean(event.suggestion), 500) } : {}),
    ...(options.link ? { link: options.link.url, linkKind: options.link.kind, linkNote: clip(clean(linkNote(options.link, event.intentId ?? '', gate ?? '')), 500) } : {}),
  };
}

/** What a gate's link does: whom it decides as and until when, or why it only shows the gate and what to run instead. */
function linkNote(link: GateLink, intentId: string, gate: string): string {
  if (link.kind === 'decide') {
    const who = link.asOperator ? `${link.approver}, the operator (no approver is named for this channel)` : link.approver;
    return `The link decides once, as ${who}, until ${link.expiresAt}.`;
  }
  const commands = decideCommands(intentId, gate);
  return `The link only shows the gate, until it closes: ${link.why}. Decide with ${commands.approve} (or ${commands.reject}).`;
}

/** Header names of the generic webhook; the receiver checks the signature over `timestamp.body`. */
export const WEBHOOK_HEADERS = {
  delivery: 'x-warden-delivery',
  event: 'x-warden-event',
  timestamp: 'x-warden-timestamp',
  signature: 'x-warden-signature',
} as const;

/** The signature of a webhook body: `sha256=` and the hex HMAC-SHA256 of `timestamp.body` under the shared secret. */
export function webhookSignature(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/** A generic webhook request: the notification as JSON, with the delivery id, and signed when there is a secret. */
export function webhookRequest(n: Notification, deliveryId: string, secret: string | undefined, now: Date): { body: string; headers: Record<string, string> } {
  const body = JSON.stringify({ deliveryId, ...n });
  const timestamp = String(Math.floor(now.getTime() / 1000));
  return {
    body,
    headers: {
      'content-type': 'application/json',
      [WEBHOOK_HEADERS.delivery]: deliveryId,
      [WEBHOOK_HEADERS.event]: n.kind,
      [WEBHOOK_HEADERS.timestamp]: timestamp,
      ...(secret !== undefined ? { [WEBHOOK_HEADERS.signature]: webhookSignature(secret, timestamp, body) } : {}),
    },
  };
}

/** Slack's limits on what a message's blocks may hold (characters). */
const SLACK = { header: 150, section: 3000, field: 2000, fields: 10, context: 2000, url: 3000, fallback: 3000 } as const;

/** Slack's mrkdwn treats these three as control characters. */
function mrkdwn(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/**
 * A Slack incoming-webhook message: a header, the text, the figures as fields, the suggestion,
 * a line saying what the link does and a button to the gate's page. Every text is cut to Slack's
 * limits, so a long reason still goes out (cut) instead of being refused.
 */
export function slackMessage(n: Notification): { text: string; blocks: unknown[] } {
  const fields = Object.entries(n.fields)
    .slice(0, SLACK.fields)
    .map(([label, value]) => ({ type: 'mrkdwn', text: clip(`*${mrkdwn(label)}*\n${mrkdwn(value)}`, SLACK.field) }));
  const blocks: unknown[] = [
    { type: 'header', text: { type: 'plain_text', text: clip(n.title, SLACK.header), emoji: false } },
    { type: 'section', text: { type: 'mrkdwn', text: clip(mrkdwn(n.text), SLACK.section) } },
  ];
  if (fields.length > 0) blocks.push({ type: 'section', fields });
  if (n.suggestion) blocks.push({ type: 'context', elements: [{ type: 'mrkdwn', text: clip(mrkdwn(n.suggestion), SLACK.context) }] });
  if (n.link && n.link.length <= SLACK.url) {
    if (n.linkNote) blocks.push({ type: 'context', elements: [{ type: 'mrkdwn', text: clip(mrkdwn(n.linkNote), SLACK.context) }] });
    const label = n.linkKind === 'view' ? 'Review (read-only)' : 'Review and decide';
    blocks.push({ type: 'actions', elements: [{ type: 'button', text: { type: 'plain_text', text: label }, url: n.link, style: 'primary' }] });
  }
  return { text: clip(n.title, SLACK.fallback), blocks };
}
