/**
 * Model pricing: what a call cost, and the most it can cost before it is made.
 *
 * Workflow-safe: pure, no Node built-ins, no I/O. Amounts are exact decimal strings (see
 * `money.ts`); fractions of a micro-dollar are rounded up, so metered spend is never lower than
 * the provider's bill and a reservation is never smaller than the call it covers.
 */
import { fromMicros, toMicros } from '../shared/money';

/** Prices of one model, in USD per million tokens, as decimal strings ("3", "0.25"). */
export interface ModelPrice {
  readonly inputUsdPerMillion: string;
  readonly outputUsdPerMillion: string;
}

/** Prices per model id, exactly as the provider names the model. */
export type PricingTable = Readonly<Record<string, ModelPrice>>;

/** Tokens used (or allowed) by one call. */
export interface TokenUsage {
  readonly inputTokens: number;
  readonly outputTokens: number;
}

/** A model with no row in the pricing table: a call to it must not be metered as free. */
export class UnknownModelError extends Error {
  constructor(
    readonly model: string,
    readonly knownModels: readonly string[],
  ) {
    super(
      `no price for model "${model}": add it to the config's worker.pricing, e.g. "worker": { "pricing": { ${JSON.stringify(model)}: { "inputUsdPerMillion": "…", "outputUsdPerMillion": "…" } } } (USD per million tokens; priced: ${knownModels.length ? knownModels.join(', ') : 'none'})`,
    );
    this.name = 'UnknownModelError';
  }
}

const TOKENS_PER_MILLION = 1_000_000n;

function priceOf(model: string, table: PricingTable): ModelPrice {
  // hasOwn: "constructor" or "__proto__" are not models.
  if (!Object.prototype.hasOwnProperty.call(table, model)) {
    throw new UnknownModelError(model, Object.keys(table).sort());
  }
  return table[model];
}

function tokens(name: string, value: number): bigint {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${name} must be a non-negative integer, got ${value}`);
  }
  return BigInt(value);
}

function ceilDiv(numerator: bigint, denominator: bigint): bigint {
  return (numerator + denominator - 1n) / denominator;
}

/**
 * Exact cost of `usage` on `model`: Σ tokens × price-per-million ÷ 10⁶, rounded up once to the
 * micro-dollar. Throws `UnknownModelError` for a model not in `table`, a RangeError for a
 * negative or fractional token count, and `InvalidMoneyError` for a malformed price.
 */
export function costOf(model: string, usage: TokenUsage, table: PricingTable): string {
  const price = priceOf(model, table);
  const scaled =
    tokens('inputTokens', usage.inputTokens) * toMicros(price.inputUsdPerMillion) +
    tokens('outputTokens', usage.outputTokens) * toMicros(price.outputUsdPerMillion);
  return fromMicros(ceilDiv(scaled, TOKENS_PER_MILLION));
}

/**
 * The most a call can cost: its prompt size (or an upper bound) and its `max_tokens`. This is the
 * amount to reserve against a budget before the call; same errors as `costOf`.
 */
export function maxCostOf(model: string, maxInputTokens: number, maxOutputTokens: number, table: PricingTable): string {
  return costOf(model, { inputTokens: maxInputTokens, outputTokens: maxOutputTokens }, table);
}

/**
 * The most output tokens a call of `maxInputTokens` can ask for and still cost at most `usd`
 * (0 when even its input does not fit). The inverse of `maxCostOf`, rounded down.
 */
export function outputTokensWithin(model: string, maxInputTokens: number, usd: string, table: PricingTable): number {
  const price = priceOf(model, table);
  const budget = toMicros(usd) * TOKENS_PER_MILLION - tokens('maxInputTokens', maxInputTokens) * toMicros(price.inputUsdPerMillion);
  if (budget <= 0n) return 0;
  const perToken = toMicros(price.outputUsdPerMillion);
  if (perToken === 0n) return Number.MAX_SAFE_INTEGER;
  const fit = budget / perToken;
  return fit > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(fit);
}

/** Tokens a request adds around the prompt text (role markers, message framing): a generous bound. */
export const MESSAGE_OVERHEAD_TOKENS = 64;

/**
 * An upper bound of the input tokens of `prompt` without the provider's tokenizer: its UTF-8
 * length in bytes (byte-level BPE tokenizers never make a token of less than one byte) plus the
 * request's framing. Loose — often 3-4× the real count — but never below it.
 */
export function inputTokenBound(prompt: string): number {
  return new TextEncoder().encode(prompt).length + MESSAGE_OVERHEAD_TOKENS;
}

/** Whether `table` prices `model` (an own key: "constructor" is not a model). */
export function isPriced(model: string, table: PricingTable): boolean {
  return Object.prototype.hasOwnProperty.call(table, model);
}

/** Throws `UnknownModelError` unless `table` prices `model`: checked before a paid call, not after. */
export function assertPriced(model: string, table: PricingTable): void {
  priceOf(model, table);
}
