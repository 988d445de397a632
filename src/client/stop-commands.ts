import type { Client } from '@temporalio/client';
import type { Command } from 'commander';
import { deterministicUuid } from '../ledger/event-id';
import type { Ledger } from '../ledger/ledger';
import type { RuntimeConfig } from '../runtime/config';
import { UserError } from '../shared/errors';
import { intentIdFromWorkflowId } from '../shared/ids';
import { describeRunning, intentHandle } from './intents';
import { connectTemporal, openLedger } from './session';

interface Io {
  readonly print: (line: string) => void;
  readonly printJson: (value: unknown) => void;
  readonly defaultUser: () => string;
}

/**
 * Cancels one running intent (the kill switch for one) and records who stopped it and why.
 * Cancellation kills the running agent's process group and removes the worktree; nothing merges.
 */
export async function stopIntent(client: Client, ledger: Ledger, intentId: string, by: string, reason: string): Promise<void> {
  const handle = intentHandle(client, intentId);
  const description = await describeRunning(handle, intentId);
  await ledger.recordSafetyEvent({
    id: deterministicUuid('INTENT_STOPPED', description.workflowId, description.runId),
    timestamp: new Date(),
    eventType: 'INTENT_STOPPED',
    intentId,
    reason: `stopped by ${by}: ${reason}`,
    severity: 'high',
    metadata: { by, runId: description.runId },
  });
  await handle.cancel();
}

/** Workflow ids of running intents, from visibility. */
async function runningIntents(client: Client): Promise<string[]> {
  const ids: string[] = [];
  for await (const wf of client.workflow.list({ query: "WorkflowType = 'intentWorkflow' AND ExecutionStatus = 'Running'" })) ids.push(wf.workflowId);
  return ids;
}

/**
 * The emergency stop: set the global stop flag first (so no worker starts new agent work and
 * `warden run` refuses), then cancel every running intent until none is listed.
 */
export async function stopAll(client: Client, ledger: Ledger, by: string, reason: string): Promise<{ cancelled: string[] }> {
  await ledger.setGlobalStop(by, reason);
  const cancelled = new Set<string>();
  // Visibility lags a moment behind: list again until nothing is running (bounded).
  for (let round = 0; round < 30; round++) {
    const running = (await runningIntents(client)).filter((id) => !cancelled.has(id));
    if (running.length === 0 && round > 0) break;
    await Promise.all(
      running.map(async (workflowId) => {
        cancelled.add(workflowId);
        await client.workflow.getHandle(workflowId).cancel().catch(() => undefined); // it may have just ended
      }),
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  return { cancelled: [...cancelled].map(intentIdFromWorkflowId) };
}

/** Adds `warden stop` and `warden unlock`. */
export function addStopCommands(program: Command, config: RuntimeConfig, io: Io): void {
  program
    .command('stop [id]')
    .description('Stop an intent now (kills its agent, removes its worktree, merges nothing); --all is the emergency stop')
    .option('--all', 'set the global stop flag, then stop every running intent')
    .option('--reason <text>', 'why (required with --all)')
    .option('--by <name>', 'who stops (default: $USER)')
    .option('--json', 'print JSON')
    .action(async (id: string | undefined, flags: { all?: boolean; reason?: string; by?: string; json?: boolean }) => {
      if (flags.all && id) throw new UserError('give an intent id or --all, not both');
      if (!flags.all && !id) throw new UserError('give the intent id to stop, or --all --reason TEXT for the emergency stop');
      if (flags.all && !flags.reason) throw new UserError('--all needs --reason TEXT');
      const by = flags.by ?? io.defaultUser();
      const reason = flags.reason ?? 'stopped from the CLI';
      const target = await connectTemporal(config, () => undefined);
      const { ledger, database } = await openLedger(config, () => undefined);
      try {
        if (flags.all) {
          const started = Date.now();
          const { cancelled } = await stopAll(target.client, ledger, by, reason);
          const result = { globalStop: true, cancelled, seconds: (Date.now() - started) / 1000 };
          if (flags.json) return io.printJson(result);
          io.print(`global stop set by ${by}; stopped ${cancelled.length} intent(s) in ${result.seconds.toFixed(1)} s`);
          io.print('nothing new starts until: warden unlock --reason TEXT');
        } else {
          await stopIntent(target.client, ledger, id!, by, reason);
          if (flags.json) return io.printJson({ stopped: id, by, reason });
          io.print(`stopped ${id}`);
        }
      } finally {
        await database.close();
        await target.close();
      }
    });

  program
    .command('unlock')
    .description('Clear the global stop flag set by warden stop --all')
    .requiredOption('--reason <text>', 'why it is safe again')
    .option('--by <name>', 'who unlocks (default: $USER)')
    .action(async (flags: { reason: string; by?: string }) => {
      const { ledger, database } = await openLedger(config, () => undefined);
      try {
        const stop = await ledger.globalStop();
        if (!stop.stopped) throw new UserError('Warden is not stopped: nothing to unlock');
        await ledger.clearGlobalStop(flags.by ?? io.defaultUser(), flags.reason);
        io.print('global stop cleared; intents may start again');
      } finally {
        await database.close();
      }
    });
}
