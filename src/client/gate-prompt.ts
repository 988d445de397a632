import type { Decision } from '../shared/decisions';
import { renderDocumentFacts, renderReviewPackage } from '../shared/review-package';
import type { PendingGate } from '../shared/state';

/** A waiting gate as text: what is asked, why a person must answer, until when, and the package. */
export function renderPendingGate(intentId: string, pending: PendingGate): string {
  const lines = [
    `${intentId} waits at the ${pending.gate} gate (since ${pending.requestedAt}; times out ${pending.timeoutAt})`,
    pending.prompt,
    pending.humanOnly ? 'This gate always needs a person.' : pending.whyNotAutomatic ? `Not passed automatically: ${pending.whyNotAutomatic}.` : '',
  ];
  if (pending.document) lines.push('', renderDocumentFacts(pending.document).replace(/\*\*/g, ''));
  if (pending.package) lines.push('', renderReviewPackage(pending.package).replace(/\*\*/g, ''));
  lines.push('', `approve: warden approve ${intentId}   reject: warden reject ${intentId} --reason "…"   conditions: warden approve ${intentId} --conditions "…"`);
  if (pending.changes) lines.push(`request changes: warden request-changes ${intentId} --reason "…"`);
  if (pending.editable) lines.push(`edit, then approve: warden approve ${intentId} --edited FILE (the document is ${pending.editable} in the worktree)`);
  return lines.filter((l, i) => l !== '' || i > 0).join('\n');
}

/** What the interactive prompt needs from a terminal (readline's `question`, or a test's script). */
export interface Asker {
  question(text: string): Promise<string>;
}

/**
 * Asks a person at a TTY: shows the gate's summary (and package), then approve / reject (with a
 * reason) / approve with conditions / defer. Returns the decision to send, without `by`.
 */
export async function askAtGate(asker: Asker, intentId: string, pending: PendingGate, print: (line: string) => void): Promise<Omit<Decision, 'by'>> {
  print(renderPendingGate(intentId, pending));
  for (;;) {
    const answer = (await asker.question(`[a]pprove / [r]eject / approve with [c]onditions / [d]efer${pending.changes ? ' / request c[h]anges' : ''}: `)).trim().toLowerCase();
    const gate = pending.gate;
    if (['a', 'approve', 'y', 'yes'].includes(answer)) return { gate, decision: 'approve' };
    if (['r', 'reject', 'n', 'no'].includes(answer)) {
      const reason = (await asker.question('Reason for rejecting: ')).trim() || 'rejected at the prompt';
      return { gate, decision: 'reject', reason };
    }
    if (['c', 'conditions'].includes(answer)) {
      const conditions = (await asker.question('Conditions for the next stage (separate with ;): '))
        .split(';')
        .map((c) => c.trim())
        .filter(Boolean);
      if (conditions.length > 0) return { gate, decision: 'approve-with-conditions', conditions };
      print('no condition given; asking again');
      continue;
    }
    if (['d', 'defer'].includes(answer)) return { gate, decision: 'defer' };
    if (pending.changes && ['h', 'changes'].includes(answer)) {
      const reason = (await asker.question('Changes to make (the stage runs again with them): ')).trim();
      if (reason) return { gate, decision: 'request-changes', reason };
      print('no change given; asking again');
      continue;
    }
    print(`"${answer}" is not one of a, r, c, d${pending.changes ? ', h' : ''}`);
  }
}
