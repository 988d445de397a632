import { setHandler } from '@temporalio/workflow';
import { MAX_BY_LENGTH, MAX_REASON_LENGTH } from '../shared/decisions';
import { pauseSignal, resumeSignal, type PauseRequest } from '../shared/messages';
import { setStatus } from './intent-status';
import type { IntentRun } from './run-context';

/**
 * Signals `pause` and `resume`: a pause holds the next stage activity (an agent call, the tests,
 * a check, the archive or the merge) until a resume; ledger writes and the final cleanup are
 * never held. Each is written to the ledger as an OVERRIDE; a repeated one changes nothing.
 */
export function handlePauseSignals(run: IntentRun): void {
  const { guard, state, ledger } = run;
  setHandler(pauseSignal, (raw: unknown) => {
    if (guard.paused) return;
    // Anything may arrive (the Web UI, raw gRPC): a pause holds the intent whatever it says, which is the safe side.
    const request = pauseRequestOf(raw);
    guard.paused = true;
    state.paused = { by: request.by, reason: request.reason, at: new Date().toISOString() };
    setStatus(state, 'paused');
    ledger.event('OVERRIDE', 'info', `paused by ${state.paused.by}${request?.reason ? `: ${request.reason}` : ''}`, { stage: state.stage });
  });
  setHandler(resumeSignal, (raw: unknown) => {
    if (!guard.paused) return;
    const request = pauseRequestOf(raw);
    guard.paused = false;
    state.paused = undefined;
    setStatus(state, state.pendingGate ? 'waiting' : 'running', state.pendingGate?.gate ?? null);
    ledger.event('OVERRIDE', 'info', `resumed by ${request.by}`, { stage: state.stage });
  });
}

/** Who asked and why, from whatever arrived: strings only, capped like a decision's. */
function pauseRequestOf(raw: unknown): PauseRequest {
  const fields = typeof raw === 'object' && raw !== null && !Array.isArray(raw) ? (raw as Record<string, unknown>) : {};
  const by = typeof fields.by === 'string' && fields.by.trim() ? fields.by.trim().slice(0, MAX_BY_LENGTH) : 'unknown';
  const reason = typeof fields.reason === 'string' && fields.reason.trim() ? fields.reason.trim().slice(0, MAX_REASON_LENGTH) : undefined;
  return { by, ...(reason !== undefined ? { reason } : {}) };
}
