const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** A duration as intents and config files write it: `90s`, `30m`, `24h`, `2d` (DurationSchema checks it). */
export const DURATION_PATTERN = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)$/;

/**
 * Parses a duration such as `500ms`, `30s`, `15m`, `24h` or `2d` into whole milliseconds
 * (rounded). Throws a `RangeError` for anything else, including empty strings, negative
 * numbers, missing or unknown units, and values too large to be a safe integer.
 */
export function parseDuration(text: string): number {
  const match = DURATION_PATTERN.exec(typeof text === 'string' ? text.trim() : '');
  if (!match) {
    throw new RangeError(`invalid duration ${JSON.stringify(text)}: expected e.g. 500ms, 30s, 15m, 24h or 2d`);
  }
  const ms = Math.round(Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS]);
  if (!Number.isSafeInteger(ms)) {
    throw new RangeError(`invalid duration ${JSON.stringify(text)}: too large`);
  }
  return ms;
}
