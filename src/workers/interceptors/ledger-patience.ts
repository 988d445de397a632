import { existsSync } from 'node:fs';
import path from 'node:path';
import { types } from 'node:util';
import type { Context } from '@temporalio/activity';
import pg from 'pg';
import type { Logger } from 'pino';
import { ZodError } from 'zod';
import { activityLogger } from '../../activities/log-context';
import type { Ledger } from '../../ledger/ledger';
import { LedgerError } from '../../ledger/ledger-error';

/*
 * What the worker's interceptors share about the ledger: waiting out a database that cannot be
 * reached, and reading the kill switches (one of which, the global stop flag, lives there).
 */

/** Longest pause between two tries of an unreachable ledger: well inside a 10 s heartbeat timeout. */
export const LEDGER_RETRY_MAX_MS = 4_000;
/** Stop waiting for the ledger this long before the attempt's start-to-close timeout. */
const DEADLINE_MARGIN_MS = 5_000;
/** SQLSTATE classes worth waiting out: connection, resources, operator intervention, serialization. */
const TRANSIENT_SQLSTATE_CLASSES = new Set(['08', '40', '53', '57']);

/** When an attempt that started at `startedMs` must stop waiting for the ledger. */
export function ledgerDeadlineOf(ctx: Context, startedMs: number): number {
  return startedMs + (ctx.info.startToCloseTimeoutMs > 0 ? ctx.info.startToCloseTimeoutMs : 60_000) - DEADLINE_MARGIN_MS;
}

/**
 * Runs a ledger operation, waiting out an unreachable database until `deadlineMs`. The attempt
 * heartbeats meanwhile, also while one try hangs (a server that stops answering holds it until
 * the pool's query timeout). A bad row or a state conflict is thrown at once: waiting will not help.
 */
export async function patientlyWithLedger<T>(ctx: Context, logger: Logger, deadlineMs: number, what: string, fn: () => Promise<T>): Promise<T> {
  for (let waitMs = 250; ; waitMs = Math.min(waitMs * 2, LEDGER_RETRY_MAX_MS)) {
    const beating = setInterval(() => ctx.heartbeat(), LEDGER_RETRY_MAX_MS);
    try {
      return await fn();
    } catch (error) {
      if (!isTransientLedgerError(error) || ctx.cancellationSignal.aborted || Date.now() + waitMs > deadlineMs) throw error;
      activityLogger(logger).warn({ error: error instanceof Error ? error.message : String(error), retryInMs: waitMs }, `ledger unreachable; waiting to ${what}`);
      ctx.heartbeat();
      await ctx.sleep(waitMs);
    } finally {
      clearInterval(beating);
    }
  }
}

function isTransientLedgerError(error: unknown): boolean {
  if (error instanceof LedgerError || error instanceof ZodError) return false;
  if (error instanceof pg.DatabaseError) return TRANSIENT_SQLSTATE_CLASSES.has((error.code ?? '').slice(0, 2));
  // A socket error (ECONNREFUSED, a reset) is made by Node itself: where this code runs in a
  // context of its own (a test VM), it is not an instance of this context's Error.
  return error instanceof Error || types.isNativeError(error);
}

/** Where the emergency stop file lives when the worker is not told otherwise. */
export const DEFAULT_EMERGENCY_STOP_FILE = path.join('.warden', 'EMERGENCY_STOP');

/** The kill switches a worker obeys besides the ledger's global stop flag. */
export interface KillSwitchOptions {
  /** False when WARDEN_ENABLED=false: the worker starts no agent work at all. */
  readonly enabled: boolean;
  /** While this file exists, the worker starts no agent work. */
  readonly emergencyStopFile: string;
}

/** Which kill switch is on, and what to do about it. */
export interface KillSwitchOn {
  readonly source: 'WARDEN_ENABLED' | 'EMERGENCY_STOP' | 'global_stop';
  readonly reason: string;
  readonly suggestion: string;
}

/**
 * Which kill switch is on, if any: the cheap local ones first (WARDEN_ENABLED on this worker, the
 * emergency stop file), then the ledger's global stop flag, read through `readGlobalStop`.
 */
export async function killSwitchOn(enabled: boolean, stopFile: string, readGlobalStop: () => ReturnType<Ledger['globalStop']['current']>): Promise<KillSwitchOn | undefined> {
  if (!enabled) {
    return {
      source: 'WARDEN_ENABLED',
      reason: 'Warden is disabled on this worker (WARDEN_ENABLED=false)',
      suggestion: 'Unset WARDEN_ENABLED (or set it to true), restart the worker, then resume the intent (warden resume ID).',
    };
  }
  if (existsSync(stopFile)) {
    return { source: 'EMERGENCY_STOP', reason: `the emergency stop file ${stopFile} exists`, suggestion: `Remove ${stopFile} once it is safe, then resume the intent (warden resume ID).` };
  }
  const stop = await readGlobalStop();
  if (stop.stopped) {
    return {
      source: 'global_stop',
      reason: `global stop set by ${stop.by ?? 'someone'}: ${stop.reason ?? 'no reason given'}`,
      suggestion: 'Once it is safe: warden unlock --reason TEXT, then resume the intent (warden resume ID).',
    };
  }
  return undefined;
}
