/**
 * Parked intents: N intents (default 1000) waiting at a gate on one worker — what does the
 * worker's process hold in memory? Each intent's triage rates it HIGH risk, so it parks at the
 * architecture gate right after triage (its worktree made, one agent stage run, its ledger rows
 * written). The worker is `warden worker`, run as its own process the way a user runs it (with a
 * warden.config.json that lifts the rate limits); its RSS is read from /proc while intents park
 * and after they have: 5 s after the last, and every 5 s for a minute (`--settle`) at rest.
 *
 *   npx tsx bench/parked.ts [--intents 1000] [--concurrency 16] [--cache N] [--heap MB] [--settle 60] [--smoke]
 *   npm run bench:parked
 *
 * Everything is its own and torn down at the end. Results: bench/results/parked.json, the
 * worker's log: bench/results/parked-worker.log.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startIntent } from '../src/client/intents';
import { createSampleRepo } from '../src/client/sample-repo';
import { TASK_QUEUE } from '../src/shared/ids';
import { endProgress, mapLimit, out, progress, runBenchmark, secs, sized, sleep, t } from './console';
import { REPO_ROOT, RESULTS_DIR, startBench, unthrottledConfig, unthrottledConfigFile, writeResult } from './harness';

const { values: flags } = parseArgs({ options: { intents: { type: 'string' }, concurrency: { type: 'string' }, cache: { type: 'string' }, heap: { type: 'string' }, settle: { type: 'string' }, smoke: { type: 'boolean', default: false } } });
/** `--cache N`: the worker's maxCachedWorkflows (config worker.maxCachedWorkflows); default: the config's. */
const CACHE = flags.cache === undefined ? undefined : Number(flags.cache);
/** `--heap MB`: the workflow thread's heap limit (config worker.workflowHeapMb); default: the config's. */
const HEAP = flags.heap === undefined ? undefined : Number(flags.heap);
const N = sized(flags.intents, flags.smoke, 1000, 3);
const C = sized(flags.concurrency, flags.smoke, 16, 3);
/** `--settle S`: how long the worker is watched at rest once all have parked (RSS every 5 s). */
const SETTLE_S = sized(flags.settle, flags.smoke, 60, 5);
if (
  !Number.isInteger(N) || N < 1 || !Number.isInteger(C) || C < 1 || !Number.isInteger(SETTLE_S) || SETTLE_S < 5 ||
  (CACHE !== undefined && (!Number.isInteger(CACHE) || CACHE < 0)) ||
  (HEAP !== undefined && (!Number.isInteger(HEAP) || HEAP < 64))
) {
  out('--intents and --concurrency take whole numbers ≥ 1, --cache one ≥ 0, --heap one ≥ 64, --settle one ≥ 5 (seconds)');
  process.exit(2);
}
const OVERRIDES = { ...(CACHE === undefined ? {} : { maxCachedWorkflows: CACHE }), ...(HEAP === undefined ? {} : { workflowHeapMb: HEAP }) };
const CONFIG_FILE = unthrottledConfigFile(OVERRIDES);
/** The worker's settings as the benchmark runs it: the config's defaults, with --cache and --heap applied. */
const WORKER = unthrottledConfig(OVERRIDES).worker;
const TARGET_MB = 500;
const WORKER_LOG = path.join(RESULTS_DIR, 'parked-worker.log');

/** A process's resident set, from /proc (what `ps` shows as RSS), in MB. */
async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1]);
  if (!Number.isFinite(kb)) throw new Error(`no VmRSS for process ${pid}`);
  return Math.round(kb / 1024);
}

/** `warden worker` in `cwd` against the bench's servers; resolves once it says it is running. */
async function startWorkerProcess(cwd: string, env: NodeJS.ProcessEnv): Promise<ChildProcess> {
  await mkdir(RESULTS_DIR, { recursive: true }); // a fresh clone has no bench/results yet
  const log = createWriteStream(WORKER_LOG);
  const child = spawn(process.execPath, [path.join(REPO_ROOT, 'bin', 'warden.js'), 'worker'], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stderr!.pipe(log);
  await new Promise<void>((resolve, reject) => {
    let seen = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      log.write(chunk);
      seen = (seen + chunk.toString()).slice(-10_000);
      if (seen.includes('worker running against')) resolve();
    });
    child.once('exit', (code, signal) => reject(new Error(`warden worker exited (${signal ?? `code ${code}`}) before it ran; see ${WORKER_LOG}`)));
    child.once('error', reject);
  });
  return child;
}

async function stopWorkerProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGINT');
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  await exited;
  clearTimeout(timer);
}

async function main(): Promise<number> {
  out(`parked-intents benchmark: ${N} intents waiting at a gate on one worker process; ${os.cpus().length} cores, node ${process.version}`);
  const b = await startBench('parked');
  let worker: ChildProcess | undefined;
  try {
    // The demo script, with triage rating the intent HIGH risk: it parks at the architecture gate.
    const script = JSON.parse(await readFile(b.demoScript, 'utf8')) as { stages: Record<string, Array<{ output: string }>> };
    script.stages.triage = [{ output: 'Touches every caller.\n```json\n{"risk":"HIGH","confidence":0.95,"rationale":"bench: park at the architecture gate"}\n```\n' }];
    const scriptPath = path.join(b.tmp, 'parking-agent.json');
    await writeFile(scriptPath, JSON.stringify(script));
    const repo = createSampleRepo(path.join(b.tmp, 'repo'));
    await writeFile(path.join(b.tmp, 'warden.config.json'), JSON.stringify(CONFIG_FILE, null, 2));
    // WARDEN_HOME is the bench's folder: the worker joins the bench's embedded PostgreSQL there.
    progress('starting warden worker…');
    worker = await startWorkerProcess(b.tmp, {
      ...process.env,
      TEMPORAL_ADDRESS: b.server.address,
      TEMPORAL_NAMESPACE: b.server.namespace,
      WARDEN_HOME: b.tmp,
      DATABASE_URL: '',
    });
    const pid = worker.pid!;
    const rssBeforeMb = await rssMb(pid);
    const started = t();
    let parked = 0;
    let peakMb = rssBeforeMb;
    const sampler = setInterval(() => void rssMb(pid).then((now) => (peakMb = Math.max(peakMb, now)), () => undefined), 500);
    try {
      await mapLimit(
        Array.from({ length: N }, (_, i) => i),
        C,
        async (i) => {
          const handle = await startIntent(b.client, { id: `parked-${i}`, goal: 'Add slugify', repoPath: repo, paths: ['lib/**'], agent: { kind: 'scripted', scriptPath }, limits: { cooldown: '0s' } }, TASK_QUEUE);
          for (;;) {
            const description = await handle.describe();
            if (description.searchAttributes.WardenGate?.[0] === 'architecture') break;
            if (description.status.name !== 'RUNNING') throw new Error(`parked-${i} ended ${description.status.name}`);
            await sleep(100);
          }
          parked += 1;
          if (parked % 25 === 0 || parked === N) progress(`${parked}/${N} parked at the architecture gate, ${secs(t() - started)}, worker RSS ${await rssMb(pid)} MB`);
        },
      );
    } finally {
      clearInterval(sampler);
    }
    endProgress();
    const seconds = (t() - started) / 1000;
    // At rest: 5 s after the last intent parked, and then every 5 s while the worker stays idle.
    // The garbage of parking is given back over the next minute (V8 shrinks its heaps once the
    // allocation stops); a parked intent waits for hours, so the settled figure is the one held.
    const atRest: number[] = [];
    for (let waited = 5; waited <= SETTLE_S; waited += 5) {
      await sleep(5000);
      atRest.push(await rssMb(pid));
      progress(`at rest ${waited} s: worker RSS ${atRest.at(-1)} MB`);
    }
    endProgress();
    const rssAfterMb = atRest[0]!;
    const settledMb = atRest.at(-1)!;
    out(`${parked} intents parked in ${seconds.toFixed(0)} s (workflow cache ${WORKER.maxCachedWorkflows}, workflow heap ${WORKER.workflowHeapMb} MB); worker RSS ${rssBeforeMb} MB before the first intent, ${peakMb} MB at most while parking, ${rssAfterMb} MB 5 s after the last parked, ${settledMb} MB after ${SETTLE_S} s at rest (every 5 s: ${atRest.join(', ')}) — target ≤ ${TARGET_MB} MB`);
    await writeResult('parked', {
      intents: N,
      maxCachedWorkflows: WORKER.maxCachedWorkflows ?? null,
      workflowHeapMb: WORKER.workflowHeapMb ?? null,
      parked,
      seconds,
      rssMb: rssAfterMb,
      settledRssMb: settledMb,
      settleSeconds: SETTLE_S,
      atRestEvery5sMb: atRest,
      peakRssMb: peakMb,
      rssBeforeMb,
      targetMb: TARGET_MB,
      cores: os.cpus().length,
      node: process.version,
    });
    return 0;
  } finally {
    if (worker) await stopWorkerProcess(worker);
    await b.close();
  }
}

runBenchmark('parked-intents', main);
