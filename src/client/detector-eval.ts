import type pg from 'pg';
import { recordedAnswerText } from '../gateway/answer-text';
import { ExchangeStore } from '../ledger/exchange-store';
import type { EvalFigures, IntentLabel } from '../ledger/label-store';
import { LabelStore } from '../ledger/label-store';
import { JUDGE_STAGE_SUFFIX } from '../shared/scope-judge';
import type { AnswerContext, AnswerDetector } from '../safety/answer-detectors';
import { figuresOf } from '../safety/detector-figures';
import { HELD_OUT_SETS, type HeldOutSample, type HeldOutSet } from '../safety/held-out-sets';
import { verifyLabelSignature } from '../shared/label-proof';

/** A `warden eval` run: the detector on the team's labelled intents, then on the shipped held-out sets. */
export interface DetectorEvaluation {
  readonly detector: string;
  readonly since?: Date;
  /** On the labelled intents (set `history`). */
  readonly history: EvalFigures;
  /** Labelled intents left out: nothing recorded, or no answer text kept (capped, or past retention). */
  readonly unrecorded: readonly string[];
  /** Recorded intents nobody labelled. */
  readonly unlabelled: readonly string[];
  /**
   * Intents with a label in the name of an approver the config lists with a key, without that
   * key's signature: that label does not count (the intent's previous one does, if any).
   */
  readonly unsignedLabels: readonly string[];
  readonly heldOut: readonly EvalFigures[];
}

/**
 * Runs `detector` over every agent answer recorded of each labelled intent (a scope judge's
 * verdicts are not answers): an intent counts as stopped
 * when any of its answers is (the worker judges each stage's answer so). Each answer is judged
 * against the intent's goal and declared paths, as the worker judges it. An answer the gateway's
 * screening stopped whole is recorded as the refusal the agent got: it counts as stopped where the
 * detector covers that screening. An intent's label is its latest that counts (see countsAsSigned).
 */
export async function evaluateDetector(
  pool: pg.Pool,
  detector: AnswerDetector,
  options: { readonly since?: Date; readonly approvers?: Readonly<Record<string, string>>; readonly heldOut?: readonly HeldOutSet[] } = {},
): Promise<DetectorEvaluation> {
  const { since, approvers = {}, heldOut: sets = HELD_OUT_SETS } = options;
  const labels = new LabelStore(pool);
  const exchanges = new ExchangeStore(pool);
  const judged: Array<{ id: string; label: 'risky' | 'benign'; flagged: boolean }> = [];
  const unrecorded: string[] = [];
  const unsignedLabels = new Set<string>();
  /** Intents none of whose labels counts. */
  let uncounted = 0;
  const rows = await labels.labels(since);
  for (const intentId of [...new Set(rows.map((r) => r.intentId))]) {
    const own = rows.filter((r) => r.intentId === intentId);
    const labelled = own.find((r) => countsAsSigned(r, approvers));
    if (own.some((r) => !countsAsSigned(r, approvers))) unsignedLabels.add(intentId);
    if (!labelled) {
      uncounted++;
      continue;
    }
    const recording = labelled.recorded ? await exchanges.recordingOf(intentId, { bodies: true }) : undefined;
    const answers = (recording?.exchanges ?? []).filter((e) => !e.stage.endsWith(JUDGE_STAGE_SUFFIX));
    const texts = answers.flatMap((e) => (e.answer ? [{ text: recordedAnswerText(e.answer), writtenBy: e.modelId }] : [])).filter(({ text }) => text.trim() !== '');
    const screened = detector.coversScreening && labelled.recorded ? await labels.screenedAnswers(intentId) : 0;
    if (texts.length === 0 && screened === 0) {
      unrecorded.push(intentId);
      continue;
    }
    const context = await labels.intentScope(intentId);
    judged.push({ id: intentId, label: labelled.label, flagged: screened > 0 || (await anyBlocked(detector, texts, context)) });
  }
  const history: EvalFigures = { detector: detector.name, set: 'history', ...figuresOf(judged), skipped: unrecorded.length + uncounted };
  const heldOut: EvalFigures[] = [];
  for (const set of sets) {
    // One answer after another: a detector that asks a model spends on each.
    const samples: Array<{ id: string; label: 'risky' | 'benign'; flagged: boolean }> = [];
    for (const s of set.samples) samples.push({ id: s.id, label: s.label, flagged: await detector.blocks(s.text, contextOf(s)) });
    // The held-out answers' ids are not a tuning aid: counts only.
    heldOut.push({ detector: detector.name, set: set.name, ...figuresOf(samples), missed: [], falseAlarms: [], skipped: 0 });
  }
  return { detector: detector.name, ...(since ? { since } : {}), history, unrecorded, unlabelled: await labels.unlabelledRecorded(since), unsignedLabels: [...unsignedLabels], heldOut };
}

/** Whether the detector stops any of the answers: asked one after another, up to the first it stops. */
async function anyBlocked(detector: AnswerDetector, answers: ReadonlyArray<{ readonly text: string; readonly writtenBy?: string | undefined }>, context: AnswerContext): Promise<boolean> {
  for (const answer of answers) if (await detector.blocks(answer.text, context, answer.writtenBy)) return true;
  return false;
}

/** A label counts unless it is in the name of a keyed approver (config `approvers`) and not signed by that key. */
function countsAsSigned(label: IntentLabel, approvers: Readonly<Record<string, string>>): boolean {
  const publicKey = approvers[label.by];
  if (publicKey === undefined) return true;
  if (!label.proof) return false;
  return verifyLabelSignature(publicKey, { intentId: label.intentId, label: label.label, by: label.by, ...(label.reason === undefined ? {} : { reason: label.reason }), source: label.source }, label.proof);
}

/** A held-out answer's intent: its goal and declared paths, when it has them. */
function contextOf(sample: HeldOutSample): AnswerContext {
  return { ...(sample.goal ? { goal: sample.goal } : {}), ...(sample.paths.length > 0 ? { paths: sample.paths } : {}) };
}
