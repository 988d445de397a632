import { REDACTED } from './redact';

/**
 * What agent-written code tried that its sandbox stopped or kept to itself: evidence about the
 * agent, whatever became of the attempt. Each is one ESCAPE_ATTEMPTED (or ANSWER_REDACTED) row,
 * is listed at the merge gate, makes that gate a person's and lowers the agent's ladder level.
 * Never a payload: a port, a path in the sandbox's scratch space, a count. Pure data: the
 * workflow imports it.
 */
export type SandboxAttempt =
  /** A connection to a port the sandbox watches (see src/activities/sandbox-watch.ts), reset. */
  | { readonly kind: 'connect'; readonly port: number; readonly target: string; readonly address?: string }
  /** A shell rc file, credential path or git config written in the sandbox's scratch HOME or /tmp. */
  | { readonly kind: 'scratch-write'; readonly path: string }
  /** Secrets the model gateway cut from the model's answers before the agent saw them. */
  | { readonly kind: 'answer-redacted'; readonly count: number }
  /** Secrets cut from what the agent printed (its answer or log) before anything was stored. */
  | { readonly kind: 'output-redacted'; readonly count: number };

/** What one run of agent-written code (an agent attempt, a test run) was seen trying. */
export interface AttemptReport {
  readonly attempts: readonly SandboxAttempt[];
  /** Attempts beyond those kept, counted only. */
  readonly more: number;
}

/** The ledger's word for an attempt. */
export function attemptEventType(attempt: SandboxAttempt): 'ESCAPE_ATTEMPTED' | 'ANSWER_REDACTED' {
  return attempt.kind === 'answer-redacted' || attempt.kind === 'output-redacted' ? 'ANSWER_REDACTED' : 'ESCAPE_ATTEMPTED';
}

/** An attempt in words, for its ledger row, the gate and `warden status`. */
export function describeAttempt(attempt: SandboxAttempt): string {
  switch (attempt.kind) {
    case 'connect':
      return `connected to port ${attempt.port} (${attempt.target})${attempt.address ? ` at ${attempt.address.replace(/^::ffff:/, '')}` : ''}: refused`;
    case 'scratch-write':
      return `wrote ${attempt.path} in the sandbox's scratch space (thrown away with it)`;
    case 'answer-redacted':
      return `the model's answers held ${attempt.count} secret(s), cut by the gateway before the agent saw them`;
    case 'output-redacted':
      return `printed ${attempt.count} secret(s), cut before its output was stored`;
  }
}

/** How many attempts a report stands for. */
export function attemptCount(report: AttemptReport | undefined): number {
  return report ? report.attempts.length + report.more : 0;
}

/** How many secrets a redactor cut from `before` to give `after`: the markers it added. */
export function redactionsIn(before: string, after: string): number {
  const count = (text: string) => text.split(REDACTED).length - 1;
  return Math.max(0, count(after) - count(before));
}
