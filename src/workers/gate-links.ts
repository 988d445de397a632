import type { NotificationDeps } from '../activities/notifications/delivery';
import { gatePageUrl, linkExpiry, mintLinkToken } from '../shared/decision-links';

/**
 * The links a gate's notifications carry: the gate's page in the web app at `baseUrl`, with a
 * one-time token that decides as the channel's approver (else `defaultApprover`, the config's
 * operator). Without an approver, or without the secret links are made with, the link opens the
 * page only (deciding there then needs the operator's session).
 */
export function gateLinks(options: { readonly baseUrl: string; readonly secret: Buffer | undefined; readonly defaultApprover?: string }): NonNullable<NotificationDeps['gateLink']> {
  return (event, channel) => {
    const { gate, requestedAt, timeoutAt } = event.metadata;
    if (!event.intentId || typeof gate !== 'string') return undefined;
    const approver = channel.approver ?? options.defaultApprover;
    if (!approver || !options.secret || typeof requestedAt !== 'string') return gatePageUrl(options.baseUrl, event.intentId, gate);
    const expiresAt = linkExpiry(typeof timeoutAt === 'string' ? timeoutAt : undefined, new Date());
    const token = mintLinkToken(options.secret, { intentId: event.intentId, gate, gateOpenedAt: requestedAt, approver, expiresAt });
    return gatePageUrl(options.baseUrl, event.intentId, gate, token);
  };
}
