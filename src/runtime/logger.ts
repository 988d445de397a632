import pino, { type Logger } from 'pino';
import { createRedactor, REDACTED, type Redactor } from '../shared/redact';

/**
 * Field names whose values never reach a log line, whatever they hold, at any depth and in any
 * case (`authorization`, `Authorization`, `X-Api-Key` alike: HTTP header names are case-insensitive).
 */
const SECRET_FIELD = /^(?:(?:proxy-)?authorization|x-api-key|api[-_]?key|x-auth-token|(?:access[-_]?|refresh[-_]?|id[-_]?)?token|password|passwd|secret|client[-_]?secret|cookie|set-cookie)$/i;

/** Deepest nesting censored; deeper values are still scrubbed as text by the redactor. */
const MAX_DEPTH = 8;

/** A copy of `value` with the values of secret-named fields replaced; errors are kept as they are. */
export function censorSecretFields(value: unknown, depth = 0): unknown {
  if (depth > MAX_DEPTH || !value || typeof value !== 'object' || value instanceof Error || value instanceof Date) return value;
  if (Array.isArray(value)) return value.map((v) => censorSecretFields(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) out[key] = SECRET_FIELD.test(key) ? REDACTED : censorSecretFields(v, depth + 1);
  return out;
}

export interface LoggerOptions {
  readonly level: string;
  /** Secret values to scrub from every line (defaults to those in process.env). */
  readonly redact?: Redactor;
  readonly destination?: pino.DestinationStream;
}

/**
 * Warden's JSON logger (pino), to stderr so command output on stdout stays clean. Secret-named
 * fields are censored, and every line is scrubbed of secret values and credential shapes.
 */
export function createLogger(options: LoggerOptions | string): Logger {
  const { level, redact = createRedactor(process.env), destination = pino.destination(2) } =
    typeof options === 'string' ? { level: options } : options;
  return pino(
    {
      level,
      base: { app: 'warden' },
      formatters: {
        // The fields of each call (pino does not run formatters on a child's bindings; ours bind ids only).
        log: (object) => censorSecretFields(object) as Record<string, unknown>,
      },
      hooks: {
        // Scrub the serialised line: catches secrets in messages and nested fields alike.
        streamWrite: (line: string) => redact(line),
      },
    },
    destination,
  );
}
