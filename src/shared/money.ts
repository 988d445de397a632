/**
 * Exact USD arithmetic on decimal strings, via BigInt micro-dollars (1 USD = 1_000_000 µ$).
 *
 * Workflow-safe: pure, no Node built-ins, no I/O. Floats never touch money here: `0.1 + 0.2`
 * must not decide whether a budget trips.
 */

/** Micro-dollars per dollar: six decimal places, the precision of the ledger's `UsdSchema`. */
export const MICROS_PER_USD = 1_000_000n;

/** Zero dollars in the canonical format. */
export const ZERO_USD = '0.000000';

const USD_PATTERN = /^(-)?(\d+)(?:\.(\d{1,6}))?$/;

/** A string that is not a decimal USD amount with at most six decimals. */
export class InvalidMoneyError extends Error {
  constructor(readonly input: unknown) {
    super(`not a USD amount with at most 6 decimals: ${JSON.stringify(input)}`);
    this.name = 'InvalidMoneyError';
  }
}

/**
 * Parses "12", "12.5" or "-0.000001" into micro-dollars. Rejects more than six decimals rather
 * than rounding, exponents, spaces, "+", and anything that is not a string.
 */
export function toMicros(usd: string): bigint {
  const match = typeof usd === 'string' ? USD_PATTERN.exec(usd) : null;
  if (!match) throw new InvalidMoneyError(usd);
  const [, minus, whole, fraction = ''] = match;
  const micros = BigInt(whole) * MICROS_PER_USD + BigInt(fraction.padEnd(6, '0'));
  return minus ? -micros : micros;
}

/** Formats micro-dollars as a decimal string with exactly six decimals ("-1.050000"). */
export function fromMicros(micros: bigint): string {
  const negative = micros < 0n;
  const abs = negative ? -micros : micros;
  const whole = abs / MICROS_PER_USD;
  const fraction = (abs % MICROS_PER_USD).toString().padStart(6, '0');
  return `${negative ? '-' : ''}${whole.toString()}.${fraction}`;
}

/** Re-formats any accepted amount canonically ("1.5" → "1.500000"). */
export function normalizeUsd(usd: string): string {
  return fromMicros(toMicros(usd));
}

/** a + b, exactly. */
export function addUsd(a: string, b: string): string {
  return fromMicros(toMicros(a) + toMicros(b));
}

/** Sum of any number of amounts; "0.000000" for none. */
export function sumUsd(amounts: readonly string[]): string {
  return fromMicros(amounts.reduce((total, amount) => total + toMicros(amount), 0n));
}

/** a − b, exactly; may be negative. */
export function subUsd(a: string, b: string): string {
  return fromMicros(toMicros(a) - toMicros(b));
}

/** −1, 0 or 1 as a is less than, equal to or greater than b ("1.5" equals "1.500000"). */
export function compareUsd(a: string, b: string): -1 | 0 | 1 {
  const x = toMicros(a);
  const y = toMicros(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * amount × n for an integer n (a number of calls, tokens, …). A non-integer or unsafe `n`
 * throws a RangeError instead of rounding silently.
 */
export function mulUsd(amount: string, n: number | bigint): string {
  if (typeof n === 'number' && !Number.isSafeInteger(n)) {
    throw new RangeError(`mulUsd needs a safe integer multiplier, got ${n}`);
  }
  return fromMicros(toMicros(amount) * BigInt(n));
}

/**
 * Approximate dollars as a float, for statistics and display only (EWMA baselines, ratios):
 * never feed the result back into a budget decision.
 */
export function usdToNumber(usd: string): number {
  return Number(toMicros(usd)) / 1_000_000;
}
