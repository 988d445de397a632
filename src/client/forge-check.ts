import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { forgeClient } from '../forge';
import { ForgeError, type ForgeClient, type ForgeRepository } from '../forge/forge-client';
import { forgeRepositoryFromRemote } from '../forge/remote';
import type { ForgeKind } from '../shared/forge';
import type { MergeSettings } from '../shared/merge-settings';

const execFileAsync = promisify(execFile);

/**
 * Token scopes a pull request needs, per forge, as the forge names them: pushing the branch and
 * opening, commenting on and merging the pull request. Any one set of a row is enough (`all` and
 * `repo` cover everything on their forge); where none is, the last set of the row that lacks the
 * fewest is named.
 */
const NEEDED_SCOPES: Readonly<Record<ForgeKind, readonly (readonly string[])[]>> = {
  gitea: [['all'], ['write:repository', 'write:issue']],
  github: [['public_repo'], ['repo']],
  gitlab: [['api']],
};

/** The scopes the token lacks for a pull request, or none (also when the forge does not say). */
export function missingScopes(kind: ForgeKind, scopes: readonly string[] | undefined): string[] {
  if (scopes === undefined) return [];
  const have = new Set(scopes.map((s) => s.trim()).filter(Boolean));
  if (NEEDED_SCOPES[kind].some((set) => set.every((scope) => have.has(scope)))) return [];
  // Name what is missing from the set that lacks the fewest.
  const lacking = NEEDED_SCOPES[kind].map((set) => set.filter((scope) => !have.has(scope)));
  return lacking.reduce((fewest, next) => (next.length <= fewest.length ? next : fewest));
}

export interface ForgeCheckResult {
  readonly status: 'ok' | 'warn' | 'fail';
  readonly detail: string;
  readonly fix?: string;
}

/**
 * `warden doctor` (and `warden init`) on the config's forge: the token is set, the repository's
 * remote names a repository on that forge, the token is accepted, and it has the scopes a pull
 * request needs. `makeClient` is the adapter factory (tests may pass their own).
 */
export async function checkForge(
  merge: MergeSettings | undefined,
  options: { readonly env: NodeJS.ProcessEnv; readonly repoPath: string; readonly makeClient?: (repository: ForgeRepository, token: string) => ForgeClient },
): Promise<ForgeCheckResult | undefined> {
  const forge = merge?.forge;
  if (!forge) return undefined;
  const how = merge.via === 'pull-request' ? 'merges go through pull requests' : 'merge.via is local, so this forge is used only with --merge-via pull-request';
  const token = options.env[forge.tokenEnv];
  if (!token) return { status: 'fail', detail: `${forge.kind}: ${forge.tokenEnv} is not set (${how})`, fix: `export ${forge.tokenEnv}=<a token of the forge user Warden acts as> where the worker runs` };
  let remoteUrl: string;
  try {
    remoteUrl = (await execFileAsync('git', ['remote', 'get-url', forge.remote], { cwd: options.repoPath })).stdout.trim();
  } catch {
    return { status: 'warn', detail: `${forge.kind}: ${options.repoPath} has no remote ${forge.remote} (run warden doctor in the repository Warden works on)`, fix: `git remote add ${forge.remote} URL` };
  }
  try {
    const repository = forgeRepositoryFromRemote(remoteUrl, { kind: forge.kind, ...(forge.url ? { webUrl: forge.url } : {}) });
    const client = (options.makeClient ?? forgeClient)(repository, token);
    const me = await client.whoami();
    const missing = missingScopes(forge.kind, me.scopes);
    if (missing.length > 0) {
      return { status: 'fail', detail: `${forge.kind} ${repository.path}: the token of ${me.login} lacks ${missing.join(', ')} (it has ${me.scopes?.join(', ') || 'none'})`, fix: `make a token with ${missing.join(', ')} and put it in ${forge.tokenEnv}` };
    }
    const scopes = me.scopes ? `scopes ${me.scopes.join(', ')}` : 'the forge does not list scopes';
    return { status: 'ok', detail: `${forge.kind} ${repository.webUrl}/${repository.path} as ${me.login} (${scopes}); ${how}` };
  } catch (error) {
    const kind = error instanceof ForgeError ? error.kind : undefined;
    const fix =
      kind === 'unauthorized' ? `the forge refuses the token in ${forge.tokenEnv}: make a new one` : kind === 'unreachable' ? `check that this machine reaches ${forge.url ?? remoteUrl}` : `check merge.forge in the config and the remote ${forge.remote}`;
    return { status: 'fail', detail: `${forge.kind}: ${error instanceof Error ? error.message : String(error)}`, fix };
  }
}
