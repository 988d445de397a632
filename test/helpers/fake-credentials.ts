/**
 * Fake credentials in the shapes the secret scan looks for, built from pieces at run time so
 * that this repository holds no literal a scanner would flag. None of them grants anything.
 */
const join = (...parts: string[]): string => parts.join('');

/** An AWS access key id (not the documentation's example id, which the rules let through). */
export const FAKE_AWS_KEY_ID = join('AKIA', 'QYLPMN5H', 'HHFPZAM2');

/** An AWS secret access key, as a config assignment names it. */
export const FAKE_AWS_SECRET_LINE = join('aws_secret_', 'access_key = "', 'q8Jf2LmN4pR7sT1vX3zB', '5dF8hK0mP2rS4uW6yA9c', '"');

/** A PEM RSA private key block (random base64, not a key), ending in a newline. */
export const FAKE_PRIVATE_KEY_BLOCK = [
  join('-----BEGIN RSA ', 'PRIVATE KEY-----'),
  'MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi6fNBLD+7o1X3q2rjx0YI4Wbbe',
  'q8Jf2LmN4pR7sT1vX3zB5dF8hK0mP2rS4uW6yA9cE1gI3kM5oQ7sU9wY0bD2fH4j',
  'L6nP8rT0vX2zA4cE6gI8kM0oQ2sU4wY6aC8eG0iK2mO4qS6uW8yA0cE2gI4kM6o',
  join('-----END RSA ', 'PRIVATE KEY-----'),
  '',
].join('\n');

/** A GitHub personal access token (classic). */
export const FAKE_GITHUB_TOKEN = join('ghp_', 'a1B2c3D4e5F6g7H8i9J0', 'k1L2m3N4o5P6q7R8');

/** A Slack bot token. */
export const FAKE_SLACK_TOKEN = join('xoxb-', '1234567890123', '-1234567890123', '-AbCdEfGhIjKlMnOpQrStUvWx');

/** `lib/strings.js` with an AWS key id on line 2 and a private key block from line 4. */
export function stringsWithCredentials(): string {
  return [`module.exports = { slugify: (s) => s.toLowerCase() };`, `const awsKeyId = '${FAKE_AWS_KEY_ID}';`, 'const pem = `', FAKE_PRIVATE_KEY_BLOCK + '`;', ''].join('\n');
}

/** `n` characters drawn in turn from `alphabet`: a filler of the right shape. */
const run = (alphabet: string, n: number): string => Array.from({ length: n }, (_, i) => alphabet[(i * 7 + 3) % alphabet.length]).join('');
const ALNUM = 'aB3dE5gH7jK9mN1pQ2rS4tU6vW8xY0z';
const HEX = '0a1b2c3d4e5f6789';

/** One fake credential of each format the rules and the redactor both know: its name, the text, and its secret part. */
export const FAKE_TOKENS: ReadonlyArray<readonly [string, string, string?]> = [
  ['AWS access key id', FAKE_AWS_KEY_ID],
  ['GitHub token', FAKE_GITHUB_TOKEN],
  ['Slack token', FAKE_SLACK_TOKEN],
  ['npm token', join('npm_', run(ALNUM, 36))],
  ['Groq key', join('gsk_', run(ALNUM, 52))],
  ['Hugging Face token', join('hf_', run('abcdefghijKLMNOPQRSTuvwxyz', 34))],
  ['Linear key', join('lin_api_', run(ALNUM, 40))],
  ['Notion token', join('ntn_', run('0123456789', 11), run(ALNUM, 35))],
  ['SendGrid key', join('SG.', run(ALNUM, 22), '.', run(ALNUM, 43))],
  ['Shopify token', join('shpat_', run(HEX, 32))],
  ['Grafana token', join('glsa_', run(ALNUM, 32), '_', run(HEX, 8))],
  ['Vault token', join('hvs.', run(ALNUM, 95))],
  ['Databricks token', join('dapi', run(HEX, 32))],
  ['Docker token', join('dckr_pat_', run(ALNUM, 27))],
  ['Figma token', join('figd_', run(ALNUM, 40))],
  ['MongoDB password', join('mongodb://app:', run(ALNUM, 16), '@db.internal:27017/app'), run(ALNUM, 16)],
];
