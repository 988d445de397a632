import type pg from 'pg';
import { recordedAnswerText } from '../gateway/answer-text';
import { ExchangeStore } from '../ledger/exchange-store';
import type { EvalFigures } from '../ledger/label-store';
import { LabelStore } from '../ledger/label-store';
import type { AnswerContext, AnswerDetector } from '../safety/answer-detectors';
import { figuresOf } from '../safety/detector-figures';
import { HELD_OUT_SETS, type HeldOutSample } from '../safety/held-out-sets';

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
  readonly heldOut: readonly EvalFigures[];
}

/**
 * Runs `detector` over every answer recorded of each labelled intent: an intent counts as stopped
 * when any of its answers is (the worker judges each stage's answer so). Each answer is judged
 * against the intent's goal and declared paths, as the worker judges it. An answer the gateway's
 * screening stopped whole is recorded as the refusal the agent got: it counts as stopped where the
 * detector covers that screening.
 */
export async function evaluateDetector(pool: pg.Pool, detector: AnswerDetector, since?: Date): Promise<DetectorEvaluation> {
  const labels = new LabelStore(pool);
  const exchanges = new ExchangeStore(pool);
  const judged: Array<{ id: string; label: 'risky' | 'benign'; flagged: boolean }> = [];
  const unrecorded: string[] = [];
  for (const labelled of await labels.labels(since)) {
    const recording = labelled.recorded ? await exchanges.recordingOf(labelled.intentId, { bodies: true }) : undefined;
    const texts = (recording?.exchanges ?? []).flatMap((e) => (e.answer ? [recordedAnswerText(e.answer)] : [])).filter((text) => text.trim() !== '');
    const screened = detector.coversScreening && labelled.recorded ? await labels.screenedAnswers(labelled.intentId) : 0;
    if (texts.length === 0 && screened === 0) {
      unrecorded.push(labelled.intentId);
      continue;
    }
    const context = await labels.intentScope(labelled.intentId);
    judged.push({ id: labelled.intentId, label: labelled.label, flagged: screened > 0 || texts.some((text) => detector.blocks(text, context)) });
  }
  const history: EvalFigures = { detector: detector.name, set: 'history', ...figuresOf(judged), skipped: unrecorded.length };
  const heldOut = HELD_OUT_SETS.map((set): EvalFigures => {
    const figures = figuresOf(set.samples.map((s) => ({ id: s.id, label: s.label, flagged: detector.blocks(s.text, contextOf(s)) })));
    // The held-out answers' ids are not a tuning aid: counts only.
    return { detector: detector.name, set: set.name, ...figures, missed: [], falseAlarms: [], skipped: 0 };
  });
  return { detector: detector.name, ...(since ? { since } : {}), history, unrecorded, unlabelled: await labels.unlabelledRecorded(since), heldOut };
}

/** A held-out answer's intent: its goal and declared paths, when it has them. */
function contextOf(sample: HeldOutSample): AnswerContext {
  return { ...(sample.goal ? { goal: sample.goal } : {}), ...(sample.paths.length > 0 ? { paths: sample.paths } : {}) };
}
