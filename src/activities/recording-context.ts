import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { sortedJson } from '../gateway/exchange';
import type { RecordingContext } from '../ledger/exchange-store';
import type { Intent } from '../shared/intent';

const execFileAsync = promisify(execFile);

const WARDEN_VERSION = (JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string }).version;

/** Each CLI program's `--version`, asked once per worker: the installed program does not change under it. */
const versions = new Map<string, Promise<string>>();

function versionOf(program: string): Promise<string> {
  let version = versions.get(program);
  if (!version) {
    version = execFileAsync(program, ['--version'], { timeout: 30_000 }).then(
      ({ stdout, stderr }) => `${stdout}${stderr}`.trim().split('\n')[0] || 'unknown',
      () => 'unknown',
    );
    versions.set(program, version);
  }
  return version;
}

/**
 * What a replay of the intent needs besides its exchanges: the commit its first agent attempt
 * started from, a hash of the intent as the worker checked it (its completed config: agents,
 * limits, gates, paths), Warden's version, the agent profiles, and the version of each CLI they run.
 */
export async function recordingContextOf(intent: Intent, baseCommit: string): Promise<RecordingContext> {
  const agents: Record<string, Intent['agent']> = { default: intent.agent, ...intent.stageAgents };
  const cliVersions: Record<string, string> = {};
  for (const profile of Object.values(agents)) {
    if (profile.kind === 'command' && profile.cli && cliVersions[profile.cli] === undefined) cliVersions[profile.cli] = await versionOf(profile.command);
  }
  return {
    baseCommit,
    configHash: createHash('sha256').update(sortedJson(intent)).digest('hex'),
    wardenVersion: WARDEN_VERSION,
    agents,
    cliVersions,
  };
}
