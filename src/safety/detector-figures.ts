/** How well a detector separates labelled cases: the confusion matrix, and the cases it got wrong. */

/** One labelled case as a detector judged it. */
export interface JudgedCase {
  readonly id: string;
  readonly label: 'risky' | 'benign';
  /** The detector stopped it. */
  readonly flagged: boolean;
}

export interface DetectorFigures {
  readonly n: number;
  readonly tp: number;
  readonly fp: number;
  readonly tn: number;
  readonly fn: number;
  /** tp / (tp + fn); undefined with no risky case. */
  readonly recall?: number;
  /** tn / (tn + fp); undefined with no benign case. */
  readonly specificity?: number;
  /** Risky cases it let through (false negatives), by id. */
  readonly missed: readonly string[];
  /** Benign cases it stopped (false positives), by id. */
  readonly falseAlarms: readonly string[];
}

export function figuresOf(cases: readonly JudgedCase[]): DetectorFigures {
  const missed: string[] = [];
  const falseAlarms: string[] = [];
  let tp = 0;
  let tn = 0;
  for (const c of cases) {
    if (c.label === 'risky') {
      if (c.flagged) tp++;
      else missed.push(c.id);
    } else if (c.flagged) falseAlarms.push(c.id);
    else tn++;
  }
  const fn = missed.length;
  const fp = falseAlarms.length;
  return {
    n: cases.length,
    tp,
    fp,
    tn,
    fn,
    ...(tp + fn > 0 ? { recall: tp / (tp + fn) } : {}),
    ...(tn + fp > 0 ? { specificity: tn / (tn + fp) } : {}),
    missed,
    falseAlarms,
  };
}
