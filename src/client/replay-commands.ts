import { randomUUID } from 'node:crypto';
import type { Command } from 'commander';
import type { Logger } from 'pino';
import type { WardenConfig } from '../config/schema';
import type { RuntimeConfig } from '../runtime/config';
import { parseSince } from './ledger-commands';
import { UserError } from '../shared/errors';
import type { RunningWorker } from './session';
import type { TemporalTarget } from '../runtime/temporal';
import type * as ReplayComparisonModule from './replay-comparison';
import type * as ReplayIntentModule from './replay-intent';
import type * as ReplayPeriodModule from './replay-period';
import type * as ReplayStartModule from './replay-start';
import type * as SessionModule from './session';

/* eslint-disable @typescript-eslint/no-require-imports -- loaded when a command runs (see cli.ts) */
const replayComparison = () => require('./replay-comparison') as typeof ReplayComparisonModule;
const replayIntentModule = () => require('./replay-intent') as typeof ReplayIntentModule;
const replayPeriodModule = () => require('./replay-period') as typeof ReplayPeriodModule;
const replayStart = () => require('./replay-start') as typeof ReplayStartModule;
const session = () => require('./session') as typeof SessionModule;
/* eslint-enable @typescript-eslint/no-require-imports */

interface Io {
  readonly print: (line: string) => void;
  readonly printJson: (value: unknown) => void;
  /** The effective config (the global --config): the rules the replay is judged by. */
  readonly settings: () => WardenConfig;
  readonly logger: () => Logger;
}

/**
 * `warden replay ID`: the intent run again against the config given (or the current one), its
 * model calls answered from its recording, then printed side by side with the original. It runs
 * on a worker of its own, in this process, on a task queue no other worker serves: the config it
 * was given is the one every step of the replay obeys.
 */
export function addReplayCommand(program: Command, config: RuntimeConfig, io: Io): void {
  program
    .command('replay [id]')
    .description("Run a recorded intent again on a scratch clone at its base commit, with this Warden and the config given (--config, else the current one), every model call answered from its recording; print each stage's safety layers then and now, the gates and the outcome side by side. Never touches the repository, merges, notifies or spends")
    .option('--since <when>', 'instead of one intent, every intent recorded from this date (YYYY-MM-DD) or this long ago (7d): which would now be stopped, held at a gate, or pass')
    .option('--from <stage>', "with an intent id: start the replay at this stage (lld, spec, impl or review), from the commit it started from then; the stages before it are the original's and do not run again")
    .option('--json', 'print the comparison (or, with --since, the table) as JSON')
    .action(async (id: string | undefined, flags: { since?: string; from?: string; json?: boolean }) => {
      if ((id === undefined) === (flags.since === undefined)) throw new UserError('give an intent id, or --since DATE for every intent recorded since then (not both)');
      if (flags.from !== undefined && id === undefined) throw new UserError('--from goes with an intent id, not with --since');
      replayStart().replayFromStage(flags.from);
      const since = flags.since === undefined ? undefined : parseSince(flags.since);
      const safety = io.settings();
      const { ledger, database } = await session().openLedger(config, () => undefined);
      let target: TemporalTarget | undefined;
      let worker: RunningWorker | undefined;
      try {
        // Nothing to replay is said before a server or a worker is started for it.
        if (id !== undefined) await replayIntentModule().recordedBaseOf(ledger.pool, id);
        else if ((await replayPeriodModule().recordedSince(ledger.pool, since!)).length === 0) throw new UserError(`no intent was recorded since ${since!.toISOString()}`, 1);
        target = await session().connectTemporal(config, flags.json ? () => undefined : io.print);
        const taskQueue = `warden-replay-${randomUUID().slice(0, 8)}`;
        worker = await session().startWorker(target, config, safety, io.logger(), undefined, taskQueue);
        const replayTarget = { client: target.client, pool: ledger.pool, taskQueue };
        if (since) {
          const entries = await replayPeriodModule().replayPeriod(replayTarget, since, (e) => flags.json || io.print(`replayed ${e.intentId}: ${e.verdict}`));
          if (flags.json) io.printJson({ since: since.toISOString(), intents: entries });
          else for (const line of ['', ...replayPeriodModule().formatPeriod(entries, since)]) io.print(line);
          return;
        }
        const comparison = await replayComparison().compareReplay(ledger.pool, id!, await replayIntentModule().replayIntent(replayTarget, id!, { ...(flags.from ? { from: flags.from } : {}) }));
        if (flags.json) io.printJson(comparison);
        else for (const line of replayComparison().formatComparison(comparison)) io.print(line);
      } finally {
        await worker?.stop();
        await target?.close();
        await database.close();
      }
    });
}
