import { ApplicationFailure } from '@temporalio/common';
import { addUsd, compareUsd, normalizeUsd, ZERO_USD } from '../shared/money';
import { assertPriced, costOf, isPriced, maxCostOf, outputTokensWithin, UnknownModelError, type PricingTable } from '../safety/pricing';
import { FailureType } from '../shared/errors';
import type { Usage } from './usage';

/**
 * Every paid call an agent makes goes through a SpendMeter: before the call, the most it can cost
 * is reserved against every budget (the call is refused if one would be passed); after it, what it
 * really cost is counted — whether the stage then succeeds or fails.
 *
 * - An HTTP model call is bounded before it is made: an upper bound of the prompt's tokens plus
 *   `max_tokens`, at the model's price. A model without a price is refused here, before any call.
 * - A call the agent cannot bound (a command, a script) reserves the declared per-call cap
 *   (`limits.maxCallUsd`). If it then reports more, it is counted at its real cost and marked as
 *   an overrun: the worker halts the intent.
 * - A call that reports no usage at all (a command agent) is counted at its declared cap and
 *   marked unmetered, never silently as $0.
 */

/** What the agent knows, before a call, about the most it can cost. */
export type CallBound =
  /**
   * Priced by the model: the prompt's token bound plus the output cap. With `minOutputTokens`
   * the cap may be lowered to what the budgets still allow, down to that many tokens.
   */
  | { readonly kind: 'tokens'; readonly maxInputTokens: number; readonly maxOutputTokens: number; readonly minOutputTokens?: number }
  /** Not knowable: the declared per-call cap is reserved. `pricedByModel`: its usage will be priced by the model's row. */
  | { readonly kind: 'declared'; readonly pricedByModel: boolean };

/** A call whose maximum is reserved and whose outcome is not yet counted. */
export interface OpenCall {
  /** 0-based, in the order the attempt made its calls: part of the reservation's id. */
  readonly index: number;
  readonly model: string;
  /** What is reserved for it. */
  readonly maxUsd: string;
  readonly bounded: boolean;
  /** A call that may be made smaller: the least that must be reserved for it. */
  readonly minUsd?: string;
  /** The output cap the reservation pays for (a shrinkable call's may be below the one asked). */
  readonly maxOutputTokens?: number;
}

/** How a call ended, as far as money goes. */
export type CallReport =
  /** The provider answered with its usage; `costUsd` when the agent priced the call itself. */
  | { readonly kind: 'paid'; readonly usage: Usage; readonly model?: string; readonly costUsd?: string }
  /** It answered, but the usage could not be read (oversize, malformed): counted at the call's maximum. */
  | { readonly kind: 'paid-unknown'; readonly reason: string }
  /** The agent reports no usage at all: counted at the declared cap, marked unmetered. */
  | { readonly kind: 'unmetered'; readonly reason: string }
  /** No answer came (refused, unreachable, cancelled before it answered): nothing was billed. */
  | { readonly kind: 'unpaid' };

/** One counted call. */
export interface PaidCall {
  readonly index: number;
  readonly model: string;
  readonly usage: Usage;
  readonly costUsd: string;
  readonly maxUsd: string;
  /** Counted at an estimate (its maximum or cap), not at a reported usage. */
  readonly estimated: boolean;
  /** The agent reported no usage at all. */
  readonly unmetered: boolean;
  /** It cost more than was reserved for it. */
  readonly overrun: boolean;
  readonly note?: string;
}

/** Where the reservations live: the worker's ledger, or nowhere (an activity run without the worker's interceptor). */
export interface BudgetBook {
  /**
   * Reserves `call.maxUsd` against every budget, or throws (BUDGET_EXCEEDED) without reserving.
   * For a call with `minUsd` it may reserve less (never below it) and returns what it reserved.
   */
  reserve(call: OpenCall): Promise<string | void>;
  /** Ends the reservation at the call's real cost (above the reservation when it overran). */
  settle(call: OpenCall, paid: PaidCall): Promise<void>;
  /** Ends the reservation at $0: nothing was billed. */
  release(call: OpenCall): Promise<void>;
}

export interface SpendMeterOptions {
  readonly pricing: PricingTable;
  /** `limits.maxCallUsd`: reserved for a call that cannot be bounded, and counted for one that reports nothing. */
  readonly declaredCapUsd: string;
  readonly book?: BudgetBook;
}

export class SpendMeter {
  private readonly paid: PaidCall[] = [];
  private readonly open = new Map<number, OpenCall>();
  private next = 0;
  readonly declaredCapUsd: string;

  constructor(private readonly options: SpendMeterOptions) {
    this.declaredCapUsd = normalizeUsd(options.declaredCapUsd);
  }

  /** The calls counted so far, in order. */
  get calls(): readonly PaidCall[] {
    return this.paid;
  }

  totalUsd(): string {
    return this.paid.reduce((sum, c) => addUsd(sum, c.costUsd), ZERO_USD);
  }

  totalUsage(): Usage {
    return this.paid.reduce((sum, c) => ({ inputTokens: sum.inputTokens + c.usage.inputTokens, outputTokens: sum.outputTokens + c.usage.outputTokens }), {
      inputTokens: 0,
      outputTokens: 0,
    });
  }

  /**
   * Runs one paid call: reserves its maximum first (throwing UNKNOWN_MODEL or BUDGET_EXCEEDED
   * before anything is sent), then counts it as `run` reports. A call whose `run` throws before
   * reporting is counted as `unpaidOnError` says (default: nothing was billed).
   */
  async call<T>(
    model: string,
    bound: CallBound,
    run: (call: OpenCall) => Promise<{ readonly value: T; readonly report: CallReport }>,
    unpaidOnError: (error: unknown) => CallReport = () => ({ kind: 'unpaid' }),
  ): Promise<T> {
    const open = await this.reserve(model, bound);
    let outcome: { value: T; report: CallReport };
    try {
      outcome = await run(open);
    } catch (error) {
      await this.close(open, unpaidOnError(error));
      throw error;
    }
    await this.close(open, outcome.report);
    return outcome.value;
  }

  /** Reserves the call's maximum against every budget; nothing is reserved when this throws. */
  async reserve(model: string, bound: CallBound): Promise<OpenCall> {
    const shrinkable = bound.kind === 'tokens' && bound.minOutputTokens !== undefined && bound.minOutputTokens < bound.maxOutputTokens;
    let call: OpenCall = {
      index: this.next,
      model,
      maxUsd: this.maxOf(model, bound),
      bounded: bound.kind === 'tokens',
      ...(bound.kind === 'tokens' ? { maxOutputTokens: bound.maxOutputTokens } : {}),
      ...(shrinkable ? { minUsd: this.maxOf(model, { ...bound, maxOutputTokens: bound.minOutputTokens! }) } : {}),
    };
    this.next += 1;
    const reserved = await this.options.book?.reserve(call);
    if (bound.kind === 'tokens' && typeof reserved === 'string' && compareUsd(reserved, call.maxUsd) < 0) {
      // Granted less: the output cap is what that amount pays for.
      const fits = outputTokensWithin(model, bound.maxInputTokens, reserved, this.options.pricing);
      call = { ...call, maxUsd: normalizeUsd(reserved), maxOutputTokens: Math.min(fits, bound.maxOutputTokens) };
    }
    this.open.set(call.index, call);
    return call;
  }

  /** Counts an open call as `report` says and ends its reservation; returns what it cost. */
  async close(call: OpenCall, report: CallReport): Promise<string> {
    if (!this.open.delete(call.index)) throw new Error(`call ${call.index} is not open`);
    if (report.kind === 'unpaid') {
      await this.options.book?.release(call);
      return ZERO_USD;
    }
    const paid = this.price(call, report);
    this.paid.push(paid);
    await this.options.book?.settle(call, paid);
    return paid.costUsd;
  }

  /** Releases every reservation still open (an attempt that ended mid-call): nothing was counted for them. */
  async releaseOpen(): Promise<void> {
    for (const call of [...this.open.values()]) await this.close(call, { kind: 'unpaid' });
  }

  /**
   * Refuses `model` (UNKNOWN_MODEL, non-retryable) when it has no price: checked as an agent
   * attempt starts, so that a CLI is not started only to have its first call refused.
   */
  refuseUnpriced(model: string | undefined): void {
    if (model !== undefined) refusingUnknownModel('the agent was not started', () => assertPriced(model, this.options.pricing));
  }

  private maxOf(model: string, bound: CallBound): string {
    return refusingUnknownModel('no call was made', () => {
      if (bound.kind === 'tokens') return maxCostOf(model, bound.maxInputTokens, bound.maxOutputTokens, this.options.pricing);
      if (bound.pricedByModel) assertPriced(model, this.options.pricing);
      return this.declaredCapUsd;
    });
  }

  private price(call: OpenCall, report: Exclude<CallReport, { kind: 'unpaid' }>): PaidCall {
    const base = { index: call.index, model: call.model, maxUsd: call.maxUsd };
    if (report.kind === 'paid-unknown' || report.kind === 'unmetered') {
      return { ...base, usage: { inputTokens: 0, outputTokens: 0 }, costUsd: call.maxUsd, estimated: true, unmetered: report.kind === 'unmetered', overrun: false, note: report.reason };
    }
    // Billed by the model that answered when it has a price (a provider may route elsewhere).
    const model = report.model && isPriced(report.model, this.options.pricing) ? report.model : call.model;
    const zero = report.usage.inputTokens === 0 && report.usage.outputTokens === 0;
    const costUsd = report.costUsd !== undefined ? normalizeUsd(report.costUsd) : zero ? ZERO_USD : costOf(model, report.usage, this.options.pricing);
    return { ...base, model, usage: report.usage, costUsd, estimated: false, unmetered: false, overrun: compareUsd(costUsd, call.maxUsd) > 0 };
  }
}

/** `price()`, with an unpriced model turned into the non-retryable UNKNOWN_MODEL failure, saying what did not happen. */
function refusingUnknownModel<T>(notDone: string, price: () => T): T {
  try {
    return price();
  } catch (error) {
    if (error instanceof UnknownModelError) {
      throw ApplicationFailure.create({ type: FailureType.UnknownModel, message: `${error.message}; ${notDone}`, nonRetryable: true });
    }
    throw error;
  }
}

/** Dollars with six decimals from an agent's own float report (a script's `costUsd`). */
export function usdFromNumber(usd: number): string {
  if (!Number.isFinite(usd) || usd < 0) throw new RangeError(`not a cost: ${usd}`);
  return normalizeUsd(usd.toFixed(6));
}
