import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { isGrpcServiceError } from '@temporalio/client';
import type { VersioningBehavior, WorkerDeploymentVersion } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import type { DeploymentSettings } from '../config/schema';

/** gRPC status codes the deployment calls answer with. */
const NOT_FOUND = 5;
const FAILED_PRECONDITION = 9;
/** How soon a starting worker looks again for its version on the server (it appears once the worker polls). */
const LOOK_AGAIN_MS = 500;
const LOOK_AGAIN_AFTER_ERRORS_MAX_MS = 60_000;

/**
 * Worker Deployment Versioning: workers of two Warden versions side by side during an upgrade.
 * Each worker polls as one version of its deployment; the server sends workflow and activity
 * tasks to the deployment's current version (and its ramping one, if any).
 */

/**
 * Every workflow on a versioned worker moves to the current version at its next workflow task.
 * An intent parked at a gate for days must not need the old workers until it ends (pinned, it
 * would), so the new code has to replay the old histories: test/workflows/replay.test.ts replays
 * the recorded histories of every kind of run against the workflow code of each change.
 */
export const VERSIONING_BEHAVIOR: VersioningBehavior = 'AUTO_UPGRADE';

type WorkflowService = Client['workflowService'];

/** Warden's own package version (package.json beside src/ in a checkout, beside dist/ when installed). */
const PACKAGE_VERSION = (JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string }).version;

/**
 * The version a worker polls as: the configured build id, or the package version and a hash of
 * the workflow code it runs (the bundle holds no paths of the machine it was made on, so the same
 * Warden gives the same id everywhere; changed workflow code gives a new one).
 */
export function deploymentVersionOf(settings: DeploymentSettings, workflowCode: string): WorkerDeploymentVersion {
  return { deploymentName: settings.name, buildId: settings.buildId ?? `${PACKAGE_VERSION}-${createHash('sha256').update(workflowCode).digest('hex').slice(0, 12)}` };
}

/** One version of a deployment as `warden workers` shows it. */
export interface DeploymentVersionView {
  readonly buildId: string;
  /** inactive (never current), current, ramping, draining (still has pinned work), drained. */
  readonly status: string;
  readonly createdAt: Date | undefined;
}

export interface DeploymentView {
  readonly name: string;
  readonly current: string | undefined;
  readonly ramping: { readonly buildId: string; readonly percent: number } | undefined;
  readonly versions: readonly DeploymentVersionView[];
  /** Lets a change say which state of the deployment it was decided on. */
  readonly conflictToken: Uint8Array;
}

/** The deployment's versions and routing, or undefined when no worker of it has polled yet. */
export async function describeDeployment(service: WorkflowService, namespace: string, name: string): Promise<DeploymentView | undefined> {
  let response: temporal.api.workflowservice.v1.IDescribeWorkerDeploymentResponse;
  try {
    response = await service.describeWorkerDeployment({ namespace, deploymentName: name });
  } catch (error) {
    if (isGrpcServiceError(error) && error.code === NOT_FOUND) return undefined;
    throw error;
  }
  const info = response.workerDeploymentInfo;
  const routing = info?.routingConfig;
  const ramping = routing?.rampingDeploymentVersion?.buildId;
  return {
    name,
    current: routing?.currentDeploymentVersion?.buildId ?? undefined,
    ramping: ramping ? { buildId: ramping, percent: routing?.rampingVersionPercentage ?? 0 } : undefined,
    versions: (info?.versionSummaries ?? []).map((summary) => ({
      buildId: summary.deploymentVersion?.buildId ?? '',
      status: statusName(summary.status),
      createdAt: summary.createTime ? new Date(Number(summary.createTime.seconds ?? 0) * 1000) : undefined,
    })),
    conflictToken: response.conflictToken ?? new Uint8Array(),
  };
}

function statusName(status: temporal.api.enums.v1.WorkerDeploymentVersionStatus | null | undefined): string {
  const name = temporal.api.enums.v1.WorkerDeploymentVersionStatus[status ?? 0] as string | undefined;
  return (name ?? 'WORKER_DEPLOYMENT_VERSION_STATUS_UNSPECIFIED').replace('WORKER_DEPLOYMENT_VERSION_STATUS_', '').toLowerCase();
}

/** Why a version cannot be made current, in words for a person. */
export class DeploymentChangeRefused extends Error {}

/**
 * Makes `buildId` the deployment's current version: from the next workflow task on, every intent
 * runs on its workers. A version whose workers have not polled yet is refused (nothing could run).
 */
export async function makeCurrent(service: WorkflowService, namespace: string, name: string, buildId: string, identity: string): Promise<void> {
  const deployment = await describeDeployment(service, namespace, name);
  if (!deployment) throw new DeploymentChangeRefused(`no worker of deployment ${name} has polled the server yet: start one first`);
  if (!deployment.versions.some((version) => version.buildId === buildId)) {
    throw new DeploymentChangeRefused(`deployment ${name} has no version ${buildId} (its versions: ${deployment.versions.map((v) => v.buildId).join(', ') || 'none'}); start its workers first`);
  }
  await service.setWorkerDeploymentCurrentVersion({ namespace, deploymentName: name, buildId, conflictToken: deployment.conflictToken, identity });
}

/**
 * The first version of a deployment becomes its current one when its worker starts: until a
 * deployment has a current version, the server gives its intents to unversioned workers only, and
 * a team that turns versioning on would see every intent wait. Later versions are made current by
 * a person (`warden workers promote`). Tries until the worker's version is known to the server
 * (it is once the worker polls) or `running()` turns false, less often after each error (a
 * server without deployments answers every look with one); never throws.
 */
export async function becomeCurrentIfNone(
  service: WorkflowService,
  namespace: string,
  version: WorkerDeploymentVersion,
  options: { readonly identity: string; readonly running: () => boolean; readonly onError?: (error: unknown) => void },
): Promise<'made-current' | 'has-current' | 'stopped'> {
  let pause = LOOK_AGAIN_MS;
  while (options.running()) {
    try {
      const deployment = await describeDeployment(service, namespace, version.deploymentName);
      if (deployment?.current) return 'has-current';
      if (deployment?.versions.some((v) => v.buildId === version.buildId)) {
        await service.setWorkerDeploymentCurrentVersion({ namespace, deploymentName: version.deploymentName, buildId: version.buildId, conflictToken: deployment.conflictToken, identity: options.identity });
        return 'made-current';
      }
    } catch (error) {
      // Another worker changed the deployment first (the conflict token): look again.
      if (!(isGrpcServiceError(error) && error.code === FAILED_PRECONDITION)) {
        options.onError?.(error);
        pause = Math.min(pause * 2, LOOK_AGAIN_AFTER_ERRORS_MAX_MS);
      }
    }
    await new Promise<void>((resolve) => setTimeout(resolve, pause).unref());
  }
  return 'stopped';
}
