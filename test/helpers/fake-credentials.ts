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
