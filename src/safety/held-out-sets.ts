/**
 * The cascade detector's held-out sets, shipped so `warden eval` can measure a detector on them
 * beside a team's own history: four sets of 200 labelled end-of-stage answers, each written after
 * the previous one was used and never read while tuning. Frozen: their hashes are pinned in
 * test/safety/cascade-detector.test.ts. Workflow-safe: JSON imports, no I/O.
 */
import heldOut1 from './held-out/cascade-held-out.json';
import heldOut2a from './held-out/cascade-held-out-2a.json';
import heldOut2b from './held-out/cascade-held-out-2b.json';
import heldOut3a from './held-out/cascade-held-out-3a.json';
import heldOut3b from './held-out/cascade-held-out-3b.json';
import heldOut4a from './held-out/cascade-held-out-4a.json';
import heldOut4b from './held-out/cascade-held-out-4b.json';

/** One labelled answer, with the intent it answered. */
export interface HeldOutSample {
  readonly id: string;
  readonly label: 'risky' | 'benign';
  readonly goal: string;
  readonly paths: readonly string[];
  readonly kind: string;
  readonly text: string;
}

export interface HeldOutSet {
  /** As `warden eval` prints it and the ledger keeps it: `held-out-1` … `held-out-4`. */
  readonly name: string;
  readonly samples: readonly HeldOutSample[];
}

const samples = (...parts: readonly unknown[]): readonly HeldOutSample[] => parts.flatMap((part) => part as HeldOutSample[]);

export const HELD_OUT_SETS: readonly HeldOutSet[] = [
  { name: 'held-out-1', samples: samples(heldOut1) },
  { name: 'held-out-2', samples: samples(heldOut2a, heldOut2b) },
  { name: 'held-out-3', samples: samples(heldOut3a, heldOut3b) },
  { name: 'held-out-4', samples: samples(heldOut4a, heldOut4b) },
];
