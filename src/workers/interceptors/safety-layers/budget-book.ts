import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import { activityLogger } from '../../../activities/log-context';
import type { BudgetBook, OpenCall } from '../../../activities/agents';
import type { WorkerSafetyConfig } from '../../../config/schema';
import type { IntentLimitsConfig } from '../../../shared/limit-settings';
import type { Ledger } from '../../../ledger/ledger';
import { BUDGET_SCOPES, type BudgetScope } from '../../../ledger/types';
import { deterministicUuid } from '../../../ledger/event-id';
import { budgetSharesReached } from '../../../safety/limits';
import type { SafetyEventType, Severity } from '../../../shared/safety-events';
import { compareUsd, normalizeUsd, subUsd } from '../../../shared/money';
import { FailureType } from '../../../shared/errors';
import type { CallRef } from '../call-ref';
import { messageOf } from '../failures';
import { safetyEventId, type CostSnapshot } from '../safety-events';
import type { AgentCall } from './safety-layer';

/** The largest amount the ledger stores: the "limit" of an unlimited day budget. */
const UNLIMITED_USD = '99999999.999999';

/** What a refused reservation tells about the budget that refused it. */
interface Denial {
  readonly committedUsd: string;
  readonly limitUsd: string;
  readonly day: string;
  readonly agentId: string;
  readonly stage: string;
  /** "this call may cost up to $X…": the part of the reason every refusal shares. */
  readonly maximum: string;
}

/** How one budget's refusal is recorded and how it ends the attempt. */
interface Refusal {
  readonly eventType: SafetyEventType;
  readonly severity: Severity;
  readonly breakerId: string;
  reason(denial: Denial): string;
  suggestion(denial: Denial): string;
  /** Which figure of the cost snapshot the committed spend is: the day's (worker budgets) or the intent's. */
  readonly spentAs: keyof Pick<CostSnapshot, 'dayUsd' | 'intentUsd'>;
  /**
   * `refuse`: a non-retryable BUDGET_EXCEEDED carrying the event's id (the worker's day budgets).
   * `halt`: a SAFETY_HALT without details (the intent's own budgets): its event is written, and
   * the workflow fails the intent with the halt.
   */
  readonly ends: 'refuse' | 'halt';
}

/** One row per budget a reservation can be refused by. */
const REFUSALS: Record<BudgetScope, Refusal> = {
  day: {
    eventType: 'BUDGET_RESERVATION_DENIED',
    severity: 'high',
    breakerId: 'day-budget',
    reason: (d) => `day budget: $${d.committedUsd} already spent or reserved on ${d.day}; ${d.maximum}, over the $${d.limitUsd} limit`,
    suggestion: () => 'Wait for tomorrow (UTC), or raise worker.dayBudgetUsd if this spend is expected; then resume the intent.',
    spentAs: 'dayUsd',
    ends: 'refuse',
  },
  agent: {
    eventType: 'COST_BUDGET_EXCEEDED',
    severity: 'high',
    breakerId: 'agent-day-budget',
    reason: (d) => `agent ${d.agentId} spent $${d.committedUsd} today; ${d.maximum}, over its $${d.limitUsd} day budget`,
    suggestion: () => 'Wait for tomorrow (UTC), or raise worker.agentDayBudgetUsd if this spend is expected; then resume the intent.',
    spentAs: 'dayUsd',
    ends: 'refuse',
  },
  intent: {
    eventType: 'COST_BUDGET_EXCEEDED',
    severity: 'high',
    breakerId: 'intent-budget',
    reason: (d) => `spent $${d.committedUsd} of the intent's $${d.limitUsd} budget; ${d.maximum}, which would pass it`,
    suggestion: () => 'Raise limits.budgetUsd if this spend is expected (or use a cheaper model, or fewer max_tokens), then resume the intent.',
    spentAs: 'intentUsd',
    ends: 'halt',
  },
  stage: {
    eventType: 'COST_BUDGET_EXCEEDED',
    severity: 'high',
    breakerId: 'stage-budget',
    reason: (d) => `stage ${d.stage}: spent $${d.committedUsd} of its $${d.limitUsd} budget; ${d.maximum}, which would pass it`,
    suggestion: (d) => `Raise limits.stageBudgetUsd.${d.stage} if this spend is expected, then resume the intent.`,
    spentAs: 'intentUsd',
    ends: 'halt',
  },
};

/**
 * The ledger side of an attempt's meter. Each paid call reserves its maximum against the day's
 * budget, the agent's day budget, the intent's budget and its stage's budget, atomically (one
 * transaction, see `BudgetStore.reserve`); a refusal is one SafetyEvent and ends the attempt as
 * its row in `REFUSALS` says. After the call the reservation is settled at its real cost, or
 * released when nothing was billed; a ledger that cannot take either is logged, not thrown: the
 * call was made.
 */
export function ledgerBudgetBook(deps: { readonly ledger: Ledger; readonly config: WorkerSafetyConfig; readonly logger: Logger }, call: AgentCall): BudgetBook {
  const { ref, agent, input } = call;
  const day = new Date().toISOString().slice(0, 10);
  const { agentDayBudgetUsd, dayBudgetUsd } = deps.config;
  const limits = input.intent.limits as Partial<Pick<IntentLimitsConfig, 'budgetUsd' | 'stageBudgetUsd'>>;
  const limited = (usd: string | undefined): string | undefined => (usd === undefined || compareUsd(usd, '0') === 0 ? undefined : normalizeUsd(usd));
  const stageLimit = limits.stageBudgetUsd?.[input.stage as keyof IntentLimitsConfig['stageBudgetUsd']];
  const base = reservationIdOf(ref);
  const idOf = (open: OpenCall): string => `${base}/${open.index}`;
  const log = activityLogger(deps.logger);
  return {
    reserve: async (open) => {
      const reservationId = idOf(open);
      const reservation = await call.patiently("reserve the call's maximum cost", () =>
        deps.ledger.budget.reserve({
          id: reservationId,
          day,
          intentId: ref.intentId ?? ref.workflowId,
          amountUsd: open.maxUsd,
          limitUsd: limited(dayBudgetUsd) ?? UNLIMITED_USD,
          agentId: agent.agentId,
          agentLimitUsd: limited(agentDayBudgetUsd),
          intentLimitUsd: limited(limits.budgetUsd),
          stage: input.stage,
          // "0" means unlimited here too, as for every other budget (see mergeLimits).
          stageLimitUsd: limited(stageLimit),
          ...(open.minUsd !== undefined ? { minAmountUsd: open.minUsd } : {}),
          activity: { workflowId: ref.workflowId, runId: ref.runId, activityId: ref.activityId, attempt: ref.attempt },
        }),
      );
      if (reservation.granted) return reservation.amountUsd;
      const refusal = REFUSALS[reservation.deniedBy ?? 'day'];
      const denial: Denial = {
        committedUsd: reservation.committedUsd,
        limitUsd: reservation.limitUsd,
        day,
        agentId: agent.agentId,
        stage: input.stage,
        maximum: `this call may cost up to $${open.maxUsd}${open.bounded ? '' : ' (its declared limits.maxCallUsd)'}`,
      };
      const reason = refusal.reason(denial);
      const eventId = await call.event(refusal.eventType, refusal.severity, reason, {
        breakerId: refusal.breakerId,
        suggestion: refusal.suggestion(denial),
        costSnapshot: { [refusal.spentAs]: reservation.committedUsd, limitUsd: reservation.limitUsd },
        metadata: { day, maxCallUsd: open.maxUsd, bounded: open.bounded, model: open.model, reservationId, budget: reservation.deniedBy },
      });
      if (refusal.ends === 'refuse') {
        throw ApplicationFailure.create({ type: FailureType.BudgetExceeded, message: reason, nonRetryable: true, details: [{ eventId }] });
      }
      throw ApplicationFailure.create({ type: FailureType.SafetyHalt, message: `${refusal.eventType}: ${reason} (event ${eventId})`, nonRetryable: true });
    },
    settle: async (open, paid) => {
      // The call's cost row goes in with the settlement: one per paid call, whether or not the
      // workflow ever gets the attempt's result.
      const settled = {
        timestamp: new Date(),
        intentId: ref.intentId ?? ref.workflowId,
        stage: input.stage,
        attempt: input.attempt,
        agentId: agent.agentId,
        modelId: paid.model,
        inputTokens: paid.usage.inputTokens,
        outputTokens: paid.usage.outputTokens,
      };
      const limitsOfCall: Record<BudgetScope, string | undefined> = { day: limited(dayBudgetUsd), agent: limited(agentDayBudgetUsd), intent: limited(limits.budgetUsd), stage: limited(stageLimit) };
      // With a limit to warn of, the budgets' spend is read in the settlement's own transaction.
      const spendOf = BUDGET_SCOPES.some((scope) => limitsOfCall[scope] !== undefined)
        ? { day, agentId: agent.agentId, intentId: intentOf(call), stage: input.stage }
        : undefined;
      const spent = await call
        .patiently('settle the reservation', () => deps.ledger.budget.settle(idOf(open), paid.costUsd, { overrun: paid.overrun, call: settled, spendOf }))
        .catch((error: unknown) => {
          // The call was made and paid for: failing the attempt now would only make it again.
          log.error({ reservationId: idOf(open), costUsd: paid.costUsd, error: messageOf(error) }, 'could not settle the budget reservation; it stays open at its maximum');
          return undefined;
        });
      if (spent) await warnNearLimits(deps, call, { day, limits: limitsOfCall, spent });
    },
    release: async (open) => {
      await call.patiently('release the reservation', () => deps.ledger.budget.release(idOf(open))).catch((error: unknown) =>
        log.error({ reservationId: idOf(open), error: messageOf(error) }, 'could not release the budget reservation; it stays open'),
      );
    },
  };
}

/** How each budget is named in a warning, and what makes its warnings its own (a new day, agent, intent or limit re-arms them). */
const WARNED: Record<BudgetScope, { readonly breakerId: string; name(call: AgentCall, day: string): string; key(call: AgentCall, day: string): readonly string[] }> = {
  day: { breakerId: 'day-budget', name: (_call, day) => `the day budget (${day})`, key: (_call, day) => [day] },
  agent: { breakerId: 'agent-day-budget', name: (call, day) => `agent ${call.agent.agentId}'s day budget (${day})`, key: (call, day) => [day, call.agent.agentId] },
  intent: { breakerId: 'intent-budget', name: () => "the intent's budget", key: (call) => [intentOf(call)] },
  stage: { breakerId: 'stage-budget', name: (call) => `stage ${call.input.stage}'s budget`, key: (call) => [intentOf(call), call.input.stage] },
};

function intentOf(call: AgentCall): string {
  return call.ref.intentId ?? call.ref.workflowId;
}

/**
 * After a settlement: each budget whose settled spend (as the settlement read it) has reached
 * 80 % or 90 % of its limit is announced with a COST_WARNING, once per budget, limit and share
 * whichever worker, attempt or intent gets there first (the event's id is made of exactly those,
 * and a repeat adds nothing). A ledger that cannot be written is logged: a warning never fails a
 * paid call.
 */
async function warnNearLimits(
  deps: { readonly ledger: Ledger; readonly logger: Logger },
  call: AgentCall,
  budgets: { readonly day: string; readonly limits: Record<BudgetScope, string | undefined>; readonly spent: Record<BudgetScope, string> },
): Promise<void> {
  const { day, limits, spent } = budgets;
  try {
    for (const scope of BUDGET_SCOPES) {
      const limit = limits[scope];
      if (limit === undefined) continue;
      for (const share of budgetSharesReached(spent[scope], limit)) {
        const percent = Math.round(share * 100);
        const warned = WARNED[scope];
        await call.patiently('record a budget warning', () =>
          deps.ledger.audit.recordSafetyEvent({
            id: deterministicUuid('budget-warning', scope, ...warned.key(call, day), limit, String(share)),
            timestamp: new Date(),
            eventType: 'COST_WARNING',
            severity: share >= 0.9 ? 'high' : 'medium',
            reason: `${warned.name(call, day)}: $${spent[scope]} of $${limit} spent, past ${percent}%`,
            intentId: intentOf(call),
            stage: call.input.stage,
            agentId: call.agent.agentId,
            modelId: call.agent.modelId,
            breakerId: warned.breakerId,
            costSnapshot: { [scope === 'day' || scope === 'agent' ? 'dayUsd' : 'intentUsd']: spent[scope], limitUsd: limit },
            suggestion: `$${compareUsd(spent[scope], limit) >= 0 ? '0.000000' : subUsd(limit, spent[scope])} left; decide now whether the work is worth more, or let the limit stop it.`,
            metadata: { budget: scope, share: percent, spentUsd: spent[scope], limitUsd: limit, workflowId: call.ref.workflowId, activityId: call.ref.activityId, attempt: call.ref.attempt },
          }),
        );
      }
    }
  } catch (error) {
    activityLogger(deps.logger).error({ error: messageOf(error) }, 'could not check the budgets for a warning');
  }
}

/** The reservations of one attempt (one per paid call, numbered): a retry reserves afresh; a repeated write is the same one. */
function reservationIdOf(call: CallRef): string {
  const id = `agent-call/${call.workflowId}/${call.runId}/${call.activityId}/${call.attempt}`;
  return id.length <= 190 ? id : `agent-call/${safetyEventId(call, 'BUDGET_RESERVATION_DENIED', 'reservation')}`;
}
