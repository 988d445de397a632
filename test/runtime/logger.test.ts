import { Writable } from 'node:stream';
import { ApplicationFailure } from '@temporalio/common';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createCommandLogger, createLogger, readableLine } from '../../src/runtime/logger';
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

describe('the terminal a person reads', () => {
  function commandLogger(): { logger: ReturnType<typeof createLogger>; terminal: string[]; file?: string } {
    const terminal: string[] = [];
    const home = mkdtempSync(path.join(tmpdir(), 'warden-log-'));
    const stderr = new Writable({
      write(chunk: Buffer, _enc, done) {
        terminal.push(chunk.toString());
        done();
      },
    });
    return { ...createCommandLogger({ level: 'info', format: 'human', wardenHome: home, stderr }), terminal };
  }

  test('the full record goes to the day\'s file; a warning is one line on the terminal, naming the file once', () => {
    const { logger, terminal, file } = commandLogger();
    const failure = ApplicationFailure.nonRetryable('agent command exited with code 3\n    at somewhere (file.ts:1:1)', 'AGENT_FAILED');
    logger.info('worker started');
    logger.warn({ activity: 'runAgentStage', intentId: 'fix-it', stage: 'impl', activityAttempt: 2, outcome: 'failed', error: failure.message }, 'activity finished');
    logger.child({ source: 'temporal-sdk' }).warn({ activityType: 'runAgentStage', err: failure }, 'Activity failed');
    logger.error({ workflowId: 'intent-fix-it', err: failure }, 'Workflow failed');
    expect(file).toMatch(/logs\/warden-\d{4}-\d{2}-\d{2}\.log$/);
    const records = readFileSync(file!, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { msg: string; err?: { stack?: string } });
    expect(records.map((r) => r.msg)).toEqual(['worker started', 'activity finished', 'Activity failed', 'Workflow failed']);
    expect(records[3]!.err?.stack).toMatch(/at /);
    // The SDK's report of the failed activity repeats Warden's: one line for it, none for the SDK's.
    expect(terminal).toEqual([
      `warning: fix-it: runAgentStage (impl) failed, attempt 2: agent command exited with code 3 (full records in ${file})\n`,
      'error: Workflow failed (intent-fix-it): agent command exited with code 3\n',
    ]);
  });

  test("an agent's words in a warning reach the terminal with their escape sequences shown, on one line", () => {
    const { logger, terminal } = commandLogger();
    logger.warn({ intentId: 'fix-it', error: 'agent said \x1b[2J\x1b]0;pwned\x07 done\rOK' }, 'stage failed');
    expect(terminal).toEqual([expect.stringMatching(/^warning: stage failed \(fix-it\): agent said \\x1b\[2J\\x1b\]0;pwned\\x07 done\\rOK \(full records in .*\)\n$/)]);
  });

  test('json: every record is a JSON line on stdout, none on the terminal', () => {
    const { logger, file } = createCommandLogger({ level: 'info', format: 'json', wardenHome: '/nonexistent' });
    expect(file).toBeUndefined();
    expect(logger.level).toBe('info');
  });

  test('a record that is not JSON is passed through as it is', () => {
    expect(readableLine('plain text\n')).toBe('plain text');
  });
});
