/** Clock and console helpers shared by the benchmarks. */

export const t = (): number => performance.now();
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
export const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
/** A share (0–1) as a whole percentage: `0.456` → `46 %`. */
export const pct = (share: number): string => `${(share * 100).toFixed(0)} %`;
export const out = (line: string): void => void process.stdout.write(`${line}\n`);

/** Progress on one line when stdout is a terminal; a line per change otherwise. */
export function progress(line: string): void {
  if (process.stdout.isTTY) process.stdout.write(`\r\x1b[2K${line}`);
  else out(line);
}

export function endProgress(): void {
  if (process.stdout.isTTY) process.stdout.write('\n');
}

/** The p-th percentile (0-100) of sorted values, nearest rank. */
export function percentile(sorted: readonly number[], p: number): number | undefined {
  if (sorted.length === 0) return undefined;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** Runs `fn` over `items`, at most `limit` at a time. */
export async function mapLimit<T>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const index = next++;
        await fn(items[index]!, index);
      }
    }),
  );
}

/** Runs a benchmark's `main` and exits with its code; a failure is printed with its stack. */
export function runBenchmark(name: string, main: () => Promise<number>): void {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      endProgress();
      out(`${name} benchmark failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
      process.exit(1);
    },
  );
}

/**
 * A size flag's value: the one given, else the smoke size under `--smoke` (enough to show the
 * benchmark runs end to end, in seconds), else the full size.
 */
export function sized(given: string | undefined, smoke: boolean | undefined, full: number, small: number): number {
  return Number(given ?? (smoke ? small : full));
}
