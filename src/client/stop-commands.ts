import type { Command } from 'commander';
import type { RuntimeConfig } from '../runtime/config';
import { parseDuration } from '../shared/duration';
import { UserError } from '../shared/errors';
import { STOP_WAIT_MS } from './stop-wait';
import type { StopOutcome } from './stop-intents';
import type * as SessionModule from './session';
import type * as StopIntentsModule from './stop-intents';

/* eslint-disable @typescript-eslint/no-require-imports -- loaded when a command runs (see cli.ts) */
const session = () => require('./session') as typeof SessionModule;
const stopIntents = () => require('./stop-intents') as typeof StopIntentsModule;
/* eslint-enable @typescript-eslint/no-require-imports */

interface Io {
  readonly print: (line: string) => void;
  readonly printJson: (value: unknown) => void;
  readonly defaultUser: () => string;
}

/** Adds `warden stop` and `warden unlock`. */
export function addStopCommands(program: Command, config: RuntimeConfig, io: Io): void {
  program
    .command('stop [id]')
    .description('Stop an intent now (kills its agent, removes its worktree, merges nothing) and wait until it has closed; --all is the emergency stop')
    .option('--all', 'set the global stop flag, then stop every running intent')
    .option('--reason <text>', 'why (required with --all)')
    .option('--by <name>', 'who stops (default: $USER)')
    .option('--wait <duration>', 'how long to wait for an intent to close before terminating it (its worktree then goes to the sweeper)', `${STOP_WAIT_MS / 1000}s`)
    .option('--json', 'print JSON')
    .action(async (id: string | undefined, flags: { all?: boolean; reason?: string; by?: string; wait: string; json?: boolean }) => {
      if (flags.all && id) throw new UserError('give an intent id or --all, not both');
      if (!flags.all && !id) throw new UserError('give the intent id to stop, or --all --reason TEXT for the emergency stop');
      if (flags.all && !flags.reason) throw new UserError('--all needs --reason TEXT');
      const waitMs = waitOf(flags.wait);
      const target = await session().connectTemporal(config, () => undefined);
      // The kill switch must not wait on the ledger: with the embedded PostgreSQL down it is started
      // (and stopped again after), so the stop and the global flag are recorded.
      const { ledger, database } = await session().openOwnedLedger(config, () => undefined);
      const options = {
        by: flags.by ?? io.defaultUser(),
        reason: flags.reason ?? 'stopped from the CLI',
        waitMs,
        namespace: target.namespace,
        ...(flags.json ? {} : { onProgress: io.print }),
      };
      try {
        if (flags.all) {
          const started = Date.now();
          const outcomes = await stopIntents().stopAll(target.client, ledger, options);
          const count = (kind: StopOutcome['outcome']) => outcomes.filter((o) => o.outcome === kind).length;
          const result = { globalStop: true, cancelled: outcomes.map((o) => o.intentId), outcomes, seconds: (Date.now() - started) / 1000 };
          if (flags.json) return io.printJson(result);
          for (const outcome of outcomes) io.print(describeOutcome(outcome));
          io.print(
            `global stop set by ${options.by}; ${outcomes.length} intent(s) were running: ${count('stopped')} stopped, ` +
              `${count('terminated')} terminated after ${waitMs / 1000} s, ${count('ended')} ended on their own first (${result.seconds.toFixed(1)} s)`,
          );
          io.print('nothing new starts until: warden unlock --reason TEXT');
        } else {
          const outcome = await stopIntents().stopIntent(target.client, ledger, id!, options);
          if (flags.json) return io.printJson({ ...outcome, stopped: id, by: options.by, reason: options.reason });
          io.print(describeOutcome(outcome));
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
      const { ledger, database } = await session().openLedger(config, () => undefined);
      try {
        const stop = await ledger.globalStop.current();
        if (!stop.stopped) throw new UserError('Warden is not stopped: nothing to unlock');
        await ledger.globalStop.clear(flags.by ?? io.defaultUser(), flags.reason);
        io.print('global stop cleared; intents may start again');
      } finally {
        await database.close();
      }
    });
}

function waitOf(text: string): number {
  let ms: number;
  try {
    ms = parseDuration(text);
  } catch {
    throw new UserError(`--wait takes a duration such as 30s or 2m, not ${text}`);
  }
  if (ms < 1000) throw new UserError(`--wait must be at least 1s (got ${text})`);
  return ms;
}

/** One line per intent, saying how the stop ended for it. */
function describeOutcome(outcome: StopOutcome): string {
  const took = `${outcome.seconds.toFixed(1)} s`;
  switch (outcome.outcome) {
    case 'stopped':
      return `stopped ${outcome.intentId}: cancelled and closed in ${took}; its agent is dead, its worktree removed, nothing merged`;
    case 'ended':
      return `${outcome.intentId} ended on its own before the stop took (${outcome.status}); see warden status ${outcome.intentId}`;
    case 'terminated':
      return (
        `terminated ${outcome.intentId}: it had not closed ${took} after the cancel (${outcome.stillRunning}); ` +
        'its own cleanup did not run: a sweep removes its worktree once a worker takes it'
      );
  }
}
