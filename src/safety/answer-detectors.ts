/**
 * The detectors that judge an agent's answer text on its own, as `warden eval` measures them:
 * each says whether an answer would stop the intent for a person. The cascade detector blocks at
 * HIGH (the worker's cascade gate; CRITICAL also halts in the gateway). The stub detector, the
 * document checks and the secret scan judge code, documents and changes, not an answer: they are
 * not here. Pure.
 */
import type { CascadeContext } from './cascade-detector';
import type * as CascadeDetector from './cascade-detector';

/** The cascade detector, loaded on the first answer judged (`warden --help` lists the detectors only). */
// eslint-disable-next-line @typescript-eslint/no-require-imports -- see above
const cascade = (): typeof CascadeDetector => require('./cascade-detector') as typeof CascadeDetector;

/** What an answer is judged against: the intent's goal and declared paths. */
export type AnswerContext = CascadeContext;

export interface AnswerDetector {
  readonly name: string;
  readonly description: string;
  /**
   * True when the answer is stopped for a person. `writtenBy`: the model that wrote it, where the
   * recording says (a detector that asks a model must not ask that one).
   */
  readonly blocks: (text: string, context: AnswerContext, writtenBy?: string) => boolean | Promise<boolean>;
  /**
   * Whether an answer the gateway's screening stopped (the full cascade detector at CRITICAL,
   * its text not recorded) counts as stopped by this detector: true where this detector would
   * have stopped it too.
   */
  readonly coversScreening: boolean;
}

export const ANSWER_DETECTORS: readonly AnswerDetector[] = [
  {
    name: 'cascade',
    description: 'the cascade detector as the worker runs it (rules and learned model), blocking at HIGH',
    blocks: (text, context) => cascade().cascadeAtLeast(cascade().detectCascade(text, context).level, 'HIGH'),
    coversScreening: true,
  },
  {
    name: 'cascade-rules',
    description: "the cascade detector's rules alone (no learned model), blocking at HIGH",
    blocks: (text, context) => cascade().cascadeAtLeast(cascade().detectCascade(text, context, { learned: false }).level, 'HIGH'),
    // Screening ran the rules and the model: whether the rules alone would have stopped it is not known.
    coversScreening: false,
  },
];

export function answerDetectorNamed(name: string): AnswerDetector | undefined {
  return ANSWER_DETECTORS.find((d) => d.name === name);
}
