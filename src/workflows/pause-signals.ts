import { setHandler } from '@temporalio/workflow';
import { pauseSignal, resumeSignal } from '../shared/messages';
import { setStatus } from './intent-status';
import type { IntentRun } from './run-context';

/**
 * Signals `pause` and `resume`: a pause holds the next stage activity (an agent call, the tests,
 * a check, the archive or the merge) until a resume; ledger writes and the final cleanup are
 * never held. Each is written to the ledger as an OVERRIDE; a repeated one changes nothing.
 */
export function handlePauseSignals(run: IntentRun): void {
  const { guard, state, ledger } = run;
  setHandler(pauseSignal, (request) => {
    if (guard.paused) return;
    guard.paused = true;
    state.paused = { by: String(request?.by ?? 'unknown'), reason: request?.reason, at: new Date().toISOString() };
    setStatus(state, 'paused');
    ledger.event('OVERRIDE', 'info', `paused by ${state.paused.by}${request?.reason ? `: ${request.reason}` : ''}`, { stage: state.stage });
  });
  setHandler(resumeSignal, (request) => {
    if (!guard.paused) return;
    guard.paused = false;
    state.paused = undefined;
    setStatus(state, state.pendingGate ? 'waiting' : 'running', state.pendingGate?.gate ?? null);
    ledger.event('OVERRIDE', 'info', `resumed by ${String(request?.by ?? 'unknown')}`, { stage: state.stage });
  });
}
