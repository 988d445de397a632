/**
 * Every benchmark at its smoke size, one after another: each must exit 0 and end with its figures
 * as a JSON line. This checks that the benchmarks still run against today's code, not what they
 * measure (a smoke size is far too small for that). The list is every `bench:*`, `chaos` and `chaos:*`
 * script in package.json, so a new benchmark is in it from the start.
 *
 *   npm run bench:smoke [-- --only peer,pipeline] [--timeout 600]
 *
 * Exit 0 when all ran; 1 with the failing ones' output otherwise. Ends with a JSON line:
 * {"benchmarks":{"<script>":{"ok":true,"seconds":…},…}}.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { out, runBenchmark, secs, t } from './console';
import { REPO_ROOT, typeScriptArgs } from './harness';

/** A benchmark as package.json runs it: the script's name and the file tsx runs. */
export interface BenchScript {
  readonly name: string;
  readonly file: string;
}

/** The benchmarks package.json lists (`bench:*`, `chaos`, `chaos:*`), but not this runner. */
export function benchScripts(): BenchScript[] {
  const scripts = (JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
  return Object.entries(scripts)
    .filter(([name]) => /^(bench|chaos)(:|$)/.test(name) && name !== 'bench:smoke')
    .map(([name, command]) => {
      const file = /^tsx (bench\/\S+\.ts)$/.exec(command)?.[1];
      if (!file) throw new Error(`package.json script ${name} is not "tsx bench/<file>.ts": ${command}`);
      return { name, file };
    });
}

/**
 * Benchmarks whose smoke runs on the real Temporal server, built from source into the Warden home
 * (`bench:cluster` skips its real-server columns while the build is missing; `chaos` builds it).
 */
export const REAL_SERVER_BENCHES: ReadonlySet<string> = new Set(['chaos', 'bench:cluster']);

/** The last line of `stdout` that is a JSON object: a benchmark's figures. */
export function figuresOf(stdout: string): Record<string, unknown> | undefined {
  const lines = stdout.split('\n').filter((line) => line.startsWith('{'));
  for (const line of lines.reverse()) {
    try {
      const value: unknown = JSON.parse(line);
      if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
    } catch {
      // a log line that only looks like JSON
    }
  }
  return undefined;
}

export interface SmokeRun {
  readonly ok: boolean;
  readonly seconds: number;
  readonly problem?: string;
  readonly output: string;
}

/** Runs one benchmark at its smoke size in its own process group, killed whole past the timeout. */
export function smoke(bench: BenchScript, timeoutMs: number): Promise<SmokeRun> {
  const started = t();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, typeScriptArgs(bench.file, '--smoke'), { cwd: REPO_ROOT, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, CI: 'true' } });
    let stdout = '';
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      output += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => void (output += chunk.toString()));
    let hung = false;
    const guard = setTimeout(() => {
      hung = true;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // gone already
      }
    }, timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(guard);
      const seconds = Math.round((t() - started) / 100) / 10;
      const problem = hung
        ? `still running after ${timeoutMs / 1000} s: killed`
        : code !== 0
          ? `exited ${code ?? signal}`
          : figuresOf(stdout) === undefined
            ? 'printed no figures (no JSON line)'
            : undefined;
      resolve({ ok: problem === undefined, seconds, problem, output });
    });
  });
}

async function main(): Promise<number> {
  const { values: flags } = parseArgs({ options: { only: { type: 'string' }, timeout: { type: 'string', default: '600' } } });
  const timeoutMs = Number(flags.timeout) * 1000;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    out('--timeout takes a number of seconds > 0');
    return 2;
  }
  const only = flags.only?.split(',').map((name) => (name.includes(':') ? name : `bench:${name}`));
  const benches = benchScripts().filter((b) => !only || only.includes(b.name));
  if (only && benches.length !== only.length) {
    out(`--only names scripts that are not benchmarks: ${only.filter((name) => !benches.some((b) => b.name === name)).join(', ')}`);
    return 2;
  }
  out(`benchmark smoke: ${benches.length} benchmarks at their smoke size, one at a time`);
  const results: Record<string, { ok: boolean; seconds: number; problem?: string }> = {};
  for (const bench of benches) {
    const run = await smoke(bench, timeoutMs);
    results[bench.name] = { ok: run.ok, seconds: run.seconds, ...(run.problem ? { problem: run.problem } : {}) };
    out(`${run.ok ? 'ok  ' : 'FAIL'} ${bench.name} (${secs(run.seconds * 1000)})${run.problem ? `: ${run.problem}` : ''}`);
    if (!run.ok) out(run.output.split('\n').slice(-40).map((line) => `     | ${line}`).join('\n'));
  }
  out(JSON.stringify({ benchmarks: results }));
  return Object.values(results).every((r) => r.ok) ? 0 : 1;
}

if (require.main === module) runBenchmark('smoke', main);
