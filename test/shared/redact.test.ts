import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import path from 'node:path';
import { createRedactor, redactDeep, REDACTED, SECRET_ENV_NAME, secretShapesIn } from '../../src/shared/redact';
import { PLANTED } from '../helpers/planted-secrets';

describe('secret variable names', () => {
  test.each(['ANTHROPIC_API_KEY', 'ANTHROPIC_API_KEY_2', 'OTHER_API_KEY_2', 'GITHUB_TOKEN', 'GH_TOKEN_CI', 'AWS_SECRET_ACCESS_KEY', 'PGPASSWORD', 'DB_PASSWORD_FILE_VALUE', 'OPENAI_APIKEY', 'DATABASE_URL', 'google_credentials'])(
    '%s is a secret',
    (name) => expect(SECRET_ENV_NAME.test(name)).toBe(true),
  );
  test.each(['HOME', 'PATH', 'MONKEY', 'KEYBOARD_LAYOUT', 'TOKENIZER_PATH', 'WARDEN_LOG_LEVEL'])('%s is not', (name) => expect(SECRET_ENV_NAME.test(name)).toBe(false));
});

describe('createRedactor', () => {
  const redact = createRedactor({ OTHER_API_KEY_2: 'plainkeyPLANTED9876', DB_PASSWORD: 'pa"ss\\word-xyz-123', HOME: '/home/someone' });

  test('values of secret-named variables, whatever their shape', () => {
    expect(redact('key is plainkeyPLANTED9876.')).toBe(`key is ${REDACTED}.`);
    expect(redact('home is /home/someone')).toBe('home is /home/someone');
  });

  test('a value with quotes and backslashes, raw and JSON-escaped once and twice', () => {
    const value = 'x pa"ss\\word-xyz-123 y';
    expect(redact(value)).toBe(`x ${REDACTED} y`);
    expect(redact(JSON.stringify({ detail: value }))).toBe(JSON.stringify({ detail: `x ${REDACTED} y` }));
    expect(redact(JSON.stringify(JSON.stringify({ detail: value })))).not.toContain('word-xyz');
  });

  test.each([
    ['Authorization: Token rawtokenPLANTED5555', 'Authorization: [redacted]'],
    ['authorization: Digest username="a", response="abcdef123456"\nnext line', 'authorization: [redacted]\nnext line'],
    ['{"headers":{"Authorization":"Token abcdefabcdef123456"}}', '{"headers":{"Authorization":"[redacted]"}}'],
    ['{\\"Authorization\\":\\"Token abcdefabcdef123456\\"}', '{\\"Authorization\\":\\"[redacted]\\"}'],
    ['X-Api-Key: xapikeyPLANTED1234', 'X-Api-Key: [redacted]'],
    ["'x-api-key' = 'abcdef123456'", "'x-api-key' = '[redacted]'"],
    ['curl -H "Bearer abcdefghijklmnopqrstuv"', 'curl -H "[redacted]"'],
    ['SOME_SERVICE_TOKEN=unknownvalue123 next', 'SOME_SERVICE_TOKEN=[redacted] next'],
    ['export DB_PASSWD_2=hunter2hunter2 done', 'export DB_PASSWD_2=[redacted] done'],
    ['postgres://warden:hunter22@db:5432/warden', '[redacted]db:5432/warden'],
    ['mongodb+srv://app:s3cr3t/with/slashes@cluster0/x', '[redacted]cluster0/x'],
  ])('the shape of %s', (text, expected) => expect(redact(text)).toBe(expected));

  test('ordinary text is left alone', () => {
    for (const text of ['the authorization header is required', 'Token counts: 1200 in, 300 out', 'KEY=short', 'monkey business']) {
      expect(redact(text)).toBe(text);
    }
  });

  test('redactDeep reaches every string', () => {
    expect(redactDeep({ a: ['plainkeyPLANTED9876'], b: { c: 'ok', d: 3 } }, redact)).toEqual({ a: [REDACTED], b: { c: 'ok', d: 3 } });
  });
});

describe('credential shapes, known or not', () => {
  const redact = createRedactor({});
  /** Kills a scan still running when the file ends (a test past its timeout). */
  const stopScans = new AbortController();
  afterAll(() => stopScans.abort());

  test.each(PLANTED)('%s is redacted raw, inside JSON, and JSON inside JSON', (_name, secret) => {
    // Every sample holds PLANTED inside its secret part: none of it may be left.
    for (const form of [`before ${secret} after`, JSON.stringify({ log: `x ${secret} y` }), JSON.stringify(JSON.stringify({ tail: secret }))]) {
      const out = redact(form);
      expect(out).not.toContain('PLANTED');
      expect(out).toContain(REDACTED);
    }
    expect(secretShapesIn(`x ${secret} y`).length).toBeGreaterThan(0);
  });

  test('a private key cut by a tail, at its start or its end, is redacted too', () => {
    const [, pem] = PLANTED.find(([name]) => name === 'PEM private key')!;
    expect(redact(`…${pem.slice(0, 80)}`)).not.toContain('PLANTEDrsa');
    expect(redact(pem.slice(40))).not.toMatch(/PLANTED(rsa|second)/);
    // the tail as a log line holds it (escaped newlines), and after other words on its first line
    expect(redact(JSON.stringify({ out: pem.slice(40) }))).not.toMatch(/PLANTED(rsa|second)/);
    expect(redact(`key: ${pem.slice(pem.indexOf('\n') + 1)}`)).not.toMatch(/PLANTED(rsa|second)/);
    expect(redact(JSON.stringify({ out: `xyz\n${pem.slice(pem.indexOf('\n') + 1)}` }))).not.toMatch(/PLANTED(rsa|second)/);
  });

  test('long runs that look like part of a credential take time in proportion to their length', async () => {
    // In a process of its own, so a scan that takes the square of the length ends at the test's
    // hang guard (jest's timeout, which cannot stop a regular expression in this process) and is
    // killed there. 100 KB of base64 characters used to take 100 s, 100 KB of KEYKEY… 17 s; a
    // megabyte of each would take hours. Now all seven take a few seconds together.
    const script = [
      `const { secretShapesIn, createRedactor } = require(${JSON.stringify(path.resolve(__dirname, '../../src/shared/redact.ts'))});`,
      `const run = 'QUJD'.repeat(250_000);`,
      `const lines = ('A'.repeat(64) + '\\n').repeat(15_000);`,
      `const escaped = ('A'.repeat(64) + '\\\\n').repeat(15_000);`,
      `const texts = [run, lines, escaped, run + '\\n-----END PRIVATE KEY-----', lines + 'x-----END PRIVATE KEY-----', 'KEY'.repeat(330_000) + '=x', 'postgres://a:'.repeat(80_000)];`,
      `for (const text of texts) { secretShapesIn(text); createRedactor({})(text); }`,
      `process.stdout.write('scanned');`,
    ].join('\n');
    const { stdout } = await promisify(execFile)(process.execPath, ['-r', path.resolve(__dirname, '../../bin/checkout-loader.js'), '-e', script], { encoding: 'utf8', signal: stopScans.signal });
    expect(stdout).toBe('scanned');
  });

  test('ordinary code and prose stay as they are', () => {
    for (const text of [
      'const skipped = list.filter((x) => x.sk); // sk-learn',
      'AKIA is the prefix of AWS key ids',
      'eyJ is how base64 JSON starts',
      'see https://hooks.slack.com/ for webhooks',
      '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----',
      'npm_config_cache=/tmp/x',
    ]) {
      expect(redact(text)).toBe(text);
      expect(secretShapesIn(text)).toEqual([]);
    }
  });
});
