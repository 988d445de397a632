/**
 * Parked intents: N intents (default 1000) waiting at a gate on one worker — what does the
 * worker's process hold in memory? Each intent's triage rates it HIGH risk, so it parks at the
 * architecture gate right after triage (its worktree made, one agent stage run, its ledger rows
 * written). The RSS is of this process, which hosts the worker (and the benchmark's client).
 *
 *   npx tsx bench/parked.ts [--intents 1000] [--concurrency 16] [--cache N]
 *   npm run bench:parked
 *
 * Everything is its own and torn down at the end. Results: bench/results/parked.json.
 */
import { readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startIntent } from '../src/client/intents';
import { createSampleRepo } from '../src/client/sample-repo';
import { endProgress, mapLimit, out, progress, runBenchmark, secs, sleep, t } from './console';
import { benchWorker, startBench, unthrottledConfig, withWorker, writeResult } from './harness';

const { values: flags } = parseArgs({ options: { intents: { type: 'string', default: '1000' }, concurrency: { type: 'string', default: '16' }, cache: { type: 'string' } } });
/** `--cache N`: the worker's maxCachedWorkflows (config worker.maxCachedWorkflows); default: the config's. */
const CACHE = flags.cache === undefined ? undefined : Number(flags.cache);
const N = Number(flags.intents);
const C = Number(flags.concurrency);
if (!Number.isInteger(N) || N < 1 || !Number.isInteger(C) || C < 1 || (CACHE !== undefined && (!Number.isInteger(CACHE) || CACHE < 0))) {
  out('--intents and --concurrency take whole numbers ≥ 1, --cache one ≥ 0');
  process.exit(2);
}
/** The worker's settings as the benchmark runs it: the config's defaults, with --cache applied. */
const WORKER = unthrottledConfig(CACHE === undefined ? {} : { maxCachedWorkflows: CACHE }).worker;
const TARGET_MB = 500;
const mb = (bytes: number): number => Math.round(bytes / 1024 / 1024);

async function main(): Promise<number> {
  out(`parked-intents benchmark: ${N} intents waiting at a gate on one worker; ${os.cpus().length} cores, node ${process.version}`);
  const b = await startBench('parked');
  try {
    // The demo script, with triage rating the intent HIGH risk: it parks at the architecture gate.
    const script = JSON.parse(await readFile(b.demoScript, 'utf8')) as { stages: Record<string, Array<{ output: string }>> };
    script.stages.triage = [{ output: 'Touches every caller.\n```json\n{"risk":"HIGH","confidence":0.95,"rationale":"bench: park at the architecture gate"}\n```\n' }];
    const scriptPath = path.join(b.tmp, 'parking-agent.json');
    await writeFile(scriptPath, JSON.stringify(script));
    const repo = createSampleRepo(path.join(b.tmp, 'repo'));
    const queue = 'parked';
    const worker = await benchWorker(b, queue, { maxCachedWorkflows: CACHE });
    const before = process.memoryUsage();
    const started = t();
    const result = await withWorker(worker, async () => {
      let parked = 0;
      await mapLimit(
        Array.from({ length: N }, (_, i) => i),
        C,
        async (i) => {
          const handle = await startIntent(b.client, { id: `parked-${i}`, goal: 'Add slugify', repoPath: repo, paths: ['lib/**'], agent: { kind: 'scripted', scriptPath }, limits: { cooldown: '0s' } }, queue);
          for (;;) {
            const description = await handle.describe();
            if (description.searchAttributes.WardenGate?.[0] === 'architecture') break;
            if (description.status.name !== 'RUNNING') throw new Error(`parked-${i} ended ${description.status.name}`);
            await sleep(100);
          }
          parked += 1;
          if (parked % 25 === 0 || parked === N) progress(`${parked}/${N} parked at the architecture gate, ${secs(t() - started)}, RSS ${mb(process.memoryUsage().rss)} MB`);
        },
      );
      endProgress();
      // Let the worker settle (cache, GC) before measuring.
      await sleep(5000);
      global.gc?.();
      const after = process.memoryUsage();
      return { parked, seconds: (t() - started) / 1000, rssMb: mb(after.rss), heapUsedMb: mb(after.heapUsed), rssBeforeMb: mb(before.rss) };
    });
    out(`${result.parked} intents parked in ${result.seconds.toFixed(0)} s (workflow cache ${WORKER.maxCachedWorkflows}, workflow heap ${WORKER.workflowHeapMb} MB); process RSS ${result.rssMb} MB (heap ${result.heapUsedMb} MB; ${result.rssBeforeMb} MB before) — target ≤ ${TARGET_MB} MB`);
    await writeResult('parked', { intents: N, maxCachedWorkflows: WORKER.maxCachedWorkflows ?? null, workflowHeapMb: WORKER.workflowHeapMb ?? null, ...result, targetMb: TARGET_MB });
    return 0;
  } finally {
    await b.close();
  }
}

runBenchmark('parked-intents', main);
