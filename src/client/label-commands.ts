import type { Command } from 'commander';
import type { WardenConfig } from '../config/schema';
import type { LabelInput, OfferedLabel, OutcomeLabel } from '../ledger/label-store';
import type { RuntimeConfig } from '../runtime/config';
import { forTerminalLine } from '../shared/control-characters';
import { approverKeysDir } from '../shared/approver-keys-dir';
import { UserError } from '../shared/errors';
import { parseSince } from './ledger-commands';
import type * as LabelStoreModule from '../ledger/label-store';
import type * as ApproverKeysModule from './approver-keys';
import type * as SessionModule from './session';

/* eslint-disable @typescript-eslint/no-require-imports -- loaded when a command runs (see cli.ts) */
const labelStore = () => require('../ledger/label-store') as typeof LabelStoreModule;
const approverKeys = () => require('./approver-keys') as typeof ApproverKeysModule;
const session = () => require('./session') as typeof SessionModule;
/* eslint-enable @typescript-eslint/no-require-imports */

interface Io {
  readonly print: (line: string) => void;
  readonly printJson: (value: unknown) => void;
}

const LABELS: readonly OutcomeLabel[] = ['risky', 'benign'];

interface LabelFlags {
  readonly reason?: string;
  readonly by?: string;
  readonly suggest?: boolean;
  readonly accept?: boolean;
  readonly since?: string;
  readonly json?: boolean;
}

/**
 * `warden label ID risky|benign`: what a person says an intent's outcome was, for `warden eval`
 * to measure the detectors against. `--suggest` lists what the ledger offers as labels.
 */
export function addLabelCommand(program: Command, config: RuntimeConfig, settings: () => WardenConfig, defaultUser: () => string, io: Io): void {
  program
    .command('label [id] [label]')
    .description(
      "Label an intent's outcome risky or benign, for warden eval (signed with your approver key when you have one); labelling again replaces the label, the ledger keeps both. With --suggest: the labels the ledger offers (gates rejected with a reason, merged intents reverted: risky) for intents not labelled yet",
    )
    .option('--reason <text>', 'why')
    .option('--by <name>', "who labels (default: the config's operator, else $USER)")
    .option('--suggest', 'list the offered labels, each with the command that accepts it')
    .option('--accept', 'with --suggest: label each offered intent as offered')
    .option('--since <when>', 'with --suggest: offers from this date (YYYY-MM-DD) or this long ago (7d)')
    .option('--json', 'with --suggest: print JSON')
    .action(async (id: string | undefined, label: string | undefined, flags: LabelFlags) => {
      if (flags.suggest) {
        if (id !== undefined) throw new UserError('--suggest takes no intent id: it lists every offered label (add --accept to take them)');
        return suggest(config, settings, flags.by ?? defaultUser(), flags, io);
      }
      if (flags.accept || flags.since || flags.json) throw new UserError('--accept, --since and --json go with --suggest');
      if (id === undefined || label === undefined) throw new UserError('give an intent id and a label: warden label ID risky|benign [--reason TEXT]');
      if (!LABELS.includes(label as OutcomeLabel)) throw new UserError(`a label is risky or benign, not "${label}"`);
      if (flags.reason !== undefined && !flags.reason.trim()) throw new UserError('--reason is empty: say why, or leave the option out');
      const by = flags.by ?? defaultUser();
      const input = signed(settings(), { intentId: id, label: label as OutcomeLabel, ...(flags.reason ? { reason: flags.reason } : {}), by, source: 'label' });
      await withLabelStore(config, async (store) => {
        if (!(await store.intentKnown(id))) throw new UserError(`no intent with id ${id} in the ledger (nothing started or recorded under that id)`);
        await store.addLabel(input);
      });
      io.print(`labelled ${id} ${label} (by ${by}${input.proof ? ', signed' : ''})`);
    });
}

async function suggest(config: RuntimeConfig, settings: () => WardenConfig, by: string, flags: LabelFlags, io: Io): Promise<void> {
  const since = flags.since ? parseSince(flags.since) : undefined;
  const warden = flags.accept ? settings() : undefined;
  const offered = await withLabelStore(config, async (store) => {
    const found = await store.offeredLabels(since);
    for (const offer of flags.accept ? found : []) await store.addLabel(signed(warden!, { intentId: offer.intentId, label: offer.label, reason: offer.reason, by, source: offer.source }));
    return found;
  });
  if (flags.json) return io.printJson(offered);
  if (offered.length === 0) return io.print('no label to offer: every gate rejected with a reason and every reverted intent is labelled');
  for (const offer of offered) io.print(flags.accept ? `labelled ${offer.intentId} ${offer.label}: ${forTerminalLine(offer.reason)}` : offerLine(offer));
}

/** An offer and the command that takes it. */
function offerLine(offer: OfferedLabel): string {
  return `${offer.intentId} ${offer.label} (${offer.source}: ${forTerminalLine(offer.reason)})\n  warden label ${offer.intentId} ${offer.label} --reason ${JSON.stringify(offer.reason)}`;
}

/**
 * The label signed with its labeller's key when they have one, as `warden approve` signs their
 * decisions. An approver the config lists by key must label with that key: their name alone
 * is not theirs to use.
 */
function signed(warden: WardenConfig, label: LabelInput): LabelInput {
  const key = approverKeys().readApproverKey(approverKeysDir(), label.by);
  const listed = warden.approvers?.[label.by]?.publicKey;
  if (!key) {
    if (listed) throw new UserError(`${label.by} is an approver with a key in the config: their labels are signed, and ${approverKeysDir()} has no key of theirs`);
    return label;
  }
  if (listed && approverKeys().publicKeyOf(key) !== listed) throw new UserError(`${label.by}'s key in ${approverKeysDir()} is not the one the config lists for them`);
  return { ...label, proof: approverKeys().signLabel(key, { intentId: label.intentId, label: label.label, by: label.by, ...(label.reason ? { reason: label.reason } : {}), source: label.source }) };
}

/** Runs `use` with the label store on the ledger's database, closed after. */
export async function withLabelStore<T>(config: RuntimeConfig, use: (store: LabelStoreModule.LabelStore) => Promise<T>): Promise<T> {
  const { database } = await session().openLedger(config, () => undefined);
  try {
    return await use(new (labelStore().LabelStore)(database.pool));
  } finally {
    await database.close();
  }
}
