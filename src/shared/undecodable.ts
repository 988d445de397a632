/**
 * The key of the value the worker's payload converter gives for a payload it could not decode
 * (see src/workflows/payload-converter.ts): message handlers refuse it with its text. Pure data:
 * the workflow sandbox imports it.
 */
export const UNDECODABLE_PAYLOAD = '__wardenUndecodablePayload';

export type UndecodablePayload = { readonly [UNDECODABLE_PAYLOAD]: string };

/** The decoding error of a marker value, or undefined for anything else. */
export function undecodableReason(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const reason = (value as Record<string, unknown>)[UNDECODABLE_PAYLOAD];
  return typeof reason === 'string' ? reason : undefined;
}
