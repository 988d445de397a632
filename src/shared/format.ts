/** `"0.051000"` → `"$0.05"`: exact amounts are kept for the ledger; people read cents. */
export function formatUsd(usd: string): string {
  return `$${Number(usd).toFixed(2)}`;
}
