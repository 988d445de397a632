/**
 * What this process has had run for it: how many programs were launched, by name, and how long
 * the children that did someone else's work took, by kind. The agent's and the tests' time is
 * not Warden's; subtracting it from an intent's total leaves what Warden itself costs (the
 * pipeline benchmark reports both). Counts live in this process only and never reset on their
 * own: a reader takes a snapshot before and after what it measures and looks at the difference.
 */

/** Whose work a child process did: the agent's, the repo's tests (or other repo commands), or Warden's own. */
export type ChildKind = 'agent' | 'tests' | 'other';

export interface ProcessTallySnapshot {
  /** Programs started, by base name (`git`, `sh`, `bwrap`); a start that failed counts too. */
  readonly launched: Readonly<Record<string, number>>;
  /** Milliseconds spent in children, by kind (for kinds that report their time). */
  readonly childMs: Readonly<Record<ChildKind, number>>;
}

const launched = new Map<string, number>();
const childMs: Record<ChildKind, number> = { agent: 0, tests: 0, other: 0 };

/** Counts one start of `program` (a path or a name; its base name is what is counted). */
export function countLaunch(program: string): void {
  const name = program.slice(program.lastIndexOf('/') + 1);
  launched.set(name, (launched.get(name) ?? 0) + 1);
}

/** Adds `ms` of a child's (or, for an in-process agent, the agent's own) time to `kind`. */
export function addChildTime(kind: ChildKind, ms: number): void {
  if (Number.isFinite(ms) && ms > 0) childMs[kind] += ms;
}

/** The counts so far. */
export function processTally(): ProcessTallySnapshot {
  return { launched: Object.fromEntries(launched), childMs: { ...childMs } };
}

/** What happened between two snapshots of the same process. */
export function tallySince(before: ProcessTallySnapshot, after: ProcessTallySnapshot = processTally()): ProcessTallySnapshot {
  const names = new Set([...Object.keys(before.launched), ...Object.keys(after.launched)]);
  return {
    launched: Object.fromEntries([...names].map((name) => [name, (after.launched[name] ?? 0) - (before.launched[name] ?? 0)]).filter(([, n]) => n !== 0)),
    childMs: {
      agent: after.childMs.agent - before.childMs.agent,
      tests: after.childMs.tests - before.childMs.tests,
      other: after.childMs.other - before.childMs.other,
    },
  };
}
