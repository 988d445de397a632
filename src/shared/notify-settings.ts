import { z } from 'zod';
import { NOTIFICATION_KINDS } from './notifications';

/** The name of an environment variable of the worker: where a secret is read at delivery, never carried. */
const EnvNameSchema = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'the name of an environment variable, e.g. WARDEN_WEBHOOK_SECRET');

const HttpUrlSchema = z
  .string()
  .url()
  .refine((url) => /^https?:$/.test(new URL(url).protocol), 'an http:// or https:// URL');

const channelFields = {
  /** The endpoint, written out: fine for a webhook of your own, whose requests are signed. */
  url: HttpUrlSchema.optional(),
  /** Or the environment variable of the worker that holds it: for a Slack URL, which is itself a credential. */
  urlEnv: EnvNameSchema.optional(),
  /** Only these kinds (default: every kind). */
  events: z.array(z.enum(NOTIFICATION_KINDS)).min(1).optional(),
  /** Whom the channel reaches: a gate's link in it decides as this approver. */
  approver: z.string().trim().min(1).max(100).optional(),
};

/**
 * Where notifications go: a generic webhook (JSON body, HMAC-SHA256 signature with a shared
 * secret, a delivery id to de-duplicate by) or a Slack-compatible incoming webhook (blocks with
 * the summary and a link). Secrets are environment variable names: the channel travels in the
 * intent, and its history must not hold them.
 */
export const NotifyChannelSchema = z
  .discriminatedUnion('kind', [
    z.object({ kind: z.literal('webhook'), ...channelFields, secretEnv: EnvNameSchema.optional() }).strict(),
    z.object({ kind: z.literal('slack'), ...channelFields }).strict(),
  ])
  .refine((channel) => (channel.url === undefined) !== (channel.urlEnv === undefined), 'give exactly one of url and urlEnv');
export type NotifyChannel = z.infer<typeof NotifyChannelSchema>;

export const NotifyChannelsSchema = z.array(NotifyChannelSchema).max(20);

/**
 * `warden run --notify` for one intent: `[slack:|webhook:]URL` or `[slack:|webhook:]$VAR` (the
 * worker's environment variable that holds the URL). Without a prefix a URL on hooks.slack.com is
 * Slack, anything else a generic webhook. A Slack URL written out is refused: it is a credential,
 * and the intent (its workflow history) would keep it.
 */
export function channelFromFlag(flag: string): NotifyChannel {
  const prefixed = /^(slack|webhook):(.*)$/s.exec(flag);
  const target = prefixed ? prefixed[2] : flag;
  if (target.startsWith('$')) {
    const urlEnv = EnvNameSchema.safeParse(target.slice(1));
    if (!urlEnv.success) throw new Error(`--notify ${flag}: ${target} is not an environment variable's name`);
    return { kind: prefixed?.[1] === 'slack' ? 'slack' : 'webhook', urlEnv: urlEnv.data };
  }
  if (!HttpUrlSchema.safeParse(target).success) throw new Error(`--notify ${flag}: not an http:// or https:// URL, nor $VARIABLE`);
  const kind = prefixed ? (prefixed[1] as 'slack' | 'webhook') : new URL(target).hostname === 'hooks.slack.com' ? 'slack' : 'webhook';
  if (kind === 'slack' && new URL(target).hostname === 'hooks.slack.com') {
    throw new Error(`--notify ${flag}: a Slack webhook URL is a credential, and the intent's history would keep it; set it in the worker's environment and pass --notify slack:$VARIABLE`);
  }
  return { kind, url: target };
}

/** What a log line or a dead letter may say of a channel: its kind and where it goes, never a credential in the URL. */
export function describeChannel(channel: NotifyChannel): string {
  if (channel.urlEnv) return `${channel.kind} at $${channel.urlEnv}`;
  const url = new URL(channel.url!);
  return `${channel.kind} at ${url.protocol}//${url.host}${channel.kind === 'slack' ? '/…' : url.pathname}`;
}
