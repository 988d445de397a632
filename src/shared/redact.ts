/**
 * Environment variables whose values are secrets wherever they appear: a name with a KEY, TOKEN,
 * SECRET, PASSWORD (or APIKEY, PASSWD, CREDENTIAL) segment anywhere, such as ANTHROPIC_API_KEY_2,
 * GITHUB_TOKEN or PGPASSWORD, and DATABASE_URL.
 */
export const SECRET_ENV_NAME = /(?:^|_)(?:(?:API|ACCESS|PRIVATE)?KEY|TOKEN|SECRET|(?:PG)?PASSWORD|PASSWD|CREDENTIALS?)(?:_|$)|^DATABASE_URL$/i;

/** Header and field names whose value is a credential, in any case (HTTP headers are case-insensitive). */
const CREDENTIAL_FIELD = String.raw`(?:proxy-)?authorization|x-api-key|api-key|x-auth-token|x-goog-api-key`;

/** Shapes of credentials that are secrets even when we were not told their value. */
const SECRET_SHAPES: ReadonlyArray<readonly [RegExp, string]> = [
  [/\bsk-[A-Za-z0-9_-]{16,}/g, ''], // OpenAI / Anthropic style keys
  // An Authorization header line: everything after the name (Digest and others carry several parts).
  [/^([ \t]*(?:proxy-)?authorization:[ \t]*)\S[^\r\n]*/gim, '$1'],
  // A credential header or field, whatever its scheme (Bearer, Basic, Token, Digest, …), also as
  // JSON or escaped JSON: the name stays, scheme and value go.
  [new RegExp(String.raw`\b(${CREDENTIAL_FIELD})(\\*["']?\s*[:=]\s*\\*["']?\s*)(?:[A-Za-z][\w-]*\s+)?[^\s"'\\,;]{6,}`, 'gi'), '$1$2'],
  [/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{12,}/gi, ''], // Authorization values quoted without their header
  [/\b(gh[pousr]_[A-Za-z0-9]{20,})/g, ''], // GitHub tokens
  [/\bpostgres(?:ql)?:\/\/[^:\s/]+:[^@\s]+@/g, ''], // passwords inside connection strings
  // NAME=value lines of secret-named variables (an environment dump), even of variables we do not have.
  [/\b([A-Z][A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD)[A-Z0-9_]*)=(?!\[redacted\])[^\s"'\\]{8,}/g, '$1='],
];

export const REDACTED = '[redacted]';

/** Replaces secrets in text: one function, applied to everything that leaves an activity. */
export type Redactor = (text: string) => string;

/**
 * The forms a value takes in text we scrub: as is, and JSON-escaped once and twice (a log line is
 * JSON, and may hold JSON), so a secret holding `"` or `\` is found in either.
 */
function spellings(value: string): string[] {
  const once = JSON.stringify(value).slice(1, -1);
  const twice = JSON.stringify(once).slice(1, -1);
  return [...new Set([value, once, twice])];
}

/**
 * Builds a redactor from the secret values in `env` (see SECRET_ENV_NAME) plus well-known
 * credential shapes. Values shorter than 8 characters are ignored: replacing them would shred
 * ordinary text.
 */
export function createRedactor(env: NodeJS.ProcessEnv): Redactor {
  const values = Object.entries(env)
    .filter(([name, value]) => SECRET_ENV_NAME.test(name) && typeof value === 'string' && value.length >= 8)
    .flatMap(([, value]) => spellings(value as string))
    .sort((a, b) => b.length - a.length);
  return (text: string): string => {
    let out = text;
    for (const value of values) out = out.split(value).join(REDACTED);
    for (const [shape, keep] of SECRET_SHAPES) out = out.replace(shape, `${keep}${REDACTED}`);
    return out;
  };
}

/** Applies a redactor to every string inside a JSON-like value. */
export function redactDeep<T>(value: T, redact: Redactor): T {
  if (typeof value === 'string') return redact(value) as T;
  if (Array.isArray(value)) return value.map((v) => redactDeep(v, redact)) as T;
  if (value && typeof value === 'object' && !(value instanceof Date)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactDeep(v, redact)])) as T;
  }
  return value;
}
