/**
 * Finds or installs the Temporal CLI and prints its absolute path on stdout (progress on stderr).
 * Usage: `npx tsx src/runtime/install-temporal-cli.ts`; WARDEN_HOME defaults to `<cwd>/.warden`.
 */
import path from 'node:path';
import { ensureTemporalCli } from './temporal-cli';

async function main(): Promise<void> {
  const wardenHome = process.env.WARDEN_HOME ?? path.join(process.cwd(), '.warden');
  const cliPath = await ensureTemporalCli({
    wardenHome,
    env: process.env,
    log: (message) => process.stderr.write(`${message}\n`),
  });
  process.stdout.write(`${cliPath}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`Failed to install the Temporal CLI: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
