/**
 * What the chaos scripts share (bench/chaos-local.ts on the dev server, bench/chaos.ts on the real
 * server with two worker hosts): the seeded generator, the intents and their approver, the wait
 * for them to close and the tally of what is left afterwards.
 */
import { spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { Client } from '@temporalio/client';
import type pg from 'pg';
import { sendDecision } from '../../src/client/intents';
import { answeringDesignStages, createSampleRepo } from '../../src/client/sample-repo';
import { Ledger } from '../../src/ledger/ledger';
import { booksDifferenceCents } from '../../src/ledger/budget-store';
import type { IntentBooks } from '../../src/ledger/types';
import { workflowIdForIntent } from '../../src/shared/ids';
import { stateQuery } from '../../src/shared/messages';
import { endProgress, out, progress, secs, sized, sleep } from '../console';

export const REPO_ROOT = path.resolve(__dirname, '..', '..');
export const BIN = path.join(REPO_ROOT, 'bin', 'warden.js');
/** The server's own force-close under a flood of events (flow control, not a failure of the workflow). */
const WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND = 17;
/**
 * The process names the intents' agents and test runs take, so a kill can aim at them and the end
 * can count them: this run's own (its pid), so chaos runs side by side (bench:smoke runs three
 * benchmarks at a time) do not count each other's.
 */
export const AGENT_TAG = `chaos-agent-${process.pid}`;
export const TESTS_TAG = `chaos-tests-${process.pid}`;
/** The tag's number as the shell works it out: the command line that starts a process does not hold its tag. */
const TAG_NUMBER = `\\$((${process.pid - 2}+2))`;

export interface ChaosFlags {
  /** How many intents. */
  readonly intents: number;
  readonly smoke: boolean;
  readonly seed: number;
  readonly timeoutMs: number;
  /** The chaos's pauses: a tenth as long in a smoke run, which shows the run works, not that Warden holds. */
  paced(ms: number): number;
  /** The value of each of `switches` (boolean flags of the script's own). */
  readonly switches: Readonly<Record<string, boolean>>;
}

/**
 * A chaos script's command line: --intents N (`full`, or `small` with --smoke), --smoke, --seed N
 * (random), --timeout SECONDS, --help (prints `usage` and exits), and the script's own `switches`.
 */
export function chaosFlags(opts: { readonly usage: string; readonly full: number; readonly small: number; readonly timeoutSeconds: number; readonly switches?: readonly string[] }): ChaosFlags {
  const switchOptions = Object.fromEntries((opts.switches ?? []).map((name) => [name, { type: 'boolean' as const, default: false }]));
  const { values } = parseArgs({
    options: {
      intents: { type: 'string' },
      smoke: { type: 'boolean', default: false },
      seed: { type: 'string' },
      timeout: { type: 'string', default: String(opts.timeoutSeconds) },
      help: { type: 'boolean', default: false },
      ...switchOptions,
    },
  });
  if (values.help) {
    out(opts.usage);
    process.exit(0);
  }
  const smoke = values.smoke === true;
  const intents = sized(values.intents as string | undefined, smoke, opts.full, opts.small);
  const seed = values.seed !== undefined ? Number(values.seed) : randomBytes(4).readUInt32BE(0);
  const timeoutMs = Number(values.timeout) * 1000;
  if (!Number.isInteger(intents) || intents < 1) throw new Error(`--intents must be a positive whole number, not ${String(values.intents)}`);
  if (!Number.isInteger(seed) || seed < 0) throw new Error(`--seed must be a whole number, not ${String(values.seed)}`);
  if (!(timeoutMs > 0)) throw new Error(`--timeout must be a number of seconds, not ${String(values.timeout)}`);
  const switches = Object.fromEntries((opts.switches ?? []).map((name) => [name, (values as Record<string, unknown>)[name] === true]));
  return { intents, smoke, seed, timeoutMs, paced: (ms) => Math.round(smoke ? ms / 10 : ms), switches };
}

/** mulberry32: a small seeded generator, so a run can be told again from its seed. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

/** Live processes whose command line holds `tag` (zombies left out). */
export function processesWith(tag: string): number {
  let count = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue;
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(tag)) count++;
    } catch {
      // gone
    }
  }
  return count;
}

/** The chaos's log: each line printed as it happens and kept for the result. */
export function chaosLog(): { lines: string[]; note: (line: string) => void } {
  const lines: string[] = [];
  return {
    lines,
    note: (line: string) => {
      lines.push(line);
      endProgress();
      out(`  ${line}`);
    },
  };
}

/** SIGKILL to `child`; resolves once it has closed. */
export async function killHard(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const closed = new Promise((resolve) => child.once('close', resolve));
  child.kill('SIGKILL');
  await closed;
}

/** SIGTERM to `child` (a worker drains and ends); resolves once it has closed. */
export async function stopGently(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const closed = new Promise((resolve) => child.once('close', resolve));
  child.kill('SIGTERM');
  await closed;
}

export interface ChaosIntent {
  readonly id: string;
  /** The repository the intent merges into. */
  readonly repo: string;
}

/**
 * Starts `count` intents through the CLI, as a user would, each on a sample repository of its own
 * under `reposDir`. Each one's agent answers the design stages at once, writes a change in impl and
 * sleeps 15 – 45 s, and its tests sleep 10 – 30 s (durations from `random`), so that kills land
 * during agent calls and test runs. `prepareRepo` may change a repository before its intent starts.
 */
export function startChaosIntents(opts: {
  readonly count: number;
  readonly prefix: string;
  readonly reposDir: string;
  readonly env: NodeJS.ProcessEnv;
  readonly random: () => number;
  readonly prepareRepo?: (repo: string) => void;
  /** Each intent as it starts (the approver and the chaos follow the list as it grows). */
  readonly started: ChaosIntent[];
}): void {
  for (let i = 0; i < opts.count; i++) {
    const id = `${opts.prefix}-${i}`;
    const repo = createSampleRepo(path.join(opts.reposDir, `r${i}`));
    opts.prepareRepo?.(repo);
    const impl = `echo "change ${i}" >> chaos.txt; bash -c "exec -a chaos-agent-${TAG_NUMBER} sleep ${15 + Math.floor(opts.random() * 30)}"`;
    const tests = `bash -c "exec -a chaos-tests-${TAG_NUMBER} sleep ${10 + Math.floor(opts.random() * 20)}"`;
    const agent = answeringDesignStages(`if grep -q '^# Warden: impl'; then ${impl}; else echo ok; fi`);
    const run = spawnSync(process.execPath, [BIN, 'run', '--repo', repo, '--goal', `chaos ${i}`, '--id', id, '--agent', 'command', '--cmd', agent, '--test-cmd', tests, '--detach'], { env: opts.env, encoding: 'utf8' });
    if (run.status !== 0) throw new Error(`warden run failed for ${id}: ${run.stderr}`);
    opts.started.push({ id, repo });
    progress(`started ${i + 1}/${opts.count} intents`);
  }
  endProgress();
}

/** The approver: every gate an intent waits at is approved with a signed decision, until `done()`. */
export async function approveAll(client: () => Client, intents: readonly ChaosIntent[], keysDir: string, done: () => boolean): Promise<void> {
  while (!done()) {
    for (const { id } of intents) {
      const state = await client().workflow.getHandle(workflowIdForIntent(id)).query(stateQuery).catch(() => undefined);
      if (!state?.pendingGate) continue;
      await sendDecision(client(), id, { gate: state.pendingGate.gate, decision: 'approve', by: 'approver', reason: 'chaos run' }, { keysDir }).catch(() => undefined);
    }
    await sleep(2_000);
  }
}

/** Waits until every intent's workflow has closed, or the time is up; returns each closed one's status. */
export async function waitForClosed(
  client: () => Client,
  intents: readonly ChaosIntent[],
  opts: { readonly began: number; readonly timeoutMs: number; readonly count: number; readonly status?: () => string },
): Promise<Map<string, string>> {
  const statuses = new Map<string, string>();
  while (Date.now() - opts.began < opts.timeoutMs) {
    for (const { id } of intents) {
      if (statuses.has(id)) continue;
      const description = await client().workflow.getHandle(workflowIdForIntent(id)).describe().catch(() => undefined);
      if (description && description.status.name !== 'RUNNING') statuses.set(id, description.status.name);
    }
    progress(`${secs(Date.now() - opts.began)}: ${statuses.size}/${opts.count} intents closed${opts.status ? `, ${opts.status()}` : ''}`);
    if (statuses.size === opts.count) break;
    await sleep(2_000);
  }
  endProgress();
  return statuses;
}

export interface Outcomes {
  merged: number;
  /** The ids of the merged intents. */
  mergedIds: string[];
  /** `<id>: <status> (<reason>)` for each intent that ended without merging. */
  failed: string[];
  running: number;
  /** Workflow tasks that failed, other than the server's flow control. */
  workflowTaskFailures: number;
  /** Still-running workflows whose last event is a failed workflow task. */
  wedged: number;
}

/** How each intent ended, read from its workflow. */
export async function tallyOutcomes(client: Client, intents: readonly ChaosIntent[], statuses: ReadonlyMap<string, string>): Promise<Outcomes> {
  const outcomes: Outcomes = { merged: 0, mergedIds: [], failed: [], running: 0, workflowTaskFailures: 0, wedged: 0 };
  for (const { id } of intents) {
    const handle = client.workflow.getHandle(workflowIdForIntent(id));
    const events = (await handle.fetchHistory()).events ?? [];
    outcomes.workflowTaskFailures += events.filter((e) => e.workflowTaskFailedEventAttributes && e.workflowTaskFailedEventAttributes.cause !== WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND).length;
    if (!statuses.has(id)) {
      outcomes.running++;
      if (events.at(-1)?.workflowTaskFailedEventAttributes) outcomes.wedged++;
      continue;
    }
    const result = await handle.result().then(
      (r: { status?: string; reason?: string }) => r,
      (error: Error) => ({ status: 'failed', reason: deepestMessage(error) }),
    );
    if (result.status === 'merged') {
      outcomes.merged++;
      outcomes.mergedIds.push(id);
    }
    else outcomes.failed.push(`${id}: ${result.status}${result.reason ? ` (${result.reason.slice(0, 160)})` : ''}`);
  }
  return outcomes;
}

/** Prints how the intents ended: the first lines of a chaos run's figures. */
export function printOutcomes(outcomes: Outcomes): void {
  out('');
  out(`intents merged / failed / still running    ${outcomes.merged} / ${outcomes.failed.length} / ${outcomes.running}`);
  for (const failure of outcomes.failed) out(`  failed: ${failure}`);
  out(`workflow tasks failed (wedged workflows)    ${outcomes.workflowTaskFailures} (${outcomes.wedged})`);
}

/** The message of the innermost cause: a failed workflow's "Activity task failed" says less than what failed it. */
function deepestMessage(error: Error): string {
  let inner = error;
  while (inner.cause instanceof Error) inner = inner.cause;
  return inner.message;
}

/** Intent worktrees still under a worker's worktree root (its trash left out). */
export function worktreesLeft(worktreeRoot: string): number {
  if (!existsSync(worktreeRoot)) return 0;
  return readdirSync(worktreeRoot)
    .filter((d) => d !== '.trash')
    .flatMap((d) => readdirSync(path.join(worktreeRoot, d))).length;
}

/** Agent and test processes of the intents still alive. */
export const chaosProcessesLeft = (): number => processesWith(AGENT_TAG) + processesWith(TESTS_TAG);

/** Waits until an agent or a test run of this run is running (at most `maxMs`): a kill lands in work, not in a lull. */
export async function waitForWork(maxMs: number, during: 'agent' | 'tests' | 'any' = 'any'): Promise<void> {
  const deadline = Date.now() + maxMs;
  const running = () => (during === 'tests' ? 0 : processesWith(AGENT_TAG)) + (during === 'agent' ? 0 : processesWith(TESTS_TAG));
  while (running() === 0 && Date.now() < deadline) await sleep(Math.min(200, maxMs / 100));
}

/**
 * The books once the reservations of killed attempts are reconciled (within a minute of their
 * attempt ending; waits up to 150 s): the difference in cents and the reservations still open.
 */
export async function settledBooks(pool: pg.Pool): Promise<{ differenceCents: number; openReservations: number }> {
  const ledger = new Ledger(pool);
  const deadline = Date.now() + 150_000;
  const open = (books: readonly IntentBooks[]) => books.reduce((sum, b) => sum + b.openReservations, 0);
  let books = await ledger.budget.books();
  while (open(books) > 0 && Date.now() < deadline) {
    progress(`waiting for ${open(books)} open reservation(s) to be reconciled`);
    await sleep(5_000);
    books = await ledger.budget.books();
  }
  endProgress();
  return { differenceCents: booksDifferenceCents(books), openReservations: open(books) };
}

/** Merges beyond the first on each repository's main: an intent merged twice. */
export function duplicateMerges(repos: readonly string[]): number {
  let duplicates = 0;
  for (const repo of repos) {
    const merges = spawnSync('git', ['-C', repo, 'rev-list', '--merges', '--count', 'main'], { encoding: 'utf8' }).stdout.trim();
    duplicates += Math.max(0, Number(merges) - 1);
  }
  return duplicates;
}

/** Writes the result to bench/results/<name>.json. */
export function writeChaosResult(name: string, result: unknown): void {
  const file = path.join(REPO_ROOT, 'bench', 'results', `${name}.json`);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
}
