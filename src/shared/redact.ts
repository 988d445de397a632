/** Environment variables whose values are secrets wherever they appear. */
export const SECRET_ENV_NAME = /(_KEY|_TOKEN|_SECRET|_PASSWORD|^DATABASE_URL)$/i;

/** Shapes of credentials that are secrets even when we were not told their value. */
const SECRET_SHAPES: readonly RegExp[] = [
  /\bsk-[A-Za-z0-9_-]{16,}/g, // OpenAI / Anthropic style keys
  /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{12,}/gi, // Authorization header values
  /\b(gh[pousr]_[A-Za-z0-9]{20,})/g, // GitHub tokens
  /\bpostgres(?:ql)?:\/\/[^:\s/]+:[^@\s]+@/g, // passwords inside connection strings
];

export const REDACTED = '[redacted]';

/** Replaces secrets in text: one function, applied to everything that leaves an activity. */
export type Redactor = (text: string) => string;

/**
 * Builds a redactor from the secret values in `env` (variables named *_KEY, *_TOKEN, *_SECRET,
 * *_PASSWORD, DATABASE_URL) plus well-known credential shapes. Values shorter than 8 characters
 * are ignored: replacing them would shred ordinary text.
 */
export function createRedactor(env: NodeJS.ProcessEnv): Redactor {
  const values = Object.entries(env)
    .filter(([name, value]) => SECRET_ENV_NAME.test(name) && typeof value === 'string' && value.length >= 8)
    .map(([, value]) => value as string)
    .sort((a, b) => b.length - a.length);
  return (text: string): string => {
    let out = text;
    for (const value of values) out = out.split(value).join(REDACTED);
    for (const shape of SECRET_SHAPES) out = out.replace(shape, REDACTED);
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
