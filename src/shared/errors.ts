/**
 * Failure types. Activities throw `ApplicationFailure`s with these types; the workflow and CLI
 * route on them. Keeping them in one list means a typo is a compile error, not a silent retry.
 */
export const FailureType = {
  InvalidIntent: 'INVALID_INTENT',
  InvalidScript: 'INVALID_SCRIPT',
  AgentFailed: 'AGENT_FAILED',
  AgentTimedOut: 'AGENT_TIMED_OUT',
  AgentOutputTooLarge: 'AGENT_OUTPUT_TOO_LARGE',
  ImplAttemptsExhausted: 'IMPL_ATTEMPTS_EXHAUSTED',
  GitFailed: 'GIT_FAILED',
  MergeConflict: 'MERGE_CONFLICT',
  BaseBranchDirty: 'BASE_BRANCH_DIRTY',
  PathOutsideWorktree: 'PATH_OUTSIDE_WORKTREE',
} as const;
export type FailureType = (typeof FailureType)[keyof typeof FailureType];

/** Failure types that no retry can fix. */
export const NON_RETRYABLE_FAILURES: readonly FailureType[] = [
  FailureType.InvalidIntent,
  FailureType.InvalidScript,
  FailureType.AgentOutputTooLarge,
  FailureType.ImplAttemptsExhausted,
  FailureType.MergeConflict,
  FailureType.BaseBranchDirty,
  FailureType.PathOutsideWorktree,
];

/** An error the CLI reports as one line and exit code `exitCode` (2 = bad input). */
export class UserError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = 2,
  ) {
    super(message);
    this.name = 'UserError';
  }
}
