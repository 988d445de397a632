import { mkdirSync } from 'node:fs';
import path from 'node:path';
import pino, { type Logger } from 'pino';
import { createRedactor, REDACTED, type Redactor } from '../shared/redact';
import { forTerminalLine } from '../shared/control-characters';

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

/** Where a command's log goes: a file under the Warden home with warnings as lines on stderr, or JSON on stdout. */
export type LogFormat = 'human' | 'json';
export const LOG_FORMATS: readonly LogFormat[] = ['human', 'json'];

/** The day's log file under `<wardenHome>/logs/`. */
export function logFileFor(wardenHome: string, now: Date = new Date()): string {
  return path.join(wardenHome, 'logs', `warden-${now.toISOString().slice(0, 10)}.log`);
}

/**
 * The logger of a command a person runs. `json`: every record as a JSON line on stdout, for
 * collectors. `human`: every record to the day's file under the Warden home, and warnings and
 * errors as one readable line each on stderr (no stack traces), naming the file that holds the
 * full record. Where the file cannot be written, the readable lines still come.
 */
export function createCommandLogger(options: { level: string; format: LogFormat; wardenHome: string; stderr?: NodeJS.WritableStream; redact?: Redactor }): { logger: Logger; file?: string } {
  const redact = options.redact ?? createRedactor(process.env);
  if (options.format === 'json') return { logger: createLogger({ level: options.level, redact, destination: pino.destination(1) }) };
  const stderr = options.stderr ?? process.stderr;
  let file: string | undefined = logFileFor(options.wardenHome);
  let fileStream: pino.DestinationStream | undefined;
  try {
    mkdirSync(path.dirname(file), { recursive: true });
    // Synchronous: a command that exits at once (process.exit) must not lose its last lines.
    fileStream = pino.destination({ dest: file, sync: true, append: true });
  } catch {
    file = undefined;
  }
  let fileNamed = false;
  const console = {
    write: (json: string) => {
      const line = readableLine(json);
      if (line === undefined) return;
      // Messages carry agents' and repositories' words: shown on one line, escapes made visible.
      // The file is named once: every line after the first would only repeat it.
      const where = file && !fileNamed ? ` (full records in ${file})` : '';
      fileNamed ||= where !== '';
      stderr.write(`${forTerminalLine(line)}${where}\n`);
    },
  };
  const streams: pino.StreamEntry[] = [{ level: 'warn', stream: console }];
  if (fileStream) streams.push({ level: options.level as pino.Level, stream: fileStream });
  return { logger: createLogger({ level: options.level, redact, destination: pino.multistream(streams) }), file };
}

/**
 * One record as a line a person reads: level, what happened and where, the error's first line.
 * Undefined for the SDK's own report of a failed activity: Warden's interceptor reports the
 * same failure with the stage and attempt.
 */
export function readableLine(json: string): string | undefined {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.trimEnd();
  }
  if (record.source === 'temporal-sdk' && record.msg === 'Activity failed') return undefined;
  const level = typeof record.level === 'number' && record.level >= 50 ? 'error' : 'warning';
  const text = (value: unknown): string | undefined => (typeof value === 'string' && value ? value : undefined);
  const intent = text(record.intentId) ?? text(record.workflowId);
  const err = record.err as { message?: unknown } | undefined;
  const reason = text(err?.message) ?? text(record.error);
  if (record.msg === 'activity finished' && text(record.outcome)) {
    const stage = text(record.stage) ? ` (${String(record.stage)})` : '';
    const attempt = typeof record.activityAttempt === 'number' ? `, attempt ${record.activityAttempt}` : '';
    return `${level}: ${intent ?? 'an intent'}: ${String(record.activity)}${stage} ${String(record.outcome)}${attempt}${reason ? `: ${firstLine(reason)}` : ''}`;
  }
  const where = [text(record.activityType) ?? text(record.activity), intent].filter(Boolean).join(' of ');
  return `${level}: ${String(record.msg ?? '')}${where ? ` (${where})` : ''}${reason ? `: ${firstLine(reason)}` : ''}`;
}

function firstLine(text: string): string {
  const line = text.trim().split('\n')[0] ?? '';
  return line.length > 300 ? `${line.slice(0, 299)}…` : line;
}
