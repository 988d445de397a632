import { channelFromFlag, describeChannel, NotifyChannelSchema } from '../../src/shared/notify-settings';
import { notificationKindOf } from '../../src/shared/notifications';

test('--notify: a URL is a webhook, $VAR names the worker variable, a written-out Slack URL is refused as a credential', () => {
  expect(channelFromFlag('https://ci.example.com/hooks/warden')).toEqual({ kind: 'webhook', url: 'https://ci.example.com/hooks/warden' });
  expect(channelFromFlag('slack:$SLACK_WEBHOOK_URL')).toEqual({ kind: 'slack', urlEnv: 'SLACK_WEBHOOK_URL' });
  expect(channelFromFlag('$HOOK')).toEqual({ kind: 'webhook', urlEnv: 'HOOK' });
  expect(channelFromFlag('slack:http://127.0.0.1:9000/slack')).toEqual({ kind: 'slack', url: 'http://127.0.0.1:9000/slack' });
  expect(() => channelFromFlag('https://hooks.slack.com/services/T0/B0/xyz')).toThrow(/a Slack webhook URL is a credential.*--notify slack:\$VARIABLE/);
  expect(() => channelFromFlag('ftp://example.com')).toThrow(/not an http:\/\/ or https:\/\/ URL/);
  expect(() => channelFromFlag('$1BAD')).toThrow(/not an environment variable's name/);
});

test('a channel gives exactly one of url and urlEnv; its description never shows a query or a Slack path', () => {
  expect(NotifyChannelSchema.safeParse({ kind: 'webhook' }).success).toBe(false);
  expect(NotifyChannelSchema.safeParse({ kind: 'webhook', url: 'https://a.example', urlEnv: 'X' }).success).toBe(false);
  expect(NotifyChannelSchema.safeParse({ kind: 'slack', url: 'https://a.example', secretEnv: 'X' }).success).toBe(false);
  expect(NotifyChannelSchema.safeParse({ kind: 'webhook', url: 'https://a.example', events: ['gate.opened'] }).success).toBe(true);
  expect(NotifyChannelSchema.safeParse({ kind: 'webhook', url: 'https://a.example', events: ['gate.maybe'] }).success).toBe(false);
  expect(describeChannel({ kind: 'webhook', url: 'https://a.example/hook?token=abc' })).toBe('webhook at https://a.example/hook');
  expect(describeChannel({ kind: 'slack', url: 'https://chat.example/services/T/B/secret' })).toBe('slack at https://chat.example/…');
  expect(describeChannel({ kind: 'slack', urlEnv: 'SLACK_URL' })).toBe('slack at $SLACK_URL');
});

test('which ledger events notify: a budget warning only with its share, a released reservation never', () => {
  expect(notificationKindOf('GATE_REQUESTED', {})).toBe('gate.opened');
  expect(notificationKindOf('COST_WARNING', { share: 80 })).toBe('budget.warning');
  expect(notificationKindOf('COST_WARNING', { released: true })).toBeUndefined();
  expect(notificationKindOf('STAGE_STARTED', {})).toBeUndefined();
  expect(notificationKindOf('NOTIFICATION_UNDELIVERED', {})).toBeUndefined();
});
