/**
 * The cascade detector's held-out sets, shipped so `warden eval` can measure a detector on them
 * beside a team's own history: four sets of 200 labelled end-of-stage answers, each written after
 * the previous one was used and never read while tuning. Frozen: their hashes are pinned in
 * test/safety/cascade-detector.test.ts. Each set's file is read when its samples are first asked
 * for: `warden --help` names the sets without reading their answers.
 */

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

/** A set whose samples are read from its JSON files on first use (Node's require caches them). */
function heldOutSet(name: string, files: readonly string[]): HeldOutSet {
  return {
    name,
    get samples(): readonly HeldOutSample[] {
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- read on first use, see above
      return files.flatMap((file) => require(`./held-out/${file}`) as HeldOutSample[]);
    },
  };
}

export const HELD_OUT_SETS: readonly HeldOutSet[] = [
  heldOutSet('held-out-1', ['cascade-held-out.json']),
  heldOutSet('held-out-2', ['cascade-held-out-2a.json', 'cascade-held-out-2b.json']),
  heldOutSet('held-out-3', ['cascade-held-out-3a.json', 'cascade-held-out-3b.json']),
  heldOutSet('held-out-4', ['cascade-held-out-4a.json', 'cascade-held-out-4b.json']),
];
