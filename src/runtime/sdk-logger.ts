import type { LogLevel, LogMetadata, Logger as SdkLogger } from '@temporalio/common';
import type { Logger } from 'pino';

const PINO_LEVEL = { TRACE: 'trace', DEBUG: 'debug', INFO: 'info', WARN: 'warn', ERROR: 'error' } as const satisfies Record<LogLevel, string>;

/**
 * The Temporal SDK's logger (its own messages, Core's forwarded ones and workflow `log` calls)
 * written through Warden's pino logger: one JSON line each, through the same secret redaction,
 * instead of the SDK's multi-line text blocks. Messages below `minLevel` are dropped.
 */
export function pinoSdkLogger(logger: Logger, minLevel: LogLevel = 'WARN'): SdkLogger {
  const sdk = logger.child({ source: 'temporal-sdk' }, { level: PINO_LEVEL[minLevel] });
  const log = (level: LogLevel, message: string, meta?: LogMetadata): void => {
    const { error, ...rest } = meta ?? {};
    // Under `err`, pino's error serializer keeps the message, type and stack (and their causes).
    const fields = error === undefined ? rest : { ...rest, err: error };
    sdk[PINO_LEVEL[level] ?? 'info'](fields, message);
  };
  return {
    log,
    trace: (message, meta) => log('TRACE', message, meta),
    debug: (message, meta) => log('DEBUG', message, meta),
    info: (message, meta) => log('INFO', message, meta),
    warn: (message, meta) => log('WARN', message, meta),
    error: (message, meta) => log('ERROR', message, meta),
  };
}
