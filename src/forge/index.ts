import type { ForgeKind } from '../shared/forge';
import type { ForgeClient, ForgeRepository } from './forge-client';
import { GiteaClient } from './gitea';

export type { ForgeClient, ForgeRepository, OpenPullRequest } from './forge-client';
export { ForgeError, type ForgeErrorKind } from './forge-client';

/** Makes the adapter for one forge kind. */
export type ForgeAdapter = (repository: ForgeRepository, token: string) => ForgeClient;

const notBuiltYet =
  (kind: ForgeKind): ForgeAdapter =>
  () => {
    throw new Error(`the ${kind} forge adapter is not built yet`);
  };

/** The adapter for each kind. GitHub's and GitLab's live on their own branches until merged. */
export const FORGE_ADAPTERS: Readonly<Record<ForgeKind, ForgeAdapter>> = {
  gitea: (repository, token) => new GiteaClient(repository, token),
  github: notBuiltYet('github'),
  gitlab: notBuiltYet('gitlab'),
};

/** The ForgeClient for the repository's forge, acting with `token`. */
export function forgeClient(repository: ForgeRepository, token: string, adapters: Readonly<Record<ForgeKind, ForgeAdapter>> = FORGE_ADAPTERS): ForgeClient {
  return adapters[repository.kind](repository, token);
}
