import type { Command } from 'commander';
import type { Logger } from 'pino';
import type { EvalFigures, EvalRecord } from '../ledger/label-store';
import type { WardenConfig } from '../config/schema';
import type { RuntimeConfig } from '../runtime/config';
import { ANSWER_DETECTORS, answerDetectorNamed } from '../safety/answer-detectors';
import { HELD_OUT_SETS, type HeldOutSet } from '../safety/held-out-sets';
import { UserError } from '../shared/errors';
import type { DetectorEvaluation } from './detector-eval';
import type { JudgeTally } from './judge-detector';
import { compareUsd } from '../shared/money';
import { withLabelStore } from './label-commands';
import { parseSince } from './ledger-commands';
import type * as LabelStoreModule from '../ledger/label-store';
import type * as CascadeModelCacheModule from '../workers/cascade-model-cache';
import type * as DetectorEvalModule from './detector-eval';
import type * as JudgeDetectorModule from './judge-detector';
import type * as SessionModule from './session';
import type * as SchemaPrimitivesModule from '../shared/schema-primitives';

/* eslint-disable @typescript-eslint/no-require-imports -- loaded when a command runs (see cli.ts) */
const schemaPrimitives = () => require('../shared/schema-primitives') as typeof SchemaPrimitivesModule;
/* eslint-enable @typescript-eslint/no-require-imports */

/* eslint-disable @typescript-eslint/no-require-imports -- loaded when a command runs (see cli.ts) */
const labelStore = () => require('../ledger/label-store') as typeof LabelStoreModule;
const cascadeModelCache = () => require('../workers/cascade-model-cache') as typeof CascadeModelCacheModule;
const detectorEval = () => require('./detector-eval') as typeof DetectorEvalModule;
const judgeDetectorModule = () => require('./judge-detector') as typeof JudgeDetectorModule;
const session = () => require('./session') as typeof SessionModule;
/* eslint-enable @typescript-eslint/no-require-imports */

interface Io {
  readonly print: (line: string) => void;
  readonly printJson: (value: unknown) => void;
}

interface EvalFlags {
  readonly since?: string;
  readonly detector: string;
  readonly judgeModel?: string;
  readonly judgeBudget: string;
  readonly heldOut: string;
  readonly json?: boolean;
  readonly history?: boolean;
}

const DEFAULT_JUDGE_BUDGET_USD = '5';

/**
 * `warden eval`: how well a detector separates the intents people labelled risky from those they
 * labelled benign, on what the gateway recorded of them, and on the shipped held-out sets. Each
 * figure set goes in the ledger; `--history` shows them over time.
 */
export function addEvalCommand(program: Command, config: RuntimeConfig, settings: () => WardenConfig, logger: () => Logger, io: Io): void {
  program
    .command('eval')
    .description(
      'Measure a detector on the labelled intents (warden label) from their recorded answers: recall, specificity, and the intents it missed or stopped wrongly by id; then on the shipped held-out sets. The figures go in the ledger',
    )
    .option('--since <when>', 'intents from this date (YYYY-MM-DD) or this long ago (7d); default: all')
    .option('--detector <name>', `the detector: ${ANSWER_DETECTORS.map((d) => d.name).join(', ')}`, 'cascade')
    .option('--judge-model <agent>', "measure the scope judge instead, on this agent of the config (a model over HTTP): one paid call per answer, the held-out sets' included")
    .option('--judge-budget <usd>', 'the most the judge may spend on this run (it stops with an error once spent; the last call may go past it)', DEFAULT_JUDGE_BUDGET_USD)
    .option('--held-out <sets>', `the shipped held-out sets to measure on, comma-separated (${HELD_OUT_SETS.map((h) => h.name).join(', ')}), or none`, 'all')
    .option('--json', 'print JSON')
    .option('--history', "print earlier runs' figures, oldest first (the trend), instead of running")
    .action(async (flags: EvalFlags) => {
      if (!schemaPrimitives().UsdSchema.safeParse(flags.judgeBudget).success || compareUsd(flags.judgeBudget, '0') <= 0) throw new UserError(`--judge-budget must be a USD amount above 0 such as 2 or 0.50, not ${flags.judgeBudget}`);
      const judge = flags.judgeModel === undefined ? undefined : judgeDetectorModule().judgeDetector(settings(), flags.judgeModel, flags.judgeBudget);
      const detector = judge?.detector ?? answerDetectorNamed(flags.detector);
      if (!detector) throw new UserError(`unknown detector "${flags.detector}": the detectors are ${ANSWER_DETECTORS.map((d) => d.name).join(', ')} (or --judge-model AGENT)`);
      const since = flags.since ? parseSince(flags.since) : undefined;
      const heldOut = heldOutSetsNamed(flags.heldOut);
      if (flags.history) {
        if (since) throw new UserError('--history shows every earlier run: leave --since out');
        const runs = await withLabelStore(config, (store) => store.evalHistory(detector.name));
        if (flags.json) return io.printJson(runs);
        if (runs.length === 0) return io.print(`no earlier run of warden eval --detector ${detector.name}`);
        for (const line of formatHistory(runs)) io.print(line);
        return;
      }
      const { database } = await session().openLedger(config, () => undefined);
      let evaluation: DetectorEvaluation;
      let runId: string;
      try {
        // The model a worker kept, if there is one: training it again costs seconds.
        await cascadeModelCache().readyCascadeModel(logger());
        evaluation = await detectorEval().evaluateDetector(database.pool, detector, { ...(since ? { since } : {}), approvers: keyedApprovers(settings()), heldOut });
        runId = await new (labelStore().LabelStore)(database.pool).recordEval([evaluation.history, ...evaluation.heldOut], since);
      } finally {
        await database.close();
      }
      if (flags.json) return io.printJson({ runId, ...evaluation, ...(judge ? { judge: judge.tally } : {}) });
      for (const line of formatEvaluation(evaluation)) io.print(line);
      if (judge) io.print(judgeLine(judge.tally));
    });
}

/** The held-out sets `--held-out` names: `all`, `none`, or names separated by commas. */
function heldOutSetsNamed(names: string): readonly HeldOutSet[] {
  if (names === 'all') return HELD_OUT_SETS;
  if (names === 'none') return [];
  return names.split(',').map((name) => {
    const set = HELD_OUT_SETS.find((h) => h.name === name.trim());
    if (!set) throw new UserError(`--held-out takes all, none or set names separated by commas (${HELD_OUT_SETS.map((h) => h.name).join(', ')}), not ${name}`);
    return set;
  });
}

/** The config's approvers with a key, name → public key: their labels count only when signed. */
function keyedApprovers(warden: WardenConfig): Record<string, string> {
  return Object.fromEntries(Object.entries(warden.approvers ?? {}).map(([name, approver]) => [name, approver.publicKey]));
}

const ratio = (value: number | undefined): string => (value === undefined ? '  -  ' : value.toFixed(3));

/** One figure set on one line: n, the matrix, recall and specificity. */
function figuresLine(name: string, f: EvalFigures): string {
  return `${name.padEnd(12)} n ${String(f.n).padStart(4)}  tp ${String(f.tp).padStart(3)} fp ${String(f.fp).padStart(3)} tn ${String(f.tn).padStart(3)} fn ${String(f.fn).padStart(3)}  recall ${ratio(f.recall)}  specificity ${ratio(f.specificity)}`;
}

/** The lines `warden eval` prints. */
export function formatEvaluation(e: DetectorEvaluation): string[] {
  const lines = [`${e.detector}, blocking where the worker blocks, on the labelled intents${e.since ? ` since ${e.since.toISOString()}` : ''}:`];
  lines.push(e.history.n === 0 ? 'history      no labelled intent with a recorded answer' : figuresLine('history', e.history));
  if (e.history.missed.length > 0) lines.push(`  missed (risky, not stopped): ${e.history.missed.join(' ')}`);
  if (e.history.falseAlarms.length > 0) lines.push(`  false alarms (benign, stopped): ${e.history.falseAlarms.join(' ')}`);
  if (e.unrecorded.length > 0) lines.push(`  skipped ${e.unrecorded.length} labelled intent(s) with no recorded answer: ${e.unrecorded.join(' ')}`);
  if (e.unsignedLabels.length > 0) lines.push(`  not counted: ${e.unsignedLabels.length} intent(s) with a label in a keyed approver's name but not signed by their key: ${e.unsignedLabels.join(' ')}`);
  if (e.unlabelled.length > 0) lines.push(`  skipped ${e.unlabelled.length} recorded intent(s) nobody labelled (warden label --suggest offers some)`);
  if (e.heldOut.length > 0) lines.push('on the held-out sets shipped with Warden:');
  for (const f of e.heldOut) lines.push(figuresLine(f.set, f));
  return lines;
}

/** What the judge's run asked and spent. */
function judgeLine(t: JudgeTally): string {
  const none = t.unavailable > 0 ? `, ${t.unavailable} without a verdict (counted as stopped, as the worker counts them)` : '';
  return `the judge (${t.model}) was asked about ${t.asked} answer(s)${none}; spent $${t.spentUsd} of $${t.budgetUsd}`;
}

/** The lines `warden eval --history` prints: one per figure set, runs oldest first. */
export function formatHistory(runs: readonly EvalRecord[]): string[] {
  return runs.map((r) => `${r.at.toISOString()}  ${r.detector.padEnd(14)} ${figuresLine(r.set, r)}${r.skipped > 0 ? `  skipped ${r.skipped}` : ''}${r.since ? `  since ${r.since.toISOString()}` : ''}`);
}
