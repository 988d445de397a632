import { condition, setHandler } from '@temporalio/workflow';
import { MAX_BY_LENGTH, MAX_REASON_LENGTH } from '../shared/decisions';
import { DURATION_PATTERN, parseDuration } from '../shared/duration';
import { haltFailure } from './halts';
import { withWatch } from './time-limits';
import { pauseSignal, resumeSignal, type PauseRequest } from '../shared/messages';
import { setStatus, showInMemo } from './intent-status';
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
    state.paused = { by: request.by, reason: request.reason, at: new Date().toISOString(), timeout: request.timeout ?? run.intent.limits.pauseTimeout };
    setStatus(state, 'paused');
    showInMemo({ paused: state.paused });
    ledger.event('OVERRIDE', 'info', `paused by ${state.paused.by}${request?.reason ? `: ${request.reason}` : ''} (for at most ${state.paused.timeout}, then: ${run.intent.limits.onPauseTimeout})`, { stage: state.stage });
  });
  setHandler(resumeSignal, (raw: unknown) => {
    if (!guard.paused) return;
    resume(run, pauseRequestOf(raw).by);
  });
}

function resume(run: IntentRun, by: string): void {
  const { guard, state, ledger } = run;
  guard.paused = false;
  state.paused = undefined;
  setStatus(state, state.pendingGate ? 'waiting' : 'running', state.pendingGate?.gate ?? null);
  showInMemo({ paused: null });
  ledger.event('OVERRIDE', 'info', `resumed by ${by}`, { stage: state.stage });
}

/**
 * Runs the pipeline under the pause's timeout: a pause that outlives its timeout (the request's,
 * else `limits.pauseTimeout`) is escalated like a gate, then its policy applies: `resume` lets the
 * intent go on, `stop` (default) cancels the pipeline and halts the intent.
 */
export function withinPauseLimit<T>(run: IntentRun, body: () => Promise<T>): Promise<T> {
  let why = '';
  return withWatch(
    async () => {
      why = await untilPauseExpires(run);
    },
    () => haltFailure('TIME_LIMIT_EXCEEDED', { detail: why, suggestion: 'resume a paused intent (warden resume-run ID) before its pause times out, or pause it with a longer --timeout', current: 0, threshold: 0 }),
    body,
  );
}

/** Resolves, with why, once a pause outlives its timeout under the `stop` policy; a `resume` policy resumes and keeps watching. */
async function untilPauseExpires(run: IntentRun): Promise<string> {
  const { guard, state, ledger, intent } = run;
  for (;;) {
    await condition(() => guard.paused);
    const paused = state.paused!;
    const timeout = paused.timeout ?? intent.limits.pauseTimeout;
    if (await condition(() => !guard.paused || state.paused !== paused, parseDuration(timeout))) continue;
    const policy = intent.limits.onPauseTimeout;
    const what = `paused by ${paused.by} at ${paused.at} and not resumed within ${timeout}`;
    ledger.event('GATE_ESCALATED', 'high', `${what}; escalated to the intent owner; timeout policy: ${policy}`, {
      stage: state.stage,
      metadata: { gate: 'pause', escalateTo: 'the intent owner', policy, pausedBy: paused.by },
      suggestion: 'resume or stop paused intents sooner, or set limits.pauseTimeout / onPauseTimeout in the config',
    });
    if (policy === 'resume') {
      resume(run, 'warden (pause timeout)');
      continue;
    }
    return `${what} (limits.pauseTimeout; policy: stop)`;
  }
}

/** Who asked and why, from whatever arrived: strings only, capped like a decision's. */
function pauseRequestOf(raw: unknown): PauseRequest {
  const fields = typeof raw === 'object' && raw !== null && !Array.isArray(raw) ? (raw as Record<string, unknown>) : {};
  const by = typeof fields.by === 'string' && fields.by.trim() ? fields.by.trim().slice(0, MAX_BY_LENGTH) : 'unknown';
  const reason = typeof fields.reason === 'string' && fields.reason.trim() ? fields.reason.trim().slice(0, MAX_REASON_LENGTH) : undefined;
  // A timeout that does not parse is dropped: the configured one applies, never none.
  const timeout = typeof fields.timeout === 'string' && DURATION_PATTERN.test(fields.timeout.trim()) && parseDuration(fields.timeout.trim()) > 0 ? fields.timeout.trim() : undefined;
  return { by, ...(reason !== undefined ? { reason } : {}), ...(timeout !== undefined ? { timeout } : {}) };
}
