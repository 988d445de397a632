import { performance } from 'node:perf_hooks';
import { applyAllowances, scanTextForSecrets } from '../../src/safety/secret-scan';
import { createRedactor } from '../../src/shared/redact';
import { describeSecretFinding, secretRepairPrompt } from '../../src/shared/secret-findings';
import {
  FAKE_AWS_KEY_ID,
  FAKE_AWS_SECRET_LINE,
  FAKE_GITHUB_TOKEN,
  FAKE_PRIVATE_KEY_BLOCK,
  FAKE_SLACK_TOKEN,
  FAKE_TOKENS,
  stringsWithCredentials,
} from '../helpers/fake-credentials';

/** The scan over fixtures; every fake credential is built in test code from pieces (see fake-credentials.ts). */

test('an AWS access key id and a private key block are found with their file, line and rule', async () => {
  const findings = await scanTextForSecrets('lib/strings.js', stringsWithCredentials());
  expect(findings).toEqual([
    { path: 'lib/strings.js', line: 2, rule: 'aws/AWSAccessKeyID' },
    { path: 'lib/strings.js', line: 4, rule: 'privatekey/PrivateKey' },
  ]);
  // Nothing of a value travels with a finding.
  const shown = JSON.stringify(findings) + findings.map(describeSecretFinding).join('\n') + secretRepairPrompt(findings, 'the agent');
  expect(shown).not.toContain(FAKE_AWS_KEY_ID);
  expect(shown).not.toContain('MIIEpAIBAAKCAQEA');
  expect(secretRepairPrompt(findings, 'the agent')).toContain('lib/strings.js:2 (aws/AWSAccessKeyID)');
});

test.each([
  ['an AWS secret access key', FAKE_AWS_SECRET_LINE, 'aws/AWSSecretAccessKey'],
  ['a GitHub token', `const t = "${FAKE_GITHUB_TOKEN}";`, 'github/GITHUB_TOKEN'],
  ['a Slack token', `SLACK=${FAKE_SLACK_TOKEN}`, 'slack/SLACK_TOKEN'],
  ['a private key block in a .pem file', FAKE_PRIVATE_KEY_BLOCK, 'privatekey/PrivateKey'],
])('%s is found', async (_what, text, rule) => {
  const findings = await scanTextForSecrets('config/settings.txt', `# settings\n\n${text}\n`);
  expect(findings).toEqual([{ path: 'config/settings.txt', line: 3, rule }]);
});

test('a disable comment written beside the secret hides nothing', async () => {
  const text = `// secretlint-disable\nconst id = '${FAKE_AWS_KEY_ID}'; // secretlint-disable-line\n`;
  expect(await scanTextForSecrets('lib/a.js', text)).toEqual([{ path: 'lib/a.js', line: 2, rule: 'aws/AWSAccessKeyID' }]);
});

test('ordinary code and placeholders are not findings', async () => {
  const code = [
    'export function slugify(s: string): string {',
    "  return s.toLowerCase().replace(/[^a-z0-9]+/g, '-');",
    '}',
    "const key = process.env.AWS_ACCESS_KEY_ID ?? '';",
    "const example = 'AKIAIOSFODNN7EXAMPLE';", // the documentation's own example id
    "const token = '<your token here>';",
  ].join('\n');
  expect(await scanTextForSecrets('src/slug.ts', code)).toEqual([]);

});

test('a person may allow findings by path glob, with the reason kept', async () => {
  const findings = [
    { path: 'test/fixtures/keys/a.pem', line: 1, rule: 'privatekey/PrivateKey' },
    { path: 'lib/strings.js', line: 2, rule: 'aws/AWSAccessKeyID' },
  ];
  const outcome = applyAllowances(findings, [{ paths: ['test/fixtures/**'], reason: 'fixtures of the key parser' }]);
  expect(outcome.held).toEqual([findings[1]]);
  expect(outcome.allowed).toEqual([{ ...findings[0], reason: 'fixtures of the key parser' }]);
  expect(applyAllowances(findings, []).held).toEqual(findings);
});

test('among a few hundred changed files, the one secret planted is found at its line', async () => {
  // No bound on time here (bench/change-inspection.ts measures it).
  const filler = Array.from({ length: 150 }, (_, i) => `export const value${i} = compute(${i}, 'item-${i}');`).join('\n');
  const files = Array.from({ length: 300 }, (_, i) => [`src/f${i}.ts`, i === 217 ? `${filler}\nconst id = '${FAKE_AWS_KEY_ID}';\n` : filler] as const);
  const findings = (await Promise.all(files.map(([p, text]) => scanTextForSecrets(p, text)))).flat();
  expect(findings).toEqual([{ path: 'src/f217.ts', line: 151, rule: 'aws/AWSAccessKeyID' }]);
});

test('scans leave no performance marks behind: a long-lived worker does not slow down or grow with every change', async () => {
  // secretlint's profiler marks every rule run and keeps them; the scan turns it off.
  for (let i = 0; i < 20; i++) await scanTextForSecrets(`src/f${i}.ts`, `export const x${i} = ${i};\n`);
  expect(performance.getEntriesByType('mark').filter((m) => m.name.includes('>'))).toEqual([]);
});

const TOKENS = FAKE_TOKENS.map(([name, token, secret]): [string, string, string] => [name, token, secret ?? token]);

test.each(TOKENS)('a %s is found by the rules, and the redactor scrubs it too', async (_name, token, secret) => {
  // A lineage file is redacted text: a shape the rules know and the redactor did not would send impl back for Warden's own writing.
  expect((await scanTextForSecrets('config/app.txt', `token: "${token}"\n`)).length).toBeGreaterThan(0);
  expect(createRedactor({})(`token: "${token}"`)).not.toContain(secret.slice(-12));
});

test('a NUL byte in front of a key does not hide it', async () => {
  expect(await scanTextForSecrets('img/logo.png', `\0PNG\n${FAKE_AWS_KEY_ID}\n`)).toEqual([{ path: 'img/logo.png', line: 2, rule: 'aws/AWSAccessKeyID' }]);
});
