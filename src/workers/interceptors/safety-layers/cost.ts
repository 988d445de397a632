import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import type { StageInput, StageResult } from '../../../activities';
import { SpendMeter } from '../../../activities/agents';
import { withAttemptScope } from '../../../gateway/attempt-scope';
import type { WorkerSafetyConfig } from '../../../config/schema';
import type { Ledger } from '../../../ledger/ledger';
import { addUsd, compareUsd, normalizeUsd, ZERO_USD } from '../../../shared/money';
import { FailureType } from '../../../shared/errors';
import { ledgerBudgetBook } from './budget-book';
import type { AgentCall, SafetyLayer } from './safety-layer';

/**
 * What agent calls cost. Every paid call of the attempt goes through its SpendMeter: its maximum
 * is reserved against the budgets before it is made (see `ledgerBudgetBook`) and settled at its
 * real cost after, with its cost row. After an answer, calls counted at their declared cap are a
 * COST_WARNING and a call over its cap halts. When the attempt ends, open reservations are released.
 */
export class CostLayer implements SafetyLayer {
  private readonly meters = new WeakMap<AgentCall, SpendMeter>();

  constructor(private readonly deps: { readonly ledger: Ledger; readonly config: WorkerSafetyConfig; readonly logger: Logger }) {}

  /** Opens the attempt's meter; a stage input without a valid maximum per call is refused (INVALID_INTENT). */
  async admit(call: AgentCall): Promise<void> {
    this.meters.set(call, new SpendMeter({ pricing: this.deps.config.pricing, declaredCapUsd: maxCallOf(call.input), book: ledgerBudgetBook(this.deps, call) }));
  }

  around(call: AgentCall, run: () => Promise<unknown>): Promise<unknown> {
    return withAttemptScope({ meter: this.meterOf(call), event: call.event }, run);
  }

  /**
   * A call counted at its declared cap because it reports no usage is a COST_WARNING (its real
   * cost is unknown); a call that cost more than its declared cap halts the intent (its real cost
   * is recorded; spend may now pass a budget by that overrun).
   */
  async answered(call: AgentCall, _result: StageResult): Promise<void> {
    const meter = this.meterOf(call);
    const { stage } = call.input;
    const unmetered = meter.calls.filter((c) => c.unmetered);
    if (unmetered.length > 0) {
      const counted = unmetered.reduce((sum, c) => addUsd(sum, c.costUsd), ZERO_USD);
      await call.event('COST_WARNING', 'medium', `unmetered: the ${stage} agent reports no token usage; ${unmetered.length} call(s) counted at the declared $${meter.declaredCapUsd} each ($${counted}), not at what they cost`, {
        suggestion: 'Set limits.maxCallUsd to what one call of this agent really costs at most ("0" if it is free), or use an HTTP agent, whose usage is metered.',
        key: 'unmetered',
        metadata: { unmetered: true, calls: unmetered.length, countedUsd: counted, maxCallUsd: meter.declaredCapUsd },
      });
    }
    const over = meter.calls.find((c) => c.overrun);
    if (over) {
      const reason = `the ${stage} call reported $${over.costUsd}, more than the $${over.maxUsd} reserved for it${over.estimated ? '' : ' (its declared limits.maxCallUsd)'}; it is recorded at its real cost and the intent is halted`;
      const eventId = await call.event('COST_BUDGET_EXCEEDED', 'high', reason, {
        breakerId: 'call-cap',
        suggestion: 'Raise limits.maxCallUsd to what one call of this agent really costs at most (or cap its tokens), then resume the intent.',
        costSnapshot: { intentUsd: over.costUsd, limitUsd: over.maxUsd },
        metadata: { costUsd: over.costUsd, maxCallUsd: over.maxUsd, model: over.model, overrun: true },
      });
      throw ApplicationFailure.create({ type: FailureType.SafetyHalt, message: `COST_BUDGET_EXCEEDED: ${reason} (event ${eventId})`, nonRetryable: true });
    }
  }

  /**
   * Reservations still open are released (nothing was counted for them). Each paid call's cost
   * row was written with its settlement (see `ledgerBudgetBook`), so a result the workflow never
   * gets — the attempt failed, was halted, cancelled, timed out, or its answer was lost to a
   * crash — is counted all the same, once, in cost_events and in the budgets.
   */
  async close(call: AgentCall): Promise<void> {
    const meter = this.meters.get(call);
    if (!meter) return;
    this.meters.delete(call);
    await meter.releaseOpen();
    if (meter.calls.length > 0) call.facts.spendUsd = meter.totalUsd();
  }

  private meterOf(call: AgentCall): SpendMeter {
    const meter = this.meters.get(call);
    if (!meter) throw new Error('no spend meter: the cost layer did not admit this call');
    return meter;
  }
}

/** The call's maximum cost: the stage input's, or the intent's limit when the workflow gave none. */
function maxCallOf(input: StageInput): string {
  const raw: unknown = input.maxCallUsd ?? (input.intent.limits as { maxCallUsd?: unknown } | undefined)?.maxCallUsd;
  try {
    const usd = normalizeUsd(raw as string);
    if (compareUsd(usd, '0') >= 0) return usd;
  } catch {
    // reported below
  }
  throw ApplicationFailure.create({ type: FailureType.InvalidIntent, message: `maxCallUsd ${JSON.stringify(raw)} is not a USD amount`, nonRetryable: true });
}
