import { setCurrentDetails, upsertMemo, upsertSearchAttributes } from '@temporalio/workflow';
import { ZERO_USD } from '../shared/money';
import { branchForIntent } from '../shared/ids';
import type { GateName } from '../shared/gates';
import { WardenGate, WardenStage, WardenStatus } from '../shared/search-attributes';
import type { Stage } from '../shared/stages';
import type { IntentMemo, IntentState, IntentStatus } from '../shared/state';
import type { LedgerRecorder } from './ledger-recorder';

/**
 * What an intent shows of itself while it runs: the `state` query's answer, the search
 * attributes `warden list` and the Web UI filter on, its memo (what `warden status` reads with no
 * worker up), and the Web UI's current details.
 */

/** The state of an intent that has not started any stage yet. */
export function startingState(intentId: string, goal: string): IntentState {
  return {
    intentId,
    goal,
    status: 'running',
    stage: 'triage',
    attempts: {},
    spendUsd: ZERO_USD,
    decisions: [],
    artifacts: {},
    branch: branchForIntent(intentId),
    tests: [],
    rejectedSignals: 0,
  };
}

/** Sets the intent's status, and the gate it waits at (null when none), in its state and search attributes. */
export function setStatus(state: IntentState, status: IntentStatus, gate: GateName | null = null): void {
  state.status = status;
  upsertSearchAttributes([
    { key: WardenStatus, value: status },
    { key: WardenGate, value: gate },
  ]);
}

/** Starts the next attempt of `stage`: counted, written to the ledger (STAGE_STARTED), and shown. */
export function enterStage(state: IntentState, ledger: LedgerRecorder, stage: Stage): void {
  state.stage = stage;
  state.attempts[stage] = (state.attempts[stage] ?? 0) + 1;
  ledger.event('STAGE_STARTED', 'info', `${stage} attempt ${state.attempts[stage]}`, { stage, metadata: { attempt: state.attempts[stage] } });
  upsertSearchAttributes([{ key: WardenStage, value: stage }]);
  setCurrentDetails(`**${state.goal}**\n\nStage: \`${stage}\` (attempt ${state.attempts[stage]}), spend $${state.spendUsd}`);
}

/** Once the lineage has moved (archived on merge, kept aside otherwise), the artifact paths follow it. */
export function relocateArtifacts(state: IntentState, from: string, to: string): void {
  for (const [name, artifactPath] of Object.entries(state.artifacts)) {
    if (artifactPath.startsWith(`${from}/`)) state.artifacts[name] = `${to}${artifactPath.slice(from.length)}`;
  }
}

/** A cooldown wait or a pause, into the memo as it starts, out (null) as it ends. */
export function showInMemo(facts: { readonly [K in 'cooldown' | 'paused']?: IntentMemo[K] | null }): void {
  upsertMemo(facts);
}
