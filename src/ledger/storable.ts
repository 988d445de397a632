/**
 * What PostgreSQL refuses in text and jsonb: a NUL character (U+0000), and a lone UTF-16
 * surrogate (half of a character, e.g. where a string was cut in the middle of an emoji), which
 * becomes an invalid `\ud83d` escape in JSON. A ledger write that is retried until it succeeds
 * would then never succeed, and whatever reaches the ledger (a refused decision's payload, an
 * agent's output) may hold either. Both are replaced by U+FFFD in every string, keys included.
 */
// eslint-disable-next-line no-control-regex -- the NUL character is exactly what must be found
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

export function storable<T>(value: T): T {
  if (typeof value === 'string') return value.replace(UNSTORABLE, '\uFFFD') as T;
  if (Array.isArray(value)) return value.map((v) => storable(v)) as T;
  if (value && typeof value === 'object' && !(value instanceof Date)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [storable(k), storable(v)])) as T;
  }
  return value;
}
