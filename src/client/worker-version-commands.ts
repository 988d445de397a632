import type { Command } from 'commander';
import os from 'node:os';
import type { WardenConfig } from '../config/schema';
import type { RuntimeConfig } from '../runtime/config';
import { UserError } from '../shared/errors';
import type { DeploymentView } from '../workers/worker-deployment';
import type { TemporalTarget } from '../runtime/temporal';
import type * as WorkerDeploymentModule from '../workers/worker-deployment';
import type * as TemporalModule from '../runtime/temporal';

/* eslint-disable @typescript-eslint/no-require-imports -- loaded when a command runs (see cli.ts) */
const workerDeployment = () => require('../workers/worker-deployment') as typeof WorkerDeploymentModule;
const temporal = () => require('../runtime/temporal') as typeof TemporalModule;
/* eslint-enable @typescript-eslint/no-require-imports */

interface Io {
  print(line: string): void;
  printJson(value: unknown): void;
}

/**
 * `warden workers`: the versions of the workers' deployment (worker versioning, config
 * `worker.deployment`) and which is current; `warden workers promote BUILD_ID` makes one current
 * (docs/operations.md, "Rolling out a new worker version").
 */
export function addWorkerVersionCommands(program: Command, config: RuntimeConfig, io: Io, settings: () => WardenConfig): void {
  /** Both commands are about workers that run against a server: none is started here. */
  const runningServer = async (): Promise<TemporalTarget> => {
    const target = await temporal().connectTemporalIfRunning(config);
    if (!target) throw new UserError('the Temporal server is not running: start it with `warden dev` (or set TEMPORAL_ADDRESS); the versions are those of the workers polling it', 1);
    return target;
  };
  const deploymentOf = (flag: string | undefined): string => {
    const name = flag ?? settings().worker.deployment?.name;
    if (!name) throw new UserError('worker versioning is off: set worker.deployment.name in the config (docs/configuration.md), or give --deployment NAME');
    return name;
  };

  const workers = program
    .command('workers')
    .description("The versions of the workers' deployment (worker versioning: config worker.deployment), which one is current and which drain")
    .option('--deployment <name>', "the deployment (default: the config's worker.deployment.name)")
    .option('--json', 'print JSON')
    .action(async (flags: { deployment?: string; json?: boolean }) => {
      const name = deploymentOf(flags.deployment);
      const target = await runningServer();
      try {
        const deployment = await workerDeployment().describeDeployment(target.client.workflowService, target.namespace, name);
        if (!deployment) throw new UserError(`no worker of deployment ${name} has polled the Temporal server yet: start one with worker.deployment.name set to ${name}`, 1);
        if (flags.json) return io.printJson(viewForJson(deployment));
        for (const line of renderDeployment(deployment)) io.print(line);
      } finally {
        await target.close();
      }
    });

  workers
    .command('promote <buildId>')
    .description("Make a version current: every intent moves to its workers at its next workflow task, new ones start there; the old version's workers can then be stopped")
    .option('--deployment <name>', "the deployment (default: the config's worker.deployment.name)")
    .option('--json', 'print JSON')
    .action(async (buildId: string, flags: { deployment?: string; json?: boolean }) => {
      const name = deploymentOf(flags.deployment ?? workers.opts<{ deployment?: string }>().deployment);
      const target = await runningServer();
      try {
        const before = await workerDeployment().describeDeployment(target.client.workflowService, target.namespace, name);
        await workerDeployment().makeCurrent(target.client.workflowService, target.namespace, name, buildId, `warden workers promote (${os.userInfo().username}@${os.hostname()})`).catch((error: unknown) => {
          throw error instanceof workerDeployment().DeploymentChangeRefused ? new UserError(error.message) : error;
        });
        if (flags.json) return io.printJson({ deployment: name, current: buildId, previous: before?.current ?? null });
        io.print(`${buildId} is now the current version of deployment ${name}${before?.current && before.current !== buildId ? ` (was ${before.current})` : ''}`);
        io.print('intents move to it at their next workflow task; stop the old workers once `warden workers` shows their version drained');
      } finally {
        await target.close();
      }
    });
}

function viewForJson(deployment: DeploymentView): unknown {
  return {
    deployment: deployment.name,
    current: deployment.current ?? null,
    ramping: deployment.ramping ?? null,
    versions: deployment.versions.map((v) => ({ buildId: v.buildId, status: v.status, createdAt: v.createdAt?.toISOString() ?? null })),
  };
}

/** `deployment warden: current 0.2.0-…` and a line per version, newest first. */
export function renderDeployment(deployment: DeploymentView): string[] {
  const ramping = deployment.ramping ? `; ramping ${deployment.ramping.buildId} (${deployment.ramping.percent}%)` : '';
  const versions = [...deployment.versions].sort((a, b) => (b.createdAt?.getTime() ?? 0) - (a.createdAt?.getTime() ?? 0));
  const width = Math.max(8, ...versions.map((v) => v.buildId.length));
  return [
    `deployment ${deployment.name}: current ${deployment.current ?? 'none (intents go to unversioned workers)'}${ramping}`,
    `  ${'build id'.padEnd(width)}  ${'status'.padEnd(8)}  created`,
    ...versions.map((v) => `  ${v.buildId.padEnd(width)}  ${v.status.padEnd(8)}  ${v.createdAt?.toISOString() ?? '-'}`),
  ];
}
