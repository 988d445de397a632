import { createHash } from 'node:crypto';

/**
 * A UUID (version 8, RFC 9562) made from a sha256 of `parts`: the same decision always gets the
 * same id, so writing it twice inserts one row.
 */
export function deterministicUuid(...parts: readonly unknown[]): string {
  const hex = createHash('sha256').update(JSON.stringify(parts)).digest('hex');
  const variant = ((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}
