import type { GlobalStop } from '../ledger/types';
import type { RuntimeConfig } from '../runtime/config';
import type { IntentState } from '../shared/state';
import { queryState } from './intents';
import { connectTemporal, openLedger } from './session';

/** What decides whether an approved intent goes on: its pause, and the global stop flag. */
export interface ApprovalFacts {
  readonly paused?: IntentState['paused'];
  readonly stop?: GlobalStop;
  /** Set when the global stop flag could not be read. */
  readonly stopUnknown?: string;
}

/**
 * What `warden approve` must add when the approval does not let the intent go on: a recorded
 * decision is not a merge while the global stop is set (the intent halts before its next stage)
 * or while the intent is paused (nothing runs until it is resumed). Empty when it simply goes on.
 */
export function approvalOutlook(id: string, gate: string, facts: ApprovalFacts): string[] {
  const nothingMerged = gate === 'merge' ? ' and nothing is merged' : '';
  const lines: string[] = [];
  if (facts.stop?.stopped) {
    lines.push(
      `Warden is stopped (global stop set by ${facts.stop.by ?? 'someone'}: ${facts.stop.reason ?? 'no reason given'}): the decision is recorded, but ${id} halts before its next stage${nothingMerged}. Once it is safe: warden unlock --reason TEXT, then warden resume ${id}.`,
    );
  } else if (facts.stopUnknown) {
    lines.push(`Could not read the global stop flag (${facts.stopUnknown}); while it is set, ${id} halts before its next stage${nothingMerged}.`);
  }
  if (facts.paused) {
    lines.push(`${id} is paused (by ${facts.paused.by}${facts.paused.reason ? `: ${facts.paused.reason}` : ''}): nothing runs${nothingMerged} until warden resume-run ${id}.`);
  }
  return lines;
}

/** Reads the facts for `approvalOutlook`; the decision is already sent, so a failed read only says so. */
export async function readApprovalFacts(config: RuntimeConfig, id: string): Promise<ApprovalFacts> {
  const target = await connectTemporal(config, () => undefined);
  let paused: IntentState['paused'];
  try {
    paused = (await queryState(target.client, id)).paused;
  } catch {
    // It may have ended already (a rejection, or a halt): nothing is held then.
  } finally {
    await target.close();
  }
  try {
    const { ledger, database } = await openLedger(config, () => undefined);
    try {
      return { paused, stop: await ledger.globalStop.current() };
    } finally {
      await database.close();
    }
  } catch (error) {
    return { paused, stopUnknown: error instanceof Error ? error.message : String(error) };
  }
}
