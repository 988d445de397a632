import pino, { type Logger } from 'pino';

/** Paths whose values never reach a log line. */
const REDACT = [
  'apiKey',
  '*.apiKey',
  'authorization',
  '*.authorization',
  'headers.authorization',
  '*.headers.authorization',
  'token',
  '*.token',
  'password',
  '*.password',
];

/** Warden's JSON logger (pino), to stderr so command output on stdout stays clean. */
export function createLogger(level: string, destination: NodeJS.WritableStream = process.stderr): Logger {
  return pino({ level, base: { app: 'warden' }, redact: { paths: REDACT, censor: '[redacted]' } }, destination as pino.DestinationStream);
}
