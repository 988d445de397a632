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
  GitFailed: 'GIT_FAILED',
  MergeConflict: 'MERGE_CONFLICT',
  /** `warden revert`: later commits on the base changed what the merge changed. */
  RevertConflict: 'REVERT_CONFLICT',
  BaseBranchDirty: 'BASE_BRANCH_DIRTY',
  PathOutsideWorktree: 'PATH_OUTSIDE_WORKTREE',
  UnknownModel: 'UNKNOWN_MODEL',
  /** A safety limit halted the intent; the failure's details carry the SafetyEvent to write. */
  SafetyHalt: 'SAFETY_HALT',
  KillSwitch: 'KILL_SWITCH',
  /** The model endpoint's circuit is open: retry after the failure's nextRetryDelay. */
  CircuitOpen: 'CIRCUIT_OPEN',
  /** An agent or model token bucket is empty: retry after the failure's nextRetryDelay. */
  RateLimited: 'RATE_LIMITED',
  /** The worker's agent-call error rate is critical: retry after the failure's nextRetryDelay. */
  ErrorRateCritical: 'ERROR_RATE_CRITICAL',
  /** The day's budget, or the agent's, has no room for this call's maximum cost. */
  BudgetExceeded: 'BUDGET_EXCEEDED',
  /** The sandbox the intent's risk (or the agent's profile) requires cannot be had on this worker. */
  SandboxUnavailable: 'SANDBOX_UNAVAILABLE',
  /** The model endpoint answered 5xx, timed out or sent something unreadable, three times in a row. */
  ModelUnavailable: 'MODEL_UNAVAILABLE',
  /** The answer came from another model than the profile asked for: fail closed. */
  ModelMismatch: 'MODEL_MISMATCH',
  /** Every API key of the profile was refused (auth or quota): the intent stops at this stage. */
  CredentialsExhausted: 'CREDENTIALS_EXHAUSTED',
  /** A text stage's answer did not validate, even after one repair attempt. */
  InvalidStructuredOutput: 'INVALID_STRUCTURED_OUTPUT',
  /** Development mode refuses paid cloud endpoints. */
  ModeViolation: 'MODE_VIOLATION',
  /** Review would run on the same model family as impl, or on a model never allowed to review. */
  ReviewPolicyViolation: 'REVIEW_POLICY_VIOLATION',
  /** The forge refused or failed a call (details: its ForgeError kind); retryable only where a retry may help. */
  ForgeFailed: 'FORGE_FAILED',
  /** A replayed intent made a model request its recording has no answer for: the replay ends there. */
  ReplayDiverged: 'REPLAY_DIVERGED',
} as const;
export type FailureType = (typeof FailureType)[keyof typeof FailureType];

/** Failure types that no retry can fix. */
export const NON_RETRYABLE_FAILURES: readonly FailureType[] = [
  FailureType.InvalidIntent,
  FailureType.InvalidScript,
  FailureType.AgentOutputTooLarge,
  FailureType.MergeConflict,
  FailureType.RevertConflict,
  FailureType.BaseBranchDirty,
  FailureType.PathOutsideWorktree,
  FailureType.UnknownModel,
  FailureType.SafetyHalt,
  FailureType.KillSwitch,
  FailureType.BudgetExceeded,
  FailureType.SandboxUnavailable,
  FailureType.ModelMismatch,
  FailureType.CredentialsExhausted,
  FailureType.InvalidStructuredOutput,
  FailureType.ModeViolation,
  FailureType.ReviewPolicyViolation,
  FailureType.ReplayDiverged,
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
