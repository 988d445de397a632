import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * The links a notification carries to decide a gate: `<web app>/gates/<intent>/<gate>?t=TOKEN`.
 * The token names one opening of one gate of one intent, the approver it decides as, and when it
 * expires, under an HMAC of the secret the workers and the web app share. The web app lets a
 * token decide once (the ledger keeps its nonce) and signs the decision with the approver's key,
 * so it goes through the same checks as `warden approve`.
 */
export interface LinkClaims {
  readonly intentId: string;
  readonly gate: string;
  /** The gate's `requestedAt`: a link dies with the opening it was made for. */
  readonly gateOpenedAt: string;
  readonly approver: string;
  /** The channel named no approver, so the link decides as the operator (the page says so). */
  readonly asOperator?: boolean;
  /** ISO time after which the link is refused. */
  readonly expiresAt: string;
  /** Spent by the first decision made with the link. */
  readonly nonce: string;
}

/** Longest a link lives, whatever the gate's timeout. */
export const MAX_LINK_LIFETIME_MS = 7 * 24 * 3600_000;

function mac(secret: Buffer, body: string): Buffer {
  return createHmac('sha256', secret).update(`warden-decision-link.v1.${body}`).digest();
}

/** A token for `claims` (a fresh nonce is added). */
export function mintLinkToken(secret: Buffer, claims: Omit<LinkClaims, 'nonce'>): string {
  const body = Buffer.from(JSON.stringify({ ...claims, nonce: randomBytes(16).toString('hex') })).toString('base64url');
  return `${body}.${mac(secret, body).toString('base64url')}`;
}

export type LinkCheck = { readonly ok: true; readonly claims: LinkClaims } | { readonly ok: false; readonly reason: string; readonly claims?: LinkClaims };

/** The claims of a token this secret made and that has not expired; otherwise why not. */
export function readLinkToken(secret: Buffer, token: string, now: Date = new Date()): LinkCheck {
  const [body, signature, extra] = token.split('.');
  if (!body || !signature || extra !== undefined) return { ok: false, reason: 'the link is not a decision link (it may have been cut short when copied)' };
  const expected = mac(secret, body);
  const given = Buffer.from(signature, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { ok: false, reason: 'the link was not made by this Warden (its signature does not match): it may have been altered' };
  let claims: LinkClaims;
  try {
    claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as LinkClaims;
  } catch {
    return { ok: false, reason: 'the link is not a decision link' };
  }
  if (!(Date.parse(claims.expiresAt) > now.getTime())) return { ok: false, reason: `the link expired at ${claims.expiresAt}`, claims };
  return { ok: true, claims };
}

/** When a link for a gate that times out at `timeoutAt` expires: with the gate, and within MAX_LINK_LIFETIME_MS. */
export function linkExpiry(timeoutAt: string | undefined, now: Date): string {
  const cap = now.getTime() + MAX_LINK_LIFETIME_MS;
  const gate = timeoutAt ? Date.parse(timeoutAt) : NaN;
  return new Date(Number.isFinite(gate) ? Math.min(gate, cap) : cap).toISOString();
}

/**
 * The query parameter a token travels in: a decision link's `t`, a view link's `v` (see
 * GateViewLinks). Apart, so that neither is ever read as the other.
 */
export const LINK_PARAMETERS = { decide: 't', view: 'v' } as const;
export type LinkKind = keyof typeof LINK_PARAMETERS;

/**
 * A gate's link as a notification carries it: one that decides (once, as `approver`, until
 * `expiresAt`), or, where no decision link can be made, one that only shows the gate while it
 * waits (`why` it cannot decide).
 */
export type GateLink =
  | { readonly kind: 'decide'; readonly url: string; readonly approver: string; readonly asOperator: boolean; readonly expiresAt: string }
  | { readonly kind: 'view'; readonly url: string; readonly why: string };

/** The path of a gate's page in the web app, with a token of `kind` when there is one. */
export function gatePagePath(intentId: string, gate: string, token?: string, kind: LinkKind = 'decide'): string {
  const page = `/gates/${encodeURIComponent(intentId)}/${encodeURIComponent(gate)}`;
  return token ? `${page}?${LINK_PARAMETERS[kind]}=${encodeURIComponent(token)}` : page;
}

/** The page of a gate under the web app at `baseUrl`, with a token of `kind` when there is one. */
export function gatePageUrl(baseUrl: string, intentId: string, gate: string, token?: string, kind: LinkKind = 'decide'): string {
  return new URL(gatePagePath(intentId, gate, token, kind).slice(1), baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`).toString();
}
