import { Writable } from 'node:stream';
import { ApplicationFailure } from '@temporalio/common';
import { createLogger } from '../../src/runtime/logger';
import { pinoSdkLogger } from '../../src/runtime/sdk-logger';
import { createRedactor } from '../../src/shared/redact';

function capture(): { lines: string[]; logger: ReturnType<typeof createLogger> } {
  const lines: string[] = [];
  const logger = createLogger({
    level: 'debug',
    redact: createRedactor({ DB_PASSWORD: 'pa"ss\\word-xyz-123', OTHER_API_KEY_2: 'plainkeyPLANTED9876' }),
    destination: new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    }),
  });
  return { lines, logger };
}

test('credential fields are censored at any depth and in any case', () => {
  const { lines, logger } = capture();
  logger.info(
    { request: { headers: { Authorization: 'Token abcdefabcdef123456', 'X-Api-Key': 'k1', AUTHORIZATION: 'x' } }, apiKey: 'k2', Password: 'p', inputTokens: 7 },
    'call',
  );
  const line = JSON.parse(lines[0]!) as Record<string, unknown>;
  expect(line).toMatchObject({
    request: { headers: { Authorization: '[redacted]', 'X-Api-Key': '[redacted]', AUTHORIZATION: '[redacted]' } },
    apiKey: '[redacted]',
    Password: '[redacted]',
    inputTokens: 7,
  });
});

test('a secret value with quotes and backslashes is scrubbed from the JSON line', () => {
  const { lines, logger } = capture();
  logger.warn({ detail: 'x pa"ss\\word-xyz-123' }, 'leak plainkeyPLANTED9876');
  expect(lines.join('')).not.toMatch(/word-xyz|PLANTED/);
  expect(JSON.parse(lines[0]!)).toMatchObject({ detail: 'x [redacted]', msg: 'leak [redacted]' });
});

test("the SDK's log lines go through pino: one JSON line each, redacted, warnings and up", () => {
  const { lines, logger } = capture();
  const sdk = pinoSdkLogger(logger);
  sdk.info('not shown');
  const failure = ApplicationFailure.create({ message: 'agent said plainkeyPLANTED9876', type: 'X', cause: new Error('spawn failed: pa"ss\\word-xyz-123') });
  sdk.warn('Activity failed', { activityType: 'runAgentStage', error: failure });
  sdk.log('ERROR', 'Worker crashed');
  expect(lines).toHaveLength(2);
  const [warn, error] = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  expect(warn).toMatchObject({ level: 40, source: 'temporal-sdk', activityType: 'runAgentStage', msg: 'Activity failed', err: { message: 'agent said [redacted]: spawn failed: [redacted]' } });
  expect(error).toMatchObject({ level: 50, msg: 'Worker crashed' });
  expect(lines.join('')).not.toMatch(/word-xyz|PLANTED/);
});
