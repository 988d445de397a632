/**
 * What the change inspection after an agent attempt costs on a repository of a few thousand
 * files: the snapshot of the target repo's working tree taken before the attempt
 * (takeRepoSnapshot) and the inspection after it (inspectChanges: what changed, whether it stays
 * in the declared paths, whether anything was written outside the worktree), and the secret scan
 * of the changed files before they are committed (holdBackSecrets). Side by side, in
 * alternating rounds so the machine's load hits both alike, the floor any such check pays:
 * `git status` in the worktree and in the repo.
 *
 *   npx tsx bench/change-inspection.ts [--files 3000] [--changed 200] [--rounds 10] [--smoke]
 *   npm run bench:change-inspection
 *
 * `--smoke` runs a small repository for two rounds (a check that the bench runs, not figures).
 * Printed: mean and best per round for each, their ratio, and a JSON line; results in
 * bench/results/change-inspection.json.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { holdBackSecrets, inspectChanges, takeRepoSnapshot } from '../src/activities/change-inspection';
import { ensureWorktree } from '../src/activities/worktree';
import { createSampleRepo } from '../src/client/sample-repo';
import { out, runBenchmark } from './console';
import { writeResult } from './harness';

const { values: flags } = parseArgs({
  options: {
    files: { type: 'string', default: '3000' },
    changed: { type: 'string', default: '200' },
    rounds: { type: 'string', default: '10' },
    smoke: { type: 'boolean', default: false },
  },
});
const FILES = flags.smoke ? 300 : Number(flags.files);
const CHANGED = flags.smoke ? 20 : Number(flags.changed);
const ROUNDS = flags.smoke ? 2 : Number(flags.rounds);
if (![FILES, CHANGED, ROUNDS].every((n) => Number.isInteger(n) && n >= 1)) {
  out('--files, --changed and --rounds take whole numbers ≥ 1');
  process.exit(2);
}

const ID = ['-c', 'user.name=Bench', '-c', 'user.email=bench@localhost', '-c', 'commit.gpgsign=false'];
const git = (cwd: string, ...args: string[]): string => execFileSync('git', [...ID, ...args], { cwd, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 }).trim();

function write(dir: string, rel: string, content: string): void {
  mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
  writeFileSync(path.join(dir, rel), content);
}

interface Timing {
  readonly meanMs: number;
  readonly bestMs: number;
}

const timing = (ms: readonly number[]): Timing => ({
  meanMs: Math.round((ms.reduce((a, b) => a + b, 0) / ms.length) * 10) / 10,
  bestMs: Math.round(Math.min(...ms) * 10) / 10,
});

async function main(): Promise<number> {
  const root = mkdtempSync(path.join(tmpdir(), 'warden-bench-inspection-'));
  try {
    const repo = createSampleRepo(path.join(root, 'repo'));
    const { worktreePath: worktree } = await ensureWorktree({ repoPath: repo, baseBranch: 'main', intentId: 'bench', worktreeRoot: path.join(root, 'worktrees') });
    // 30 folders of FILES/30 files each, committed on main and brought into the worktree.
    const perFolder = Math.ceil(FILES / 30);
    for (let d = 0; d < 30; d++) for (let f = 0; f < perFolder; f++) write(repo, `data/d${d}/f${f}.txt`, `${d}-${f}\n`.repeat(20));
    git(repo, 'add', '-A');
    git(repo, 'commit', '-qm', 'many files');
    git(worktree, 'merge', '-q', '--ff-only', 'main');
    const base = git(worktree, 'rev-parse', 'HEAD');
    // As test/activities/change-inspection.test.ts: the changed files are the declared folder's,
    // and new ones beside them when there are more changes than files in it.
    out(`a repository of ${30 * perFolder} files; per round ${CHANGED} changed or added in the declared folder and 1 written outside the worktree`);

    const inspection: number[] = [];
    const secretScan: number[] = [];
    const status: number[] = [];
    // Changed files as code is: a few hundred lines of ordinary source each.
    const source = (round: number, f: number): string =>
      Array.from({ length: 200 }, (_, i) => `export const value${i} = compute(${round}, ${f}, 'item-${i}'); // line ${i}`).join('\n') + '\n';
    for (let round = 0; round < ROUNDS; round++) {
      let started = performance.now();
      const snapshot = await takeRepoSnapshot(repo);
      for (let f = 0; f < CHANGED; f++) write(worktree, `data/d1/f${f}.txt`, source(round, f));
      write(repo, 'data/d7/f7.txt', `outside, round ${round}\n`);
      const report = await inspectChanges({ worktreePath: worktree, repoPath: repo, baseCommit: base, declaredPaths: ['data/d1/**'], repoSnapshot: snapshot });
      inspection.push(performance.now() - started);
      if (report.changedPaths !== CHANGED || report.violations.length !== 1) throw new Error(`unexpected report: ${report.changedPaths} changed, ${report.violations.length} violation(s)`);

      started = performance.now();
      const scan = await holdBackSecrets({ worktreePath: worktree, repoPath: repo, baseCommit: base, allowances: [] });
      secretScan.push(performance.now() - started);
      if (scan.held.length !== 0) throw new Error(`unexpected secrets: ${scan.held.length}`);

      started = performance.now();
      git(worktree, 'status', '--porcelain');
      git(repo, 'status', '--porcelain');
      status.push(performance.now() - started);

      git(worktree, 'checkout', '-q', '--', '.');
      git(worktree, 'clean', '-fdq');
      git(repo, 'checkout', '-q', '--', '.');
    }

    const results = { inspection: timing(inspection), secretScan: timing(secretScan), gitStatus: timing(status) };
    const ratio = Math.round((results.inspection.meanMs / results.gitStatus.meanMs) * 10) / 10;
    const scanRatio = Math.round((results.secretScan.meanMs / results.gitStatus.meanMs) * 10) / 10;
    out('');
    out(`${'per round'.padEnd(34)}${'mean ms'.padStart(10)}${'best ms'.padStart(10)}`);
    out(`${'snapshot + inspection'.padEnd(34)}${results.inspection.meanMs.toFixed(1).padStart(10)}${results.inspection.bestMs.toFixed(1).padStart(10)}`);
    out(`${`secret scan of ${CHANGED} changed files`.padEnd(34)}${results.secretScan.meanMs.toFixed(1).padStart(10)}${results.secretScan.bestMs.toFixed(1).padStart(10)}`);
    out(`${'git status, worktree and repo'.padEnd(34)}${results.gitStatus.meanMs.toFixed(1).padStart(10)}${results.gitStatus.bestMs.toFixed(1).padStart(10)}`);
    out(`inspection / git status (mean): ${ratio}×; secret scan / git status (mean): ${scanRatio}×`);
    const summary = { bench: 'change-inspection', ...(flags.smoke ? { smoke: true } : {}), files: 30 * perFolder, changed: CHANGED, rounds: ROUNDS, ...results, ratios: { inspectionOverGitStatus: ratio, secretScanOverGitStatus: scanRatio } };
    out(JSON.stringify(summary));
    // A smoke run's figures are no figures: the last real ones stay.
    if (!flags.smoke) await writeResult('change-inspection', { ...summary, at: new Date().toISOString(), node: process.version });
    return 0;
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

runBenchmark('change-inspection', main);
