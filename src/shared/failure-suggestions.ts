import { FailureType } from './errors';

/*
 * What a person could do about a failed stage: every SafetyEvent that records a failure carries
 * one. Workflow-safe (no I/O); the workflow picks the entry by the failure's type.
 */

/** One suggestion per failure type the activities throw. */
export const FAILURE_SUGGESTIONS: Readonly<Record<FailureType, string>> = {
  [FailureType.InvalidIntent]: 'Fix the intent fields the message names and start it again (`warden run --help` lists them).',
  [FailureType.InvalidScript]: 'Fix the scripted agent\'s script where the message says, then `warden resume ID`.',
  [FailureType.AgentFailed]:
    'The agent failed on every try: read its output (`warden audit ID`, the lineage), run its command by hand in a checkout to see why, fix the command, its credentials or its model, then `warden resume ID`.',
  [FailureType.AgentTimedOut]:
    'The agent ran past its own timeout on every try: look at what it was doing in the lineage, give it a smaller task, or raise the agent profile\'s `timeout` deliberately, then `warden resume ID`.',
  [FailureType.AgentOutputTooLarge]: 'The agent printed more than the output cap: ask for a shorter answer (or fix a runaway loop in its command), then `warden resume ID`.',
  [FailureType.GitFailed]: 'A git command failed: check the repository (disk space, locks, a `.git/index.lock` left behind, permissions), then `warden resume ID`.',
  [FailureType.MergeConflict]: 'The base branch moved under the intent: merge or rebase the intent branch by hand, or start the intent again from the new base.',
  [FailureType.RevertConflict]: 'Later commits changed what the merge changed: revert it by hand on the base branch, or start an intent that undoes the change on top of what is there now.',
  [FailureType.BaseBranchDirty]: 'Commit or stash the uncommitted changes on the base branch, then `warden resume ID`.',
  [FailureType.PathOutsideWorktree]: 'The agent tried to write outside its worktree: check the agent (and its prompt) before running it again; narrow `--paths` if it wandered.',
  [FailureType.UnknownModel]: 'Add the model to `worker.pricing` in the config (USD per million input and output tokens), or pick a model that has a price, then `warden resume ID`.',
  [FailureType.SafetyHalt]: 'A safety limit halted the intent: read the limit\'s own event just before this one, decide whether the intent is worth more, then narrow it or raise that limit deliberately.',
  [FailureType.KillSwitch]: 'Warden is switched off (the global stop, WARDEN_ENABLED=false or the EMERGENCY_STOP file): once it is safe, clear it (`warden unlock --reason …` for the global stop), then `warden resume ID`.',
  [FailureType.CircuitOpen]: 'The model endpoint kept failing and its circuit stayed open: check the endpoint (status page, network, base URL), then `warden resume ID` once it answers.',
  [FailureType.RateLimited]: 'The agent\'s or model\'s token bucket stayed empty on every try: lower the load (fewer intents at once) or raise `worker.rateLimits`, then `warden resume ID`.',
  [FailureType.ErrorRateCritical]: 'Agent calls on this worker fail too often: look at the recent failures (`warden report`), fix their cause, then `warden resume ID`.',
  [FailureType.BudgetExceeded]: 'The day\'s or the agent\'s budget has no room for another call: wait for tomorrow\'s budget, or raise `worker.dayBudgetUsd` / `worker.agentDayBudgetUsd` deliberately.',
  [FailureType.SandboxUnavailable]: 'The sandbox this intent needs is missing on the worker: install it (e.g. bubblewrap) or run the intent on a worker that has it.',
  [FailureType.ModelUnavailable]: 'The model endpoint failed or timed out three times in a row on every try: check the endpoint, then `warden resume ID`.',
  [FailureType.ModelMismatch]: 'The endpoint answered with another model than the profile asks for: fix the profile\'s model name or the endpoint\'s routing before running it again.',
  [FailureType.CredentialsExhausted]: 'Every API key of the profile was refused: renew the key or its quota (in the environment, never in the config), then `warden resume ID`.',
  [FailureType.InvalidStructuredOutput]: 'The model\'s answer did not have the form the stage asks for, twice: use a stronger model for this stage (`routing`), then `warden resume ID`.',
  [FailureType.ModeViolation]: 'Development mode refuses paid cloud models: use a local model, or set `"mode": "production"` in the config if paid calls are meant.',
  [FailureType.ForgeFailed]: 'The forge refused or failed a call: check the worker\'s token (its variable is `merge.forge.tokenEnv`, its scopes with `warden doctor`), the remote and the branch protection, then `warden resume ID`.',
  [FailureType.ReviewPolicyViolation]: 'Route review to another model family than impl (`routing.review`), or change `review` in the config deliberately.',
  [FailureType.ReplayDiverged]:
    'The replayed agent asked the model something the original did not: the message names the first difference. What changed before it (the prompt, the config, the agent CLI) is what the recording cannot answer for; the replay shows what happened up to there.',
};

/** Timeouts the server enforces on an activity, by the SDK's timeout type. */
const TIMEOUT_SUGGESTIONS: Readonly<Record<string, string>> = {
  START_TO_CLOSE:
    'One attempt ran past `limits.stageTimeout` on every try: look at what the agent was doing (`warden audit ID`), then give it a smaller task or raise `limits.stageTimeout`.',
  HEARTBEAT: 'The worker running the activity stopped answering (crashed, or blocked): check the worker\'s log and the machine, then `warden resume ID`.',
  SCHEDULE_TO_START: 'No worker picked the activity up: start a worker on the task queue (`warden worker` or `warden dev`), then `warden resume ID`.',
  SCHEDULE_TO_CLOSE: 'The activity did not finish within its overall timeout: look at the worker and the agent, then `warden resume ID`.',
};

const UNKNOWN_FAILURE = 'An unexpected failure: read the error and the worker\'s log, fix the cause, then `warden resume ID`.';

/** What the failure is, as far as the workflow can tell. */
export interface FailureKind {
  /** An ApplicationFailure's type. */
  readonly type?: string;
  /** A TimeoutFailure's timeout type (`START_TO_CLOSE`, `HEARTBEAT`, …; the SDK's enum name or number). */
  readonly timeoutType?: string;
}

/** The suggestion for a failure; never empty, `ID` replaced by the intent's id. */
export function suggestionForFailure(kind: FailureKind, intentId: string): string {
  const known = kind.type !== undefined && kind.type in FAILURE_SUGGESTIONS ? FAILURE_SUGGESTIONS[kind.type as FailureType] : undefined;
  const timeout = kind.timeoutType !== undefined ? TIMEOUT_SUGGESTIONS[kind.timeoutType.replace(/^TIMEOUT_TYPE_/, '')] : undefined;
  return (known ?? timeout ?? UNKNOWN_FAILURE).replaceAll(' ID`', ` ${intentId}\``);
}
