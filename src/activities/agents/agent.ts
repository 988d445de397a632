import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../../shared/errors';
import type { RiskClass } from '../../shared/intent';
import type { AgentStage } from '../../shared/stages';
import type { RecordEvent } from '../../gateway/attempt-scope';
import type { AttemptReport } from '../../shared/sandbox-attempts';
import type { SpendMeter } from '../../gateway/spend-meter';
import type { ReplaySource } from '../../gateway/lease';
import type { Usage } from '../../gateway/usage';

export type { Usage } from '../../gateway/usage';

/** One call to an agent for one attempt of one stage. */
export interface AgentRequest {
  readonly intentId: string;
  readonly stage: AgentStage;
  /** 1-based attempt of this stage (impl loops; other stages usually have one). */
  readonly attempt: number;
  /** The call reviews the document this attempt of `stage` (lld, spec) wrote, instead of writing it. */
  readonly designReview?: boolean;
  readonly prompt: string;
  /** The agent's working directory: the intent's worktree. It may change files here. */
  readonly worktreePath: string;
  /** Aborted when the activity is cancelled (e.g. `warden stop`); the agent must stop at once. */
  readonly signal: AbortSignal;
  /** Called while the agent works so Temporal knows the activity is alive. */
  readonly heartbeat: () => void;
  /**
   * The intent's risk class (`intent.riskHint`). Command agents choose their sandbox by it:
   * HIGH runs only inside bubblewrap, PROHIBITED never runs.
   */
  readonly riskHint?: RiskClass;
  /** The operator let agent-written code run outside bubblewrap (the intent's `confinement.allowUnconfinedCode`). */
  readonly allowUnconfinedCode?: boolean;
  /** The intent's declared paths: the only files an agent's edits may touch. */
  readonly declaredPaths?: readonly string[];
  /** The intent's goal: what its answers are screened against (an answer that reaches past it is a cascade). */
  readonly goal?: string;
  /** Every paid call goes through it: its maximum reserved before, its cost counted after. */
  readonly meter: SpendMeter;
  /** Records the attempt's safety decisions (the worker's interceptor gives it; without it they are logged). */
  readonly event?: RecordEvent;
  /** Models this stage may not call (see `modelsForbiddenAt`), refused at the gateway. */
  readonly forbiddenModels?: readonly string[];
  /**
   * Called with exactly what the agent hands on — the prompt with whatever the agent adds to it
   * (where its answer goes, the files it is shown) — before it does: the lineage keeps it as the
   * attempt's prompt. An agent that stops before handing anything on does not call it.
   */
  readonly recordPrompt?: (sent: string) => Promise<void>;
  /** The repository's test command (the intent's, or the one found in the repo), for an agent that may run it. */
  readonly testCommand?: string;
  /** Set when the intent replays another: the gateway answers every model call from that intent's recording. */
  readonly replayOf?: ReplaySource;
}

export interface AgentResult {
  /** The agent's answer, saved as the stage's artifact. */
  readonly output: string;
  /** Tokens of every call of the attempt (their cost is counted by the request's meter). */
  readonly usage: Usage;
  /** The model that answered, when the agent knows it. */
  readonly model?: string;
  /** What the agent printed while it worked, when that is not its answer (a CLI's log): kept in the lineage. */
  readonly log?: string;
  /** What its sandbox saw it try (connections, scratch writes, redacted answers), when anything. */
  readonly attempts?: AttemptReport;
}

/** Every stage talks to its agent through this interface. */
export interface Agent {
  run(request: AgentRequest): Promise<AgentResult>;
}

/**
 * A replayed attempt whose agent would reach a model other than through the gateway: its calls
 * cannot be answered from the recording, and a replay never spends, so it fails instead.
 */
export function notReplayable(stage: string, agent: string): ApplicationFailure {
  return ApplicationFailure.create({
    type: FailureType.ReplayDiverged,
    message: `diverged at stage ${stage}: the ${agent} agent does not reach its model through Warden's gateway, so its calls cannot be answered from the recording`,
    nonRetryable: true,
  });
}
