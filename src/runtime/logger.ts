import pino, { type Logger } from 'pino';
import { createRedactor, type Redactor } from '../shared/redact';

/** Fields whose values never reach a log line, whatever they hold. */
const REDACT_PATHS = [
  'apiKey',
  '*.apiKey',
  'authorization',
  '*.authorization',
  'headers.authorization',
  '*.headers.authorization',
  'headers["x-api-key"]',
  '*.headers["x-api-key"]',
  'token',
  '*.token',
  'password',
  '*.password',
];

export interface LoggerOptions {
  readonly level: string;
  /** Secret values to scrub from every line (defaults to those in process.env). */
  readonly redact?: Redactor;
  readonly destination?: pino.DestinationStream;
}

/**
 * Warden's JSON logger (pino), to stderr so command output on stdout stays clean. Known secret
 * fields are censored by path, and every line is scrubbed of secret values and credential shapes.
 */
export function createLogger(options: LoggerOptions | string): Logger {
  const { level, redact = createRedactor(process.env), destination = pino.destination(2) } =
    typeof options === 'string' ? { level: options } : options;
  return pino(
    {
      level,
      base: { app: 'warden' },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      hooks: {
        // Scrub the serialised line: catches secrets in messages and nested fields alike.
        streamWrite: (line: string) => redact(line),
      },
    },
    destination,
  );
}
