import { condition, sleep } from '@temporalio/workflow';
import type { StageInput } from '../activities';
import type { IntentLimitsConfig } from '../shared/limit-settings';
import { checkBudget, checkCooldown, checkIterations, checkStagnation, type TestOutcome } from '../safety/limits';
import { addUsd, compareUsd, ZERO_USD } from '../shared/money';
import { agentForCall, callsModelOverHttp } from '../shared/agent-routing';
import { parseDuration } from '../shared/duration';
import { activityKind } from '../shared/activity-kinds';
import type { CooldownWait } from '../shared/state';
import { haltFailure } from './halts';

/** What the stage guard tells the workflow as it goes. */
export interface StageGuardOptions {
  /** Told when a cooldown wait starts (when it ends) and when it is over (undefined). */
  readonly onCooldown?: (wait: CooldownWait | undefined) => void;
}

/**
 * The workflow-side limits checked before every agent dispatch (by the stage-guard workflow
 * interceptor): pause, iteration caps, the two-strike rule, the intent and stage budgets, and the
 * cooldown before the same stage's agent is dispatched again. An HTTP model call's maximum cost
 * is reserved by the worker, which knows the prompt, the price and `max_tokens`; here the budgets
 * stop an intent already at its limit, and bound a command's or a script's declared cap. Before
 * every other stage activity it holds a paused intent (see `holdsBeforeActivity`). All state is
 * workflow state, so every check replays identically.
 */
export class StageGuard {
  private total = 0;
  private readonly lastDispatchAt: Record<string, number> = {};
  private readonly testOutcomes: TestOutcome[] = [];
  private spentUsd = ZERO_USD;
  private readonly stageSpentUsd: Record<string, string> = {};
  private warnedBudget = false;
  paused = false;

  constructor(
    private readonly limits: IntentLimitsConfig,
    private readonly options: StageGuardOptions = {},
  ) {}

  /**
   * Whether `activityType` must wait for a resume before it is scheduled: a stage activity of a
   * paused intent. Synchronous, so that an activity that need not wait is scheduled exactly when
   * it always was (no extra await to reorder commands in a replayed history).
   */
  holdsBeforeActivity(activityType: string): boolean {
    return this.paused && activityKind(activityType) === 'stage';
  }

  /** Resolves once the intent is not paused (at once if it is not). */
  untilResumed(): Promise<void> {
    return condition(() => !this.paused);
  }

  /**
   * Whether `beforeDispatch` would wait now before an agent call of `stage`: a pause, or the
   * stage's cooldown. Synchronous, like holdsBeforeActivity: the ledger rows the workflow owes are
   * written before such a wait, and otherwise ride on the call (see due-rows.ts).
   */
  holdsAgentCall(stage: string): boolean {
    return this.paused || this.cooldownWaitMs(stage) > 0;
  }

  private cooldownWaitMs(stage: string): number {
    return checkCooldown(this.lastDispatchAt[stage], Date.now(), parseDuration(this.limits.cooldown)).waitMs;
  }

  /** Waits out a pause and the cooldown, or throws a SAFETY_HALT failure when a limit trips. */
  async beforeDispatch(input: StageInput): Promise<void> {
    await condition(() => !this.paused);
    const iterations = checkIterations({
      stage: input.stage,
      stageAttempts: input.attempt - 1,
      totalAttempts: this.total,
      caps: this.limits.attempts,
      totalCap: this.limits.totalAttempts,
    });
    if (iterations.verdict === 'trip') throw haltFailure('MAX_ITERATIONS_EXCEEDED', iterations);

    if (input.stage === 'impl' && this.testOutcomes.length >= 2) {
      const stagnation = checkStagnation(this.testOutcomes);
      if (stagnation.verdict === 'trip') throw haltFailure('STAGNATION_DETECTED', stagnation);
    }

    // The worker reserves an HTTP model call's real maximum (prompt, price, max_tokens). A command
    // or a script cannot be bounded: its declared cap is all anyone knows, so it is checked here,
    // before the call waits on anything (a rate limit) only to be refused.
    const boundedByWorker = callsModelOverHttp(agentForCall(input.intent, input));
    const nextCallMaxUsd = boundedByWorker ? ZERO_USD : input.maxCallUsd;
    const budget = checkBudget({ spentUsd: this.spentUsd, nextCallMaxUsd, limitUsd: this.budgetLimit(), warnAt: this.limits.budgetWarnAt });
    if (budget.verdict === 'trip') throw haltFailure('COST_BUDGET_EXCEEDED', budget);
    const stageLimit = this.limits.stageBudgetUsd[input.stage as keyof IntentLimitsConfig['stageBudgetUsd']];
    if (stageLimit !== undefined) {
      const stageBudget = checkBudget({ spentUsd: this.stageSpentUsd[input.stage] ?? ZERO_USD, nextCallMaxUsd, limitUsd: stageLimit });
      if (stageBudget.verdict === 'trip') {
        throw haltFailure('COST_BUDGET_EXCEEDED', { ...stageBudget, detail: `stage ${input.stage}: ${stageBudget.detail}` });
      }
    }

    const cooldownMs = this.cooldownWaitMs(input.stage);
    if (cooldownMs > 0) {
      this.options.onCooldown?.({ stage: input.stage, until: new Date(Date.now() + cooldownMs).toISOString() });
      try {
        await sleep(cooldownMs);
      } finally {
        this.options.onCooldown?.(undefined);
      }
      // A pause that came during the wait holds the call the wait was for.
      await this.untilResumed();
    }

    this.total += 1;
    this.lastDispatchAt[input.stage] = Date.now();
  }

  /**
   * Adds a call's cost; true the first time spend reaches the warning share of the budget: the
   * cost-overrun gate opens then. The warnings themselves (80 % and 90 % of every budget) are
   * written by the worker as each call is settled, once per budget across workers.
   */
  recordSpend(usd: string, stage: string): boolean {
    this.spentUsd = addUsd(this.spentUsd, usd);
    this.stageSpentUsd[stage] = addUsd(this.stageSpentUsd[stage] ?? ZERO_USD, usd);
    const limitUsd = this.budgetLimit();
    if (this.warnedBudget || limitUsd === null) return false;
    const check = checkBudget({ spentUsd: this.spentUsd, nextCallMaxUsd: '0', limitUsd, warnAt: this.limits.budgetWarnAt });
    if (check.verdict !== 'warn') return false;
    this.warnedBudget = true;
    return true;
  }

  /** "0" means unlimited, and only because someone wrote it: the default is a real limit. */
  private budgetLimit(): string | null {
    return compareUsd(this.limits.budgetUsd, '0') === 0 ? null : this.limits.budgetUsd;
  }

  recordTests(outcome: TestOutcome): void {
    this.testOutcomes.push(outcome);
  }
}

// The guard lives on this workflow's own globalThis: the SDK gives every workflow its own globals.
const GUARD_KEY = '__wardenStageGuard';

/** Makes `guard` the one the workflow interceptors consult for this workflow. */
export function installStageGuard(guard: StageGuard): void {
  (globalThis as Record<string, unknown>)[GUARD_KEY] = guard;
}

/** This workflow's stage guard; undefined in a workflow that installed none (the maintenance workflow). */
export function currentStageGuard(): StageGuard | undefined {
  return (globalThis as Record<string, unknown>)[GUARD_KEY] as StageGuard | undefined;
}
