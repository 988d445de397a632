/**
 * `warden demo` (and `npm start` in a checkout): the whole pipeline on a sample repository, with
 * the bundled scripted agent and the embedded Temporal server. No account, key or Docker needed.
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import type { Logger } from 'pino';
import { resolveConfig } from '../config/load';
import { loadRuntimeConfig, type RuntimeConfig } from '../runtime/config';
import { createCommandLogger } from '../runtime/logger';
import { requireSandbox } from '../runtime/sandbox-readiness';
import { UserError } from '../shared/errors';
import { reportResult } from './report';
import { runIntent } from './run-intent';
import { approvalsFrom } from './intent-input';
import { createSampleRepo } from './sample-repo';
import { forTerminal } from '../shared/control-characters';

/** The scripted agent's answers for the sample repository, shipped with the package. */
export const DEMO_AGENT_SCRIPT = path.resolve(__dirname, '../../examples/demo-agent.json');

/** Runs the demo intent to its merge; returns the exit code. */
export async function runDemo(config: RuntimeConfig, logger: Logger, print: (line: string) => void): Promise<number> {
  // The demo runs its tests where a real agent's would: inside bubblewrap, installed first if we may.
  await requireSandbox({ allowUnconfined: false, install: true, offerUnconfined: false, log: print, warn: print });
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '').replace('T', '-');
  const repoPath = createSampleRepo(path.join(config.wardenHome, 'demo', `sample-strings-${stamp}`));
  print(`sample repository: ${repoPath} (a failing test for a missing slugify())`);
  const safety = resolveConfig({});
  const result = await runIntent(
    {
      id: `demo-${stamp}`,
      goal: 'Add slugify() to the strings library so its test passes',
      repoPath,
      baseBranch: 'main',
      paths: ['lib/**'],
      agent: { kind: 'scripted', scriptPath: DEMO_AGENT_SCRIPT },
      // The design and the spec are reviewed before their gates, as a config's `review.design` asks.
      reviewPolicy: { design: true },
      // The scripted agent answers at once: no need for the default 60 s between impl attempts.
      limits: { cooldown: '0s' },
      // Who may decide, as `warden run` would say for this server (unsigned decisions count on the embedded one).
      approvals: approvalsFrom({ ...safety, embeddedServer: config.temporalAddress === undefined }),
    },
    {
      config,
      safety,
      logger,
      detach: false,
      approve: true,
      interactive: false,
      by: process.env.USER || 'demo',
      print,
    },
  );
  const code = reportResult(result, undefined, print);
  if (code === 0) {
    print('\nbase branch after the merge:');
    print(execFileSync('git', ['log', '--oneline', '--graph', '-6', 'main'], { cwd: repoPath, encoding: 'utf8' }).trimEnd());
  }
  return code;
}

if (require.main === module) {
  const print = (line: string): void => void process.stdout.write(`${forTerminal(line)}\n`);
  const config = loadRuntimeConfig(process.env);
  const { logger } = createCommandLogger({ level: config.logLevel, format: config.logFormat, wardenHome: config.wardenHome });
  runDemo(config, logger, print).then(
    (code) => process.exit(code),
    (error: unknown) => {
      // A missing prerequisite is said as it is; anything else is a failure of the demo.
      process.stderr.write(`${forTerminal(error instanceof UserError ? error.message : `warden demo failed: ${(error as Error).message ?? String(error)}`)}\n`);
      process.exit(error instanceof UserError ? error.exitCode : 1);
    },
  );
}
