import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { WardenConfig } from '../config/schema';
import type { RuntimeConfig } from '../runtime/config';
import { UserError } from '../shared/errors';
import type { IntentInput } from '../shared/intent';
import { approvalsFrom } from './intent-input';
import { openOwnedLedger } from './session';

/**
 * The agent profile a revert intent names: none runs (the revert is mechanical), but every
 * intent has one, and this one's name keeps reverts in a ladder scope of their own.
 */
const REVERT_AGENT = { kind: 'scripted', name: 'warden-revert', scriptPath: '/dev/null' } as const;

/**
 * `warden revert ID`: the intent that undoes a merged one on its base branch. Checks first what
 * can be checked here (it merged, the repository is there, its merge is still on the base);
 * conflicts with later commits are found by the revert itself, which then fails saying where.
 */
export async function revertIntentInput(
  config: RuntimeConfig,
  warden: WardenConfig,
  targetId: string,
  options: { readonly reason?: string; readonly testCmd?: string; readonly embeddedServer: boolean },
): Promise<IntentInput> {
  const { ledger, database } = await openOwnedLedger(config, () => undefined);
  let merged: Awaited<ReturnType<typeof ledger.queries.mergedIntent>>;
  try {
    merged = await ledger.queries.mergedIntent(targetId);
  } finally {
    await database.close();
  }
  if (!merged) throw new UserError(`intent ${targetId} has not merged (the ledger has no merge of it): there is nothing to revert`);
  const { repoPath, baseBranch, mergedCommit } = merged;
  if (!existsSync(repoPath)) throw new UserError(`intent ${targetId} merged into ${repoPath}, which is not there any more`);
  try {
    execFileSync('git', ['merge-base', '--is-ancestor', mergedCommit, `refs/heads/${baseBranch}`], { cwd: repoPath, stdio: 'ignore' });
  } catch {
    throw new UserError(`the merge of ${targetId} (${mergedCommit.slice(0, 12)}) is no longer on ${baseBranch} in ${repoPath}: there is nothing to revert there`);
  }
  // The repository's own test command when the config names one; else the worker finds one (npm test).
  const testCommand = options.testCmd ?? warden.run?.testCommand;
  return {
    id: `revert-${targetId}`.slice(0, 64),
    goal: `Revert intent ${targetId} (merged as ${mergedCommit.slice(0, 12)})${options.reason ? `: ${options.reason}` : ''}`,
    repoPath,
    baseBranch,
    agent: { ...REVERT_AGENT },
    ...(testCommand ? { testCommand } : {}),
    limits: warden.limits,
    gates: warden.gates,
    ...(warden.lineage ? { lineage: warden.lineage } : {}),
    approvals: approvalsFrom({ ...warden, embeddedServer: options.embeddedServer }),
    notify: warden.notify ?? [],
    // What the worker completes every intent from, carried as the config has it (see intent-completion.ts).
    reviewPolicy: warden.review,
    ...(warden.secrets ? { secrets: warden.secrets } : {}),
    customGates: warden.customGates ?? [],
    revertOf: { intentId: targetId, mergedCommit },
  };
}
