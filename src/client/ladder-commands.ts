import type { Command } from 'commander';
import type { WardenConfig } from '../config/schema';
import type { LadderDefaults, LadderState } from '../ledger/ladder-store';
import type { RuntimeConfig } from '../runtime/config';
import { UserError } from '../shared/errors';
import { FAILURES_BEFORE_DROP, falsePositiveRate, LADDER, unmetRequirements, type LadderLevel } from '../shared/ladder';
import type * as LadderStoreModule from '../ledger/ladder-store';
import type * as SessionModule from './session';

/* eslint-disable @typescript-eslint/no-require-imports -- loaded when a command runs (see cli.ts) */
const ladderStore = () => require('../ledger/ladder-store') as typeof LadderStoreModule;
const session = () => require('./session') as typeof SessionModule;
/* eslint-enable @typescript-eslint/no-require-imports */

interface Io {
  readonly print: (line: string) => void;
  readonly printJson: (value: unknown) => void;
}

/** The agent profile's ladder scope from `--agent` (a profile name or kind). */
function scopeOf(agent: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(agent)) throw new UserError(`--agent takes an agent profile name such as scripted or claude, not ${JSON.stringify(agent)}`);
  return `agent:${agent}`;
}

function describe(state: LadderState): Record<string, unknown> {
  const next = state.level < 4 ? ((state.level + 1) as LadderLevel) : undefined;
  return {
    agent: state.scope.replace(/^agent:/, ''),
    level: state.level,
    name: LADDER[state.level]!.name,
    autoPasses: LADDER[state.level]!.autoPasses,
    pinned: state.pinned,
    metrics: { ...state.metrics, falsePositiveRate: Number(falsePositiveRate(state.metrics).toFixed(4)) },
    ...(next !== undefined ? { next: { level: next, name: LADDER[next]!.name, needs: unmetRequirements(next, state.metrics) } } : {}),
    ...(state.recordedAt ? { recordedAt: state.recordedAt.toISOString() } : {}),
  };
}

function printState(io: Io, state: LadderState): void {
  const d = describe(state) as ReturnType<typeof describe> & { next?: { level: number; name: string; needs: string[] } };
  const m = state.metrics;
  io.print(`${d.agent}: L${state.level} ${LADDER[state.level]!.name}${state.pinned ? ' (pinned)' : ''} — auto-passes ${LADDER[state.level]!.autoPasses}`);
  io.print(
    `  runs ${m.totalRuns}, successful ${m.successfulRuns}, false positives ${m.falsePositives} (rate ${falsePositiveRate(m).toFixed(3)}), missed critical bugs ${m.missedCriticalBugs}, approval rate ${m.approvalRate.toFixed(3)}`,
  );
  if (d.next) io.print(`  L${d.next.level} ${d.next.name} needs: ${d.next.needs.length ? d.next.needs.join('; ') : 'nothing more (it climbs after the next successful run, if level-up is allowed)'}`);
  for (const [repo, failures] of Object.entries(m.failureStreaks ?? {})) {
    io.print(`  ${failures} failed intent(s) in a row on ${repo}: at ${FAILURES_BEFORE_DROP} the level drops a step`);
  }
}

/** `warden ladder [--agent A]` and `warden ladder set LEVEL --agent A`. */
export function addLadderCommands(program: Command, config: RuntimeConfig, settings: () => WardenConfig, approver: () => string, io: Io): void {
  const withStore = async <T>(fn: (store: LadderStoreModule.LadderStore, defaults: LadderDefaults) => Promise<T>): Promise<T> => {
    const automation = settings().automation;
    const { ledger, database } = await session().openLedger(config, () => undefined);
    try {
      return await fn(new (ladderStore().LadderStore)(ledger.pool), { level: automation.level as LadderLevel, allowLevelUp: automation.allowLevelUp });
    } finally {
      await database.close();
    }
  };

  const ladder = program
    .command('ladder')
    .description("The automation ladder (L0 Manual … L4 Full Autonomy): each agent profile's level, metrics, and what the next level needs")
    .option('--agent <name>', 'one agent profile (its name, or its kind: scripted, command)')
    .option('--json', 'print JSON')
    .action(async (flags: { agent?: string; json?: boolean }) => {
      const states = await withStore(async (store, defaults) => (flags.agent ? [await store.state(scopeOf(flags.agent), defaults)] : store.scopes(defaults)));
      if (flags.json) return io.printJson(states.map(describe));
      if (states.length === 0) return io.print(`no agent has finished an intent yet; every profile starts at L${settings().automation.level}`);
      for (const state of states) printState(io, state);
    });

  ladder
    .command('set <level>')
    .description('Set an agent profile\'s level by hand (pinned: it stays there until set again with --no-pin)')
    .option('--agent <name>', 'the agent profile (required)')
    .option('--no-pin', 'let runs move the level again from here')
    .option('--by <name>', "who sets it (default: the config's operator, else $USER)")
    .option('--reason <text>', 'why')
    .action(async (raw: string, flags: { agent?: string; pin: boolean; by?: string; reason?: string }) => {
      // `ladder` has an --agent of its own, which commander gives the option to when both could take it.
      const agent = flags.agent ?? ladder.opts<{ agent?: string }>().agent;
      if (!agent) throw new UserError('ladder set needs --agent NAME: the agent profile whose level to set');
      const level = Number(raw.replace(/^L/i, ''));
      if (!Number.isInteger(level) || level < 0 || level > 4) throw new UserError(`a level is 0-4 (or L0-L4), not ${raw}`);
      const state = await withStore((store, defaults) =>
        store.setLevel({ scope: scopeOf(agent), level: level as LadderLevel, pinned: flags.pin, by: flags.by ?? approver(), reason: flags.reason, defaults }),
      );
      printState(io, state);
    });

  ladder
    .command('missed-bug <intent>')
    .description('Report a critical bug that review missed in a merged intent: it counts on the profile\'s ladder and drops its level one step')
    .option('--agent <name>', 'the agent profile that ran the intent (required)')
    .requiredOption('--reason <text>', 'what the bug was')
    .option('--by <name>', "who reports it (default: the config's operator, else $USER)")
    .action(async (intentId: string, flags: { agent?: string; reason: string; by?: string }) => {
      const agent = flags.agent ?? ladder.opts<{ agent?: string }>().agent;
      if (!agent) throw new UserError('ladder missed-bug needs --agent NAME: the agent profile that ran the intent');
      const state = await withStore((store, defaults) => store.recordMissedBug({ scope: scopeOf(agent), intentId, by: flags.by ?? approver(), reason: flags.reason, defaults }));
      printState(io, state);
    });
}
