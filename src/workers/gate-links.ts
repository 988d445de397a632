import type { NotificationDeps } from '../activities/notifications/delivery';
import type { GateViewLinks } from '../ledger/gate-view-links';
import type { LinkSecret } from '../runtime/link-secret';
import { gatePageUrl, linkExpiry, mintLinkToken } from '../shared/decision-links';

export interface GateLinkOptions {
  /** The web app's address (the config's serve.url, else its host and port). */
  readonly baseUrl: string;
  /** Who a link decides as when its channel names no approver (see defaultApprover). */
  readonly operator: string;
  readonly linkSecret: LinkSecret;
  /** Where view links are kept, for the web app to read. */
  readonly views: Pick<GateViewLinks, 'make'>;
}

/**
 * The links a gate's notifications carry: the gate's page in the web app, always with a token.
 * With the link secret, a one-time token that decides as the channel's approver, else as the
 * operator, until the gate times out (at most MAX_LINK_LIFETIME_MS). Without it, a view token
 * that shows the page read-only until this opening of the gate closes, and says why.
 */
export function gateLinks(options: GateLinkOptions): NonNullable<NotificationDeps['gateLink']> {
  return async (event, channel) => {
    const { gate, requestedAt, timeoutAt } = event.metadata;
    // A token is for one opening of one gate: without those there is nothing to link to.
    if (!event.intentId || typeof gate !== 'string' || typeof requestedAt !== 'string') return undefined;
    const { secret, missing } = options.linkSecret;
    if (!secret) {
      const token = await options.views.make({ intentId: event.intentId, gate, gateOpenedAt: requestedAt, why: missing });
      return { kind: 'view', url: gatePageUrl(options.baseUrl, event.intentId, gate, token, 'view'), why: missing };
    }
    const approver = channel.approver ?? options.operator;
    const asOperator = channel.approver === undefined;
    const expiresAt = linkExpiry(typeof timeoutAt === 'string' ? timeoutAt : undefined, new Date());
    const token = mintLinkToken(secret, { intentId: event.intentId, gate, gateOpenedAt: requestedAt, approver, ...(asOperator ? { asOperator } : {}), expiresAt });
    return { kind: 'decide', url: gatePageUrl(options.baseUrl, event.intentId, gate, token), approver, asOperator, expiresAt };
  };
}
