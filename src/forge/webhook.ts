import { readGitLabWebhook } from './gitlab-webhook';
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { ForgeKind } from '../shared/forge';

/*
 * A forge's webhook delivery, checked before anything in it is believed. Gitea and GitHub sign
 * the raw body with the hook's secret (`X-Hub-Signature-256: sha256=<hex HMAC-SHA256>`); GitLab
 * sends the secret itself in `X-Gitlab-Token` and is checked in gitlab-webhook.ts.
 */

/** A delivery as the receiver took it: the headers (any case) and the body exactly as sent. */
export interface WebhookDelivery {
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  readonly body: Buffer | string;
}

/** A delivery whose signature holds, and what it is about. */
export interface AcceptedDelivery {
  readonly accepted: true;
  readonly forge: ForgeKind;
  /** The event's name as the forge sent it (`pull_request`, `pull_request_approved`, `status`, …). */
  readonly event: string;
  readonly action?: string;
  readonly pullRequest?: number;
  readonly headBranch?: string;
  /** The commit a status or check event is about. */
  readonly headSha?: string;
}

export interface RefusedDelivery {
  readonly accepted: false;
  readonly reason: string;
}

export type WebhookReading = AcceptedDelivery | RefusedDelivery;

const SIGNATURE_HEADER = 'x-hub-signature-256';

/**
 * What the receiver calls for every delivery: routes it to its forge's check by its headers
 * (GitLab's `X-Gitlab-Event` is checked by its token, Gitea's and GitHub's by their signature).
 */
export function readWebhookDelivery(delivery: WebhookDelivery, secret: string): WebhookReading {
  if (header(delivery.headers, 'x-gitlab-event') !== undefined) {
    const gitlab = readGitLabWebhook(delivery.headers, delivery.body, secret);
    if ('refused' in gitlab) return refuse(gitlab.refused);
    return { accepted: true, forge: 'gitlab', event: gitlab.event, ...(gitlab.pullRequest !== undefined ? { pullRequest: gitlab.pullRequest } : {}), ...(gitlab.headBranch ? { headBranch: gitlab.headBranch } : {}) };
  }
  return readSignedDelivery(delivery, secret);
}
const SIGNATURE_PREFIX = 'sha256=';

/**
 * Checks a Gitea or GitHub delivery against the hook's secret and reads which pull request it
 * concerns. Refuses (never throws) when the secret is empty, the signature is missing or wrong,
 * the event is not named, or the body is not JSON.
 */
export function readSignedDelivery(delivery: WebhookDelivery, secret: string): WebhookReading {
  const giteaEvent = header(delivery.headers, 'x-gitea-event');
  const githubEvent = header(delivery.headers, 'x-github-event');
  // Gitea sends both headers; only GitHub sends X-GitHub-Event alone.
  const forge = giteaEvent !== undefined ? 'gitea' : githubEvent !== undefined ? 'github' : undefined;
  const event = giteaEvent ?? githubEvent;
  if (forge === undefined || !event) return refuse('no X-Gitea-Event or X-GitHub-Event header: not a Gitea or GitHub delivery');
  if (!secret) return refuse('no webhook secret is configured, so no delivery can be trusted');

  const signature = header(delivery.headers, SIGNATURE_HEADER);
  if (!signature) return refuse(`no ${SIGNATURE_HEADER} header: the hook has no secret set on the forge`);
  if (!signature.startsWith(SIGNATURE_PREFIX)) return refuse(`${SIGNATURE_HEADER} is not of the form sha256=<hex>`);
  const body = typeof delivery.body === 'string' ? Buffer.from(delivery.body, 'utf8') : delivery.body;
  if (!signatureMatches(body, secret, signature.slice(SIGNATURE_PREFIX.length))) return refuse(`${SIGNATURE_HEADER} does not match the body: wrong secret, or the body was changed`);

  let payload: unknown;
  try {
    payload = JSON.parse(body.toString('utf8'));
  } catch {
    return refuse('the body is not JSON (set the hook\'s content type to application/json)');
  }
  if (!isRecord(payload)) return refuse('the body is not a JSON object');
  return { accepted: true, forge, event, ...aboutWhat(payload) };
}

/** Constant-time comparison of the HMAC of `body` with the hex digest sent. */
export function signatureMatches(body: Buffer, secret: string, sentHex: string): boolean {
  if (!/^[0-9a-fA-F]{64}$/.test(sentHex)) return false;
  const expected = createHmac('sha256', secret).update(body).digest();
  return timingSafeEqual(expected, Buffer.from(sentHex, 'hex'));
}

/** The signature header value a forge would send for `body` (for senders and tests). */
export function signBody(body: Buffer | string, secret: string): string {
  return `${SIGNATURE_PREFIX}${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/**
 * Which pull request the payload concerns. Pull request and review events carry the pull request;
 * comments carry its issue; check events carry the pull requests of their head; status events
 * only a commit (and, on GitHub, its branches).
 */
function aboutWhat(payload: Record<string, unknown>): Pick<AcceptedDelivery, 'action' | 'pullRequest' | 'headBranch' | 'headSha'> {
  const found: { action?: string; pullRequest?: number; headBranch?: string; headSha?: string } = {};
  if (typeof payload.action === 'string') found.action = payload.action;

  const pr = record(payload.pull_request);
  if (pr) {
    const number = numberOf(pr.number) ?? numberOf(payload.number);
    if (number !== undefined) found.pullRequest = number;
    const head = record(pr.head);
    if (typeof head?.ref === 'string') found.headBranch = head.ref;
    if (typeof head?.sha === 'string') found.headSha = head.sha;
    return found;
  }

  const issue = record(payload.issue);
  if (issue && issue.pull_request !== undefined && issue.pull_request !== null) {
    const number = numberOf(issue.number);
    if (number !== undefined) found.pullRequest = number;
    return found;
  }

  // GitHub's check_run / check_suite: the pull requests whose head the check ran on.
  const check = record(payload.check_run) ?? record(payload.check_suite);
  if (check) {
    const suite = record(check.check_suite) ?? check;
    if (typeof suite.head_branch === 'string') found.headBranch = suite.head_branch;
    if (typeof suite.head_sha === 'string') found.headSha = suite.head_sha;
    const prs = Array.isArray(check.pull_requests) ? check.pull_requests : Array.isArray(suite.pull_requests) ? suite.pull_requests : [];
    const first = record(prs[0]);
    const number = first ? numberOf(first.number) : undefined;
    if (number !== undefined) found.pullRequest = number;
    return found;
  }

  // A commit status: the commit, and on GitHub the branches whose head it is.
  if (typeof payload.sha === 'string') {
    found.headSha = payload.sha;
    const branches = Array.isArray(payload.branches) ? payload.branches.map(record).filter((b) => typeof b?.name === 'string') : [];
    if (branches.length === 1) found.headBranch = branches[0]!.name as string;
  }
  return found;
}

function header(headers: WebhookDelivery['headers'], name: string): string | undefined {
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() !== name) continue;
    const first = Array.isArray(value) ? value[0] : value;
    return typeof first === 'string' ? first.trim() : undefined;
  }
  return undefined;
}

function refuse(reason: string): RefusedDelivery {
  return { accepted: false, reason };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function record(value: unknown): Record<string, unknown> | undefined {
  return isRecord(value) ? value : undefined;
}

function numberOf(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value > 0 ? value : undefined;
}
