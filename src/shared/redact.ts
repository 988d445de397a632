/**
 * Environment variables whose values are secrets wherever they appear: a name with a KEY, TOKEN,
 * SECRET, PASSWORD (or APIKEY, PASSWD, CREDENTIAL) segment anywhere, such as ANTHROPIC_API_KEY_2,
 * GITHUB_TOKEN or PGPASSWORD, and DATABASE_URL.
 */
export const SECRET_ENV_NAME = /(?:^|_)(?:(?:API|ACCESS|PRIVATE)?KEY|TOKEN|SECRET|(?:PG)?PASSWORD|PASSWD|CREDENTIALS?)(?:_|$)|^DATABASE_URL$/i;

/** Header and field names whose value is a credential, in any case (HTTP headers are case-insensitive). */
const CREDENTIAL_FIELD = String.raw`(?:proxy-)?authorization|x-api-key|api-key|x-auth-token|x-goog-api-key`;

/** A credential shape: what it is, how it looks, and what of the match is kept (`$1`: e.g. a header name). */
export interface SecretShape {
  readonly name: string;
  readonly pattern: RegExp;
  readonly keep: string;
}

/** A newline in text as stored: real, or escaped once in JSON (a log line, a history payload). */
const NL = String.raw`(?:\r?\n|\\(?:r\\)?n)`;

/** A character of a key's base64 body. */
const B64 = '[A-Za-z0-9+/=]';
/**
 * The body lines of a key whose BEGIN line was cut off: 16 or more base64 characters a line. It
 * starts only where a body starts: not after a base64 character (but after an escape such as \n
 * in JSON), not on the n or r of such an escape, not after a body line; and the lookahead with its
 * backreference takes the lines whole, never giving any back. Without that, a long run of base64
 * characters cost time by the square of its length: 100 KB took 100 s.
 */
const KEY_BODY = String.raw`(?<!(?<!\\)${B64}|${B64}{16}${NL})(?!(?<=\\)[nr])(?=((?:${B64}{16,}${NL})+))\1`;

/**
 * Shapes of credentials that are secrets even when we were not told their value: the issuers'
 * documented token formats (fixed prefixes, lengths and alphabets), so ordinary text does not
 * match. Checked against samples in test/shared/redact.test.ts.
 */
export const SECRET_SHAPES: readonly SecretShape[] = [
  // Private keys, PEM and OpenSSH: the whole block; a block cut by a tail (no END, or no BEGIN) too.
  { name: 'private key', pattern: /-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|$)/g, keep: '-----BEGIN $1PRIVATE KEY$2-----' },
  { name: 'private key', pattern: new RegExp(String.raw`${KEY_BODY}-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----`, 'g'), keep: '' },
  { name: 'AWS access key id', pattern: /\b((?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16})\b/g, keep: '' },
  // A 40-character AWS secret key, where it is named as one.
  { name: 'AWS secret access key', pattern: /\b(aws[\w.-]{0,20}secret[\w.-]{0,20}\\*["']?\s*[:=]\s*\\*["']?)[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])/gi, keep: '$1' },
  { name: 'model API key', pattern: /\bsk-[A-Za-z0-9_-]{16,}/g, keep: '' }, // OpenAI, Anthropic, and the gateway's own sk-warden- keys
  { name: 'GitHub token', pattern: /\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{22,})/g, keep: '' },
  { name: 'GitLab token', pattern: /\bglpat-[A-Za-z0-9_-]{20,}/g, keep: '' },
  { name: 'Slack token', pattern: /\bxox[abposr]-[A-Za-z0-9-]{10,}/g, keep: '' },
  { name: 'Slack webhook', pattern: /\bhttps:\/\/hooks\.slack\.com\/(?:services|workflows|triggers)\/[A-Za-z0-9_/-]{16,}/g, keep: '' },
  { name: 'Google API key', pattern: /\bAIza[0-9A-Za-z_-]{35}/g, keep: '' },
  { name: 'Stripe key', pattern: /\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}/g, keep: '' },
  { name: 'npm token', pattern: /\bnpm_[A-Za-z0-9]{36}\b/g, keep: '' },
  // Shapes the secret scan's rules know too (src/safety/secret-scan.ts), so a lineage file never holds one.
  { name: 'Groq key', pattern: /\bgsk_[A-Za-z0-9]{52}\b/g, keep: '' },
  { name: 'Hugging Face token', pattern: /\bhf_[A-Za-z]{34}\b/g, keep: '' },
  { name: 'Linear key', pattern: /\blin_api_[A-Za-z0-9_]{32,128}/g, keep: '' },
  { name: 'Notion token', pattern: /\bntn_[0-9]{11}[A-Za-z0-9]{35}\b/g, keep: '' },
  { name: 'SendGrid key', pattern: /\bSG\.[\w-]{16,128}\.[\w-]{16,128}/g, keep: '' },
  { name: 'Shopify token', pattern: /\bshp(?:at|ss|ca|pa)_[A-Za-z0-9]{32,64}\b/g, keep: '' },
  { name: 'Grafana token', pattern: /\b(?:glc_[A-Za-z0-9+/]{32,400}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})/g, keep: '' },
  { name: '1Password token', pattern: /\bops_ey[A-Za-z0-9+/=]{100,1280}/g, keep: '' },
  { name: 'Vault token', pattern: /\bhv[sbr]\.[A-Za-z0-9_-]{90,300}/g, keep: '' },
  { name: 'Vercel token', pattern: /\bvc[pikar]_[A-Za-z0-9]{20,60}\b/g, keep: '' },
  { name: 'Databricks token', pattern: /\bdapi[A-Fa-f0-9]{32}(?:-[0-9])?\b/g, keep: '' },
  { name: 'Docker token', pattern: /\bdckr_pat_[A-Za-z0-9_-]{27}/g, keep: '' },
  { name: 'Figma token', pattern: /\bfigd_[A-Za-z0-9_-]{40,200}/g, keep: '' },
  { name: 'JSON web token', pattern: /\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g, keep: '' },
  // An Authorization header line: everything after the name (Digest and others carry several parts).
  { name: 'authorization header', pattern: /^([ \t]*(?:proxy-)?authorization:[ \t]*)\S[^\r\n]*/gim, keep: '$1' },
  // A credential header or field, whatever its scheme (Bearer, Basic, Token, Digest, …), also as
  // JSON or escaped JSON: the name stays, scheme and value go.
  {
    name: 'credential field',
    pattern: new RegExp(String.raw`\b(${CREDENTIAL_FIELD})(\\*["']?\s*[:=]\s*\\*["']?\s*)(?:[A-Za-z][\w-]*\s+)?[^\s"'\\,;]{6,}`, 'gi'),
    keep: '$1$2',
  },
  { name: 'bearer token', pattern: /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{12,}/gi, keep: '' }, // Authorization values quoted without their header
  // Bounded user and password: unbounded, a long URL-like run with no @ cost time by the square of its length.
  { name: 'database password', pattern: /\b(?:postgres(?:ql)?|mongodb(?:\+srv)?|(?:jdbc:)?mysqlx?):\/\/[^:\s/]{1,256}:[^@\s]{1,1024}@/g, keep: '' },
  // NAME=value lines of secret-named variables (an environment dump), even of variables we do not have.
  // The name is taken whole (lookahead and backreference), then checked for a secret word: trying
  // each place the word could be cost time by the square of the name's length.
  { name: 'secret variable', pattern: /\b(?=([A-Z][A-Z0-9_]*))\1(?<=(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD)[A-Z0-9_]*)=(?!\[redacted\])[^\s"'\\]{8,}/g, keep: '$1=' },
];

/** The kinds of secret shape found in `text` (e.g. to refuse a command line that holds one). */
export function secretShapesIn(text: string): string[] {
  const found = new Set<string>();
  for (const shape of SECRET_SHAPES) {
    shape.pattern.lastIndex = 0;
    if (shape.pattern.test(text)) found.add(shape.name);
    shape.pattern.lastIndex = 0;
  }
  return [...found];
}

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
    for (const { pattern, keep } of SECRET_SHAPES) out = out.replace(pattern, `${keep}${REDACTED}`);
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
